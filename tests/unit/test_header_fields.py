"""Header names and values in the kgateway kinds carry kgateway's constraints (shared
types in lychgate/api/headers.py), so a value that would smuggle a second header, or a
name that is not a token, is refused when the manifest loads, naming the field.

Envoy's own behaviour, measured with `envoy --mode validate` (Envoy 1.40): a route's
`request_headers_to_add` value with CR/LF (or NUL) fails Envoy's proto validation
(`HeaderValueValidationError.Value: value does not match regex pattern
"^[^\\x00\\n\\r]*$"`), which NACKs the whole RouteConfiguration; a value with another
control character (\\x01), a trailing space or non-ASCII text is accepted by Envoy and
sent on. kgateway's pattern refuses all of those."""

from __future__ import annotations

from typing import Any

import pytest

from lychgate.api.registry import ManifestError, parse


def traffic_policy(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "r"}],
                     **spec}}


def header_set(name: str, value: str) -> dict[str, Any]:
    return {"headerModifiers": {"request": {"set": [{"name": name, "value": value}]}}}


@pytest.mark.parametrize("value", ["a\r\nx-admin: true", "a\nb", "a\x00b", "a\x01b", "trailing ", " leading",
                                   "two  spaces", "caf\u00e9", ""])
def test_header_modifier_values_outside_kgateways_pattern_are_refused(value: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse(traffic_policy(header_set("x-tenant", value)))
    assert "headerModifiers.request.set[0].value" in str(err.value)


@pytest.mark.parametrize("name", ["x tenant", "x-a\r\nx-b", ":authority", "x:y", "", "a" * 257])
def test_header_modifier_names_must_be_tokens(name: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse(traffic_policy(header_set(name, "v")))
    assert "headerModifiers.request.set[0].name" in str(err.value)


@pytest.mark.parametrize("value", ["acme", "Bearer abc.def", "a\tb", "!#$%&'()*+,-./:;<=>?@[]^_`{|}~", "x" * 4096])
def test_values_kgateway_accepts_load(value: str) -> None:
    parse(traffic_policy(header_set("x-tenant", value)))


def test_transformation_names_may_be_pseudo_headers_and_values_are_templates() -> None:
    """kgateway's transformation HeaderName allows one leading ':'; the value is an Inja
    template, which kgateway leaves free (it may hold quotes, braces, spaces, newlines)."""
    template = '{{ request_header("x-a") }}  {% if true %}\n yes {% endif %}'
    parse(traffic_policy({"transformation": {"request": {"set": [{"name": ":path", "value": template}]}}}))
    with pytest.raises(ManifestError) as err:
        parse(traffic_policy({"transformation": {"request": {"set": [{"name": "x a", "value": "v"}]}}}))
    assert "transformation.request.set[0].name" in str(err.value)


def test_route_and_listener_header_names_are_gateway_api_tokens() -> None:
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "r", "namespace": "default"},
             "spec": {"rules": [{"filters": [{"type": "RequestHeaderModifier",
                                             "requestHeaderModifier": {"set": [{"name": "x a", "value": "v"}]}}]}]}}
    with pytest.raises(ManifestError) as err:
        parse(route)
    assert "requestHeaderModifier.set[0].name" in str(err.value)
    listener = {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "ListenerPolicy",
                "metadata": {"name": "l", "namespace": "default"},
                "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}],
                         "default": {"httpSettings": {"earlyRequestHeaderModifier": {
                             "add": [{"name": "x-a\r\nx-b", "value": "v"}]}}}}}
    with pytest.raises(ManifestError) as err:
        parse(listener)
    assert "earlyRequestHeaderModifier.add[0].name" in str(err.value)
