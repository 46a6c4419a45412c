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

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

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


# --- every other header-name field: refused naming the field, a token passes -----------------

ROUTE = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "r", "namespace": "default"},
         "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}}
JWKS = '{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "k"}]}'


def _route(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**ROUTE, "spec": {**ROUTE["spec"], "rules": [{**ROUTE["spec"]["rules"][0], **rule}]}}]


def _grpc_route(name: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
             "metadata": {"name": "g", "namespace": "default"},
             "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"matches": [{"headers": [{"name": name, "value": "v"}]}],
                                                               "backendRefs": [{"name": "web", "port": 80}]}]}}]


def _extension(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "GatewayExtension",
             "metadata": {"name": "ext", "namespace": "default"}, "spec": spec}]


def _jwt(provider: dict[str, Any]) -> list[dict[str, Any]]:
    return [*_extension({"jwt": {"providers": [{"name": "idp", "jwks": {"local": {"inline": JWKS}}, **provider}]}}), traffic_policy({"jwtAuth": {"extensionRef": {"name": "ext"}}})]


def _ext_auth(http: dict[str, Any], extra: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [*_extension({"extAuth": {"httpService": {"backendRef": {"name": "web", "port": 80}, **http}, **(extra or {})}}), traffic_policy({"extAuth": {"extensionRef": {"name": "ext"}}})]


API_KEYS = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys", "namespace": "default"},
            "stringData": {"client1": "k-123"}}

# (the objects, with NAME where the header name goes; the field path the refusal names)
FIELDS: list[tuple[Any, str]] = [
    # kgateway types these gwv1.HTTPHeaderName (Gateway API), so the manifest is refused on load
    (lambda n: [traffic_policy({"cors": {"allowOrigins": ["https://a.example"], "allowHeaders": [n]}})], "cors.allowHeaders[0]"),
    (lambda n: [traffic_policy({"cors": {"allowOrigins": ["https://a.example"], "exposeHeaders": [n]}})], "cors.exposeHeaders[0]"),
    (lambda n: [traffic_policy({"internalRedirect": {"responseHeadersToCopy": [n]}})],
     "internalRedirect.responseHeadersToCopy[0]"),
    (lambda n: _route({"matches": [{"headers": [{"name": n, "value": "v"}]}]}), "matches[0].headers[0].name"),
    (lambda n: _route({"filters": [{"type": "CORS", "cors": {"allowHeaders": [n]}}]}), "cors.allowHeaders[0]"),
    (_grpc_route, "matches[0].headers[0].name"),
    # kgateway leaves these plain strings: the translation refuses them, in the status
    (lambda n: _jwt({"tokenSource": {"header": {"header": n}}}), "tokenSource.header.header"),
    (lambda n: _jwt({"claimsToHeaders": [{"name": "sub", "header": n}]}), "claimsToHeaders[0].header"),
    (lambda n: [API_KEYS, traffic_policy({"apiKeyAuth": {"secretRef": {"name": "keys"}, "keySources": [{"header": n}]}})],
     "apiKeyAuth.keySources[0].header"),
    (lambda n: [API_KEYS, traffic_policy({"apiKeyAuth": {"secretRef": {"name": "keys"}, "clientIdHeader": n}})],
     "apiKeyAuth.clientIdHeader"),
    (lambda n: [traffic_policy({"acl": {"defaultAction": "deny", "denyResponse": {"headers": [{"name": n, "value": "v"}]}}})],
     "acl.denyResponse.headers[0].name"),
    (lambda n: [traffic_policy({"acl": {"defaultAction": "deny", "denyResponse": {"blockedByHeaderName": n}}})],
     "acl.denyResponse.blockedByHeaderName"),
    (lambda n: _ext_auth({}, {"headersToForward": [n]}), "extAuth.headersToForward[0]"),
    (lambda n: _ext_auth({"authorizationRequest": {"headersToAdd": {n: "v"}}}),
     "authorizationRequest.headersToAdd"),
    (lambda n: _ext_auth({"authorizationResponse": {"headersToBackend": [n]}}),
     "authorizationResponse.headersToBackend[0]"),
    (lambda n: _ext_auth({"authorizationResponse": {"headersToClient": [n]}}),
     "authorizationResponse.headersToClient[0]"),
    (lambda n: _ext_auth({"authorizationResponse": {"headersToClientOnSuccess": [n]}}),
     "authorizationResponse.headersToClientOnSuccess[0]"),
    (lambda n: [*_extension({"rateLimit": {"grpcService": {"backendRef": {"name": "web", "port": 80}}, "domain": "d"}}), traffic_policy({"rateLimit": {"global": {"extensionRef": {"name": "ext"}, "descriptors": [{"entries": [{"type": "Header", "header": n}]}]}}})],
     "descriptors[0].entries[0].header"),
    (lambda n: [{"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "BackendConfigPolicy",
                 "metadata": {"name": "b", "namespace": "default"},
                 "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
                          "loadBalancer": {"ringHash": {"hashPolicies": [{"header": {"name": n}}]}}}}],
     "hashPolicies[0].header.name"),
]

BASE_OBJECTS: list[dict[str, Any]] = [
    {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw", "namespace": "default"},
     "spec": {"gatewayClassName": "lychgate", "listeners": [{"name": "http", "protocol": "HTTP", "port": 8080}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"ports": [{"port": 80}]}},
]


def _problems(objects: list[dict[str, Any]], tmp_path: Path) -> str:
    """What lychgate says about the objects: load problems, and every status message."""
    from lychgate.controlplane import builtin_class
    from lychgate.sources.files import FileSource
    from lychgate.store import Store
    from lychgate.translate.gateway import translate

    path = tmp_path / "objects.yaml"
    route = [] if any(o["kind"] == "HTTPRoute" for o in objects) else [ROUTE]
    path.write_text(yaml.safe_dump_all([*BASE_OBJECTS, *route, *objects]))
    store = Store()
    store.upsert(builtin_class())
    source = FileSource(path, store)
    source.load_all()
    result = translate(store, lambda gw: "127.0.1.1")
    statuses = json.dumps({str(k): v for k, v in result.status.items()})
    return "\n".join([*(str(p) for p in source.all_problems()), statuses]).replace("\\\\", "\\")


@pytest.mark.parametrize("name", ["x tenant", "x-a\r\nx-b", "x-a\nx-b"])
@pytest.mark.parametrize(("objects", "field"), FIELDS, ids=[f for _, f in FIELDS])
def test_header_name_fields_refuse_what_is_not_a_token(objects: Any, field: str, name: str, tmp_path: Path) -> None:
    assert field in _problems(objects(name), tmp_path)


@pytest.mark.parametrize(("objects", "field"), FIELDS, ids=[f for _, f in FIELDS])
def test_header_name_fields_take_a_token(objects: Any, field: str, tmp_path: Path) -> None:
    problems = _problems(objects("x-tenant"), tmp_path)
    assert field not in problems and "invalid" not in problems.lower()
