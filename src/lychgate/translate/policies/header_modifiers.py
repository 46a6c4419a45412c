"""headerModifiers: set, add and remove request and response headers (route header ops).

A value can come from a Secret (`secretRef`, kgateway's shape): `name` and `key`
pick the header and the Secret's key (either one stands for both), and with
neither every entry of the Secret becomes a header. A Secret in another
namespace needs a ReferenceGrant there for TrafficPolicies of the policy's namespace.
kgateway's earlier `requestHeadersFromSecret` / `responseHeadersFromSecret`
(`secretRef`, `header`, `key`) are read as such `set` entries.
`filterStage` moves the header changes from the route into a filter at that
stage of the chain (xds/translator/header_stage.py).
"""

from __future__ import annotations

from typing import Any

from lychgate import envoy_limits, ir
from lychgate.api.core import Secret
from lychgate.api.lychgate import GROUP
from lychgate.api.policy import TrafficPolicy
from lychgate.store import Store
from lychgate.translate.grants import grant_allows
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.secrets import literal_header_value, secret_value
from lychgate.translate.values import (
    CompileContext,
    Invalid,
    Unresolved,
    envoy_check,
    header_name,
)

_FROM = "referencedFrom"  # set by normalize: the namespace of the policy that names the Secret


def _from_secret(store: Store, header: dict[str, Any], path: str) -> list[tuple[str, str]]:
    ref = header["secretRef"]
    ns, name, origin = ref["namespace"], ref["name"], ref[_FROM]
    if ns != origin and not grant_allows(store, GROUP, "TrafficPolicy", origin, "", "Secret", ns, name):
        raise Unresolved("RefNotPermitted", f"{path}.secretRef: Secret {ns}/{name} is in another namespace and no "
                                            f"ReferenceGrant in {ns} allows TrafficPolicies from {origin}")
    secret = store.get(Secret, ns, name)
    if secret is None:
        raise Unresolved("SecretNotFound", f"{path}.secretRef: Secret {ns}/{name} not found")
    key = ref.get("key") or header.get("name")
    if key is None:  # neither: every entry is a header
        keys = sorted({*secret.data, *secret.string_data})
        return [(header_name(k, f"{path}.secretRef (key {k})"), literal_header_value(secret_value(secret, k) or ""))
                for k in keys]
    value = secret_value(secret, key)
    if value is None:
        raise Unresolved("SecretNotFound", f"{path}.secretRef: Secret {ns}/{name} has no key {key}")
    return [(header_name(header.get("name") or key, f"{path}.name"), literal_header_value(value))]


def _ops(store: Store, value: dict[str, Any] | None, path: str) -> ir.HeaderOps:
    if not value:
        return ir.NO_HEADERS
    lists: dict[str, list[tuple[str, str]]] = {"set": [], "add": []}
    for op in ("set", "add"):
        for i, h in enumerate(value.get(op) or []):
            where = f"{path}.{op}[{i}]"
            if "secretRef" in h:
                entries = _from_secret(store, h, where)
            else:
                entries = [(header_name(h["name"], f"{where}.name"), h["value"])]
            for name, text in entries:
                envoy_check(envoy_limits.modifiable_header, name, f"{where}.name")
                envoy_check(envoy_limits.header_value, text, f"{where}.value")
            lists[op].extend(entries)
    remove = []
    for i, n in enumerate(value.get("remove") or []):
        remove.append(header_name(n, f"{path}.remove[{i}]"))
        envoy_check(envoy_limits.removable_header, n, f"{path}.remove[{i}]")
    return ir.HeaderOps(set=tuple(lists["set"]), add=tuple(lists["add"]), remove=tuple(remove))


class HeaderModifiersField(PolicyField):
    name, attr = "headerModifiers", "header_modifiers"
    layers_across_tiers = True

    def merge(self, high: dict[str, Any], low: dict[str, Any]) -> dict[str, Any]:
        """A route's header changes, then its ListenerSet's, then its Gateway's, as kgateway
        applies them: every tier's `add`s stay, and on a header both `set`, the outer tier's
        value is the one left (it is applied last, as Envoy applies a virtual host's after
        its route's)."""
        out: dict[str, Any] = {}
        for direction in ("request", "response"):
            inner, outer = high.get(direction) or {}, low.get(direction) or {}
            if not inner and not outer:
                continue
            ops = {op: list(inner.get(op) or []) + list(outer.get(op) or []) for op in ("set", "add")}
            ops["remove"] = list(dict.fromkeys([*(inner.get("remove") or []), *(outer.get("remove") or [])]))
            out[direction] = {k: v for k, v in ops.items() if v}
        stage = high.get("filterStage") or low.get("filterStage")
        if stage:
            out["filterStage"] = stage
        return out

    def normalize(self, policy: TrafficPolicy, value: dict[str, Any]) -> dict[str, Any]:
        for direction in ("request", "response"):
            # requestHeadersFromSecret / responseHeadersFromSecret: `set` entries by another name.
            mappings = value.pop(f"{direction}HeadersFromSecret", None)
            if mappings:
                ops = value[direction] = dict(value.get(direction) or {})
                ops["set"] = list(ops.get("set") or []) + [
                    {"name": m["header"], "secretRef": {**m["secretRef"], "key": m["key"]}} for m in mappings]
        for direction in ("request", "response"):
            for op in ("set", "add"):
                for h in (value.get(direction) or {}).get(op) or []:
                    if "secretRef" in h:
                        h["secretRef"] = {**h["secretRef"], _FROM: policy.namespace,
                                          "namespace": h["secretRef"].get("namespace") or policy.namespace}
        return value

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if not value.get("request") and not value.get("response"):
            raise Invalid(path, "at least one of request or response must be set")
        stage = value.get("filterStage")
        return {"request_headers": _ops(ctx.store, value.get("request"), f"{path}.request"),
                "response_headers": _ops(ctx.store, value.get("response"), f"{path}.response"),
                "header_stage": (stage["stage"], stage.get("predicate", "During")) if stage else None}


register(HeaderModifiersField())
