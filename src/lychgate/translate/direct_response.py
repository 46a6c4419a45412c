"""HTTPRoute `ExtensionRef` filters naming a DirectResponse → ir.DirectResponse.

A rule with such a filter answers itself: it may not also have backendRefs or
a redirect (the rule is then invalid and answers 500, its status says why), and
a DirectResponse that does not exist makes the rule answer 500 as well.
"""

from __future__ import annotations

import json

from lychgate import envoy_limits, ir
from lychgate.api.direct_response import DirectResponse, DirectResponseSpec
from lychgate.api.gateway import LocalObjectReference
from lychgate.api.lychgate import GROUP
from lychgate.store import Store
from lychgate.translate.rule_filters import InvalidRule

GROUPS = frozenset({GROUP, "gateway.kgateway.dev"})


def from_filter(store: Store, namespace: str, ref: LocalObjectReference, where: str) -> ir.DirectResponse:
    if ref.group not in GROUPS or ref.kind != "DirectResponse":
        raise InvalidRule(f"{where}: {ref.group or 'core'}/{ref.kind} is not supported; "
                          f"an ExtensionRef filter can name a {GROUP} DirectResponse")
    found = store.get(DirectResponse, namespace, ref.name)
    if found is None:
        raise InvalidRule(f"{where}: DirectResponse {namespace}/{ref.name} not found")
    try:
        return response_of(found.spec)
    except envoy_limits.EnvoyRejects as err:
        raise InvalidRule(f"{where}: DirectResponse {namespace}/{ref.name} spec.body: {err}") from None


def response_of(spec: DirectResponseSpec) -> ir.DirectResponse:
    """The answer a DirectResponse spec (or a TrafficPolicy's `directResponse`) describes;
    raises EnvoyRejects for a body Envoy would refuse."""
    fmt = spec.body_format
    if fmt is None:
        envoy_limits.direct_response_body(spec.body or "")
        return ir.DirectResponse(spec.status, spec.body or "")
    return ir.DirectResponse(
        spec.status, text_format=fmt.text, content_type=fmt.content_type,
        # Canonical JSON text: the IR stays hashable, the proto gets the same Struct.
        json_format=json.dumps(fmt.json_, sort_keys=True) if fmt.json_ is not None else None)
