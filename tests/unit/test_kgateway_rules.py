"""What kgateway's CRDs refuse at admission, lychgate refuses too: its own loader and
translation (`lychgate check`, the status a user reads, naming the field) and its CRDs
(what `kubectl apply` would say: the schema and its x-kubernetes-validations CEL rules,
evaluated here with cel-python as the API server would). Each rule is kgateway's, read
in its Go types (api/v1alpha1/kgateway/*.go, shared/rbac.go). A manifest kgateway accepts
stays accepted by both.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy  # type: ignore[import-untyped]
import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml
from typer.testing import CliRunner

from lychgate.cli import app

ROOT = Path(__file__).resolve().parents[2]
GROUP = "gateway.lychgate.dev/v1alpha1"
ROUTE = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "r"}
GATEWAY = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
# A Gateway without routes: a refused policy on it leaves the routes of the accepted cases alone.
BARE = {**GATEWAY, "name": "bare"}
SERVICE = {"group": "", "kind": "Service", "name": "svc"}
BACKEND = {"backendRef": {"name": "svc", "port": 80}}
JWK = json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "alg": "HS256"}]})
SECRET = {"clientID": "c", "clientSecretRef": {"name": "s"}}

WORLD = """\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: lychgate
  listeners: [{name: http, port: 8080, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: bare, namespace: default}
spec:
  gatewayClassName: lychgate
  listeners: [{name: http, port: 8081, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: svc, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: svc, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: default}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Secret
metadata: {name: s, namespace: default}
stringData: {client-secret: x, key1: k-123}
"""


def tp(**spec: Any) -> tuple[str, dict[str, Any]]:
    return "TrafficPolicy", {"targetRefs": [ROUTE], **spec}


def lp(**settings: Any) -> tuple[str, dict[str, Any]]:
    return "ListenerPolicy", {"targetRefs": [GATEWAY], "default": {"httpSettings": settings}}


def log(**entry: Any) -> tuple[str, dict[str, Any]]:
    return lp(accessLog=[{"fileSink": {"path": "/dev/null", "stringFormat": "x"}, **entry}])


def bcp(**spec: Any) -> tuple[str, dict[str, Any]]:
    return "BackendConfigPolicy", {"targetRefs": [SERVICE], **spec}


def ge(**spec: Any) -> tuple[str, dict[str, Any]]:
    return "GatewayExtension", spec


def jwt(**provider: Any) -> tuple[str, dict[str, Any]]:
    return ge(jwt={"providers": [{"name": "p", "jwks": {"local": {"inline": JWK}}, **provider}]})


def oauth2(**spec: Any) -> tuple[str, dict[str, Any]]:
    return ge(oauth2={"backendRef": {"name": "svc", "port": 80}, "credentials": SECRET, **spec})


REWRITE = {"pathRegex": {"pattern": "^/v1/(.*)", "substitution": "/\\1"}}
REMOTE = {"url": "https://idp.example.com/keys", "backendRef": {"name": "svc", "port": 80}}
HTTPS = {"authorizationEndpoint": "https://idp.example.com/auth", "tokenEndpoint": "https://idp.example.com/token"}
OTEL = {"openTelemetry": {"grpcService": BACKEND}}
GRPC_EXT = {"grpcService": BACKEND}

# id -> (kind, spec, the field lychgate's error names). kgateway refuses each at admission.
REFUSED: dict[str, tuple[str, dict[str, Any], str]] = {
    # TrafficPolicy
    "retry-on-unknown": (*tp(retry={"retryOn": ["bogus"]}), "spec.retry.retryOn[0]"),
    "retry-on-empty": (*tp(retry={"retryOn": [], "statusCodes": [503]}), "spec.retry.retryOn"),
    "retry-status-200": (*tp(retry={"statusCodes": [200]}), "spec.retry.statusCodes[0]"),
    "retry-nothing": (*tp(retry={"attempts": 2}), "spec.retry"),
    "buffer-neither": (*tp(buffer={}), "spec.buffer"),
    "buffer-both": (*tp(buffer={"maxRequestSize": "1Ki", "disable": {}}), "spec.buffer"),
    "api-key-no-keys": (*tp(apiKeyAuth={"keySources": [{"header": "x-api-key"}]}), "spec.apiKeyAuth"),
    "api-key-two": (*tp(apiKeyAuth={"secretRef": {"name": "s"}, "disable": {}}), "spec.apiKeyAuth"),
    "api-key-source-empty": (*tp(apiKeyAuth={"secretRef": {"name": "s"}, "keySources": [{}]}),
                             "spec.apiKeyAuth.keySources[0]"),
    "csrf-both": (*tp(csrf={"percentageEnabled": 10, "percentageShadowed": 10}), "spec.csrf"),
    "jwt-auth-neither": (*tp(jwtAuth={}), "spec.jwtAuth"),
    "rbac-empty": (*tp(rbac={"policy": {}, "action": "Deny"}), "spec.rbac.policy"),
    "rbac-empty-expression": (*tp(rbac={"policy": {"matchExpressions": [""]}}),
                              "spec.rbac.policy.matchExpressions[0]"),
    "rbac-empty-cidrs": (*tp(rbac={"policy": {"matchExpressions": ["true"], "allowedCIDRs": []}}),
                         "spec.rbac.policy.allowedCIDRs"),
    "fill-interval-short": (*tp(rateLimit={"local": {"tokenBucket": {"maxTokens": 1, "fillInterval": "10ms"}}}),
                            "spec.rateLimit.local.tokenBucket.fillInterval"),
    "fixed-delay-long": (*tp(faultInjection={"delay": {"fixedDelay": "2h"}}), "spec.faultInjection.delay.fixedDelay"),
    "fixed-delay-zero": (*tp(faultInjection={"delay": {"fixedDelay": "0s"}}), "spec.faultInjection.delay.fixedDelay"),
    "route-attribute-two-sources": (
        *tp(tracing={"attributes": [{"name": "a", "literal": {"value": "x"}, "environment": {"name": "E"}}]}),
        "spec.tracing.attributes[0]"),
    "tp-targets-service": ("TrafficPolicy", {"targetRefs": [SERVICE], "timeouts": {"request": "1s"}},
                           "spec.targetRefs[0]"),
    "tp-targets-empty": ("TrafficPolicy", {"targetRefs": [], "timeouts": {"request": "1s"}}, "spec.targetRefs"),
    "auto-host-rewrite-on-gateway": ("TrafficPolicy", {"targetRefs": [BARE], "autoHostRewrite": True},
                                     "spec.autoHostRewrite"),
    "url-rewrite-on-gateway": ("TrafficPolicy", {"targetRefs": [ROUTE, BARE], "urlRewrite": REWRITE},
                               "spec.urlRewrite"),
    "url-rewrite-on-selected-gateways": ("TrafficPolicy", {"targetSelectors": [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "matchLabels": {"team": "a"}}], "urlRewrite": REWRITE},
        "spec.urlRewrite"),
    "tracing-on-gateway": ("TrafficPolicy", {"targetRefs": [BARE], "tracing": {"randomSampling": 10}},
                           "spec.tracing"),
    "stat-prefix-on-gateway": ("TrafficPolicy", {"targetRefs": [BARE], "statPrefix": "edge"}, "spec.statPrefix"),
    "per-try-timeout-not-below-request": (*tp(retry={"retryOn": ["5xx"], "perTryTimeout": "5s"},
                                              timeouts={"request": "5s"}), "spec.retry.perTryTimeout"),
    "buffer-size-zero": (*tp(buffer={"maxRequestSize": 0}), "spec.buffer.maxRequestSize"),
    "buffer-size-4gi": (*tp(buffer={"maxRequestSize": "4Gi"}), "spec.buffer.maxRequestSize"),
    # ListenerPolicy
    "file-sink-both": (*lp(accessLog=[{"fileSink": {"path": "/dev/null", "stringFormat": "x",
                                                    "jsonFormat": {"a": "b"}}}]),
                       "spec.default.httpSettings.accessLog[0].fileSink"),
    "filter-two": (*log(filter={"notHealthCheckFilter": True, "traceableFilter": True}),
                   "spec.default.httpSettings.accessLog[0].filter"),
    "filter-none": (*log(filter={}), "spec.default.httpSettings.accessLog[0].filter"),
    "and-filter-one": (*log(filter={"andFilter": [{"traceableFilter": True}]}),
                       "spec.default.httpSettings.accessLog[0].filter.andFilter"),
    "grpc-status-empty": (*log(filter={"grpcStatusFilter": {"statuses": []}}),
                          "spec.default.httpSettings.accessLog[0].filter.grpcStatusFilter.statuses"),
    "tracing-no-provider": (*lp(tracing={"provider": {}}), "spec.default.httpSettings.tracing.provider"),
    "listener-attribute-two-sources": (
        *lp(tracing={"provider": OTEL, "attributes": [
            {"name": "a", "literal": {"value": "x"}, "requestHeader": {"name": "h"}}]}),
        "spec.default.httpSettings.tracing.attributes[0]"),
    "upgrades-empty": (*lp(upgradeConfig={"enabledUpgrades": []}),
                       "spec.default.httpSettings.upgradeConfig.enabledUpgrades"),
    "xff-cidrs-remote-address": (*lp(xffTrustedCIDRs=["10.0.0.0/8"]), "spec.default.httpSettings.xffTrustedCIDRs"),
    "xff-cidrs-and-hops": (*lp(useRemoteAddress=False, xffTrustedCIDRs=["10.0.0.0/8"], xffNumTrustedHops=1),
                           "spec.default.httpSettings.xffNumTrustedHops"),
    "client-cert-details-mode": (*lp(forwardClientCertDetails={"mode": "Sanitize", "details": {"subject": True}}),
                                 "spec.default.httpSettings.forwardClientCertDetails.details"),
    "lp-targets-route": ("ListenerPolicy", {"targetRefs": [ROUTE], "default": {"perConnectionBufferLimitBytes": 1}},
                         "spec.targetRefs[0]"),
    "lp-targets-empty": ("ListenerPolicy", {"targetRefs": [], "default": {"perConnectionBufferLimitBytes": 1}},
                         "spec.targetRefs"),
    "per-port-twice": ("ListenerPolicy", {"targetRefs": [GATEWAY], "perPort": [
        {"port": 8080, "listener": {"perConnectionBufferLimitBytes": 1}},
        {"port": 8080, "listener": {"perConnectionBufferLimitBytes": 2}}]}, "spec.perPort[1].port"),
    # BackendConfigPolicy
    "dns-jitter-over-refresh": (*bcp(dns={"refreshRate": "1s", "jitter": "5s"}), "spec.dns.jitter"),
    "dns-refresh-zero": (*bcp(dns={"refreshRate": "0s"}), "spec.dns.refreshRate"),
    "slow-start-aggression-zero": (*bcp(loadBalancer={"roundRobin": {"slowStart": {"aggression": "0"}}}),
                                   "spec.loadBalancer.roundRobin.slowStart.aggression"),
    "tls-files-empty": (*bcp(tls={"files": {}}), "spec.tls.files"),
    "window-size-small": (*bcp(http2ProtocolOptions={"initialStreamWindowSize": 65534}),
                          "spec.http2ProtocolOptions.initialStreamWindowSize"),
    "window-size-large": (*bcp(http2ProtocolOptions={"initialConnectionWindowSize": "2Gi"}),
                          "spec.http2ProtocolOptions.initialConnectionWindowSize"),
    "bcp-targets-route": ("BackendConfigPolicy", {"targetRefs": [ROUTE], "connectTimeout": "1s"},
                          "spec.targetRefs[0]"),
    "bcp-targets-service-without-group": (
        "BackendConfigPolicy", {"targetRefs": [{"kind": "Service", "name": "svc"}], "connectTimeout": "1s"},
        "spec.targetRefs[0]"),
    "bcp-targets-istio-hostname": (
        "BackendConfigPolicy", {"targetRefs": [{"group": "networking.istio.io", "kind": "Hostname", "name": "h"}],
                                "connectTimeout": "1s"}, "spec.targetRefs[0]"),
    "bcp-targets-empty": ("BackendConfigPolicy", {"targetRefs": [], "connectTimeout": "1s"}, "spec.targetRefs"),
    # GatewayExtension
    # "": the spec as a whole (`lychgate check` prints "invalid field spec: ...")
    "extension-none": (*ge(type="ExtAuth"), ""),
    "extension-two": (*ge(extAuth=GRPC_EXT, extProc=GRPC_EXT), ""),
    "extension-type-mismatch": (*ge(type="ExtProc", extAuth=GRPC_EXT), "spec.type"),
    "token-source-empty": (*jwt(tokenSource={}), "spec.jwt.providers[0].tokenSource"),
    "token-source-both": (*jwt(tokenSource={"header": {"header": "a"}, "queryParameter": "q"}),
                          "spec.jwt.providers[0].tokenSource"),
    "jwks-empty": (*ge(jwt={"providers": [{"name": "p", "jwks": {}}]}), "spec.jwt.providers[0].jwks"),
    "local-jwks-both": (*ge(jwt={"providers": [{"name": "p", "jwks": {"local": {
        "inline": JWK, "configMapRef": {"name": "c"}}}}]}), "spec.jwt.providers[0].jwks.local"),
    "provider-name-twice": (*ge(jwt={"providers": [{"name": "p", "jwks": {"local": {"inline": JWK}}},
                                                   {"name": "p", "jwks": {"local": {"inline": JWK}}}]}),
                            "spec.jwt.providers[1].name"),
    "cache-duration-zero": (*jwt(jwks={"remote": {"url": "https://idp.example.com/keys", "cacheDuration": "0s",
                                                  "backendRef": {"name": "svc", "port": 80}}}),
                            "spec.jwt.providers[0].jwks.remote.cacheDuration"),
    "audiences-empty": (*jwt(audiences=[]), "spec.jwt.providers[0].audiences"),
    "claims-to-headers-empty": (*jwt(claimsToHeaders=[]), "spec.jwt.providers[0].claimsToHeaders"),
    "jwks-timeout-zero": (*jwt(jwks={"remote": {**REMOTE, "timeout": "0s"}}),
                          "spec.jwt.providers[0].jwks.remote.timeout"),
    "jwks-refetch-zero": (*jwt(jwks={"remote": {**REMOTE, "asyncFetch": {"failedRefetchDuration": "0s"}}}),
                          "spec.jwt.providers[0].jwks.remote.asyncFetch.failedRefetchDuration"),
    "jwks-backoff-max-below-base": (
        *jwt(jwks={"remote": {**REMOTE, "retryPolicy": {"backOff": {"baseInterval": "2s", "maxInterval": "1s"}}}}),
        "spec.jwt.providers[0].jwks.remote.retryPolicy.backOff.maxInterval"),
    "oauth2-cookie-domain-dot": (*oauth2(**HTTPS, cookies={"domain": ".example.com"}), "spec.oauth2.cookies.domain"),
    "oauth2-cookie-domain-port": (*oauth2(**HTTPS, cookies={"domain": "example.com:443"}),
                                  "spec.oauth2.cookies.domain"),
    "oauth2-token-audiences-empty": (*oauth2(**HTTPS, jwt={"jwksURI": "https://idp.example.com/keys",
                                                           "accessToken": {"audiences": []}}),
                                     "spec.oauth2.jwt.accessToken.audiences"),
    "oauth2-deny-redirect-empty": (*oauth2(**HTTPS, denyRedirect={"headers": []}), "spec.oauth2.denyRedirect.headers"),
    "oauth2-http-endpoints": (*oauth2(authorizationEndpoint="http://idp.example.com/auth",
                                      tokenEndpoint="http://idp.example.com/token"),
                              "spec.oauth2.authorizationEndpoint"),
    "oauth2-http-issuer": (*oauth2(issuerURI="http://idp.example.com"), "spec.oauth2.issuerURI"),
    "oauth2-http-end-session": (*oauth2(**HTTPS, endSessionEndpoint="http://idp.example.com/logout"),
                                "spec.oauth2.endSessionEndpoint"),
    "oauth2-http-jwks": (*oauth2(**HTTPS, jwt={"jwksURI": "http://idp.example.com/keys", "accessToken": {}}),
                         "spec.oauth2.jwt.jwksURI"),
    "backoff-max-below-base": (*ge(extAuth={"grpcService": {**BACKEND, "retry": {
        "backoff": {"baseInterval": "2s", "maxInterval": "1s"}}}}), "spec.extAuth.grpcService.retry.backoff.maxInterval"),
    "request-timeout-zero": (*ge(extAuth={"grpcService": {**BACKEND, "requestTimeout": "0s"}}),
                             "spec.extAuth.grpcService.requestTimeout"),
}

# id -> (kind, spec): kgateway accepts each; so do lychgate and its CRDs.
ACCEPTED: dict[str, tuple[str, dict[str, Any]]] = {
    "traffic-policy": tp(
        retry={"retryOn": ["5xx", "retriable-status-codes"], "statusCodes": [503], "attempts": 2},
        buffer={"maxRequestSize": "1Mi"}, csrf={"percentageShadowed": 100},
        apiKeyAuth={"secretRef": {"name": "s"}, "keySources": [{"header": "x-api-key", "query": "k"}]},
        jwtAuth={"disable": {}}, rbac={"policy": {"matchExpressions": ["request.method == 'GET'"],
                                                  "blockedCIDRs": ["10.1.0.0/16"]}},
        rateLimit={"local": {"tokenBucket": {"maxTokens": 5, "fillInterval": "50ms"}}},
        faultInjection={"delay": {"fixedDelay": "1ms", "percentage": 0}},
        tracing={"attributes": [{"name": "a", "literal": {"value": "x"}}]}),
    "traffic-policy-on-gateway": ("TrafficPolicy", {"targetRefs": [GATEWAY], "timeouts": {"request": "5s"}}),
    "traffic-policy-route-only-fields": tp(
        autoHostRewrite=True, urlRewrite=REWRITE, tracing={"randomSampling": 10}, statPrefix="edge",
        retry={"retryOn": ["5xx"], "perTryTimeout": "1s"}, timeouts={"request": "5s"}),
    "traffic-policy-on-selected-routes": ("TrafficPolicy", {"targetSelectors": [
        {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "matchLabels": {"team": "a"}}],
        "urlRewrite": REWRITE, "buffer": {"maxRequestSize": 4294967295}}),
    "tracing-on-grpc-route": ("TrafficPolicy", {"targetRefs": [{**ROUTE, "kind": "GRPCRoute", "name": "g"}],
                                                "tracing": {"randomSampling": 10}, "statPrefix": "edge"}),
    "http2-windows": bcp(http2ProtocolOptions={"initialStreamWindowSize": 65535,
                                               "initialConnectionWindowSize": "64Ki"}),
    "listener-policy": ("ListenerPolicy", {"targetRefs": [GATEWAY], "default": {"httpSettings": {
        "accessLog": [{"fileSink": {"path": "/dev/null", "jsonFormat": {"code": "%RESPONSE_CODE%"}},
                       "filter": {"andFilter": [{"traceableFilter": True},
                                                {"grpcStatusFilter": {"statuses": ["OK"], "exclude": True}}]}}],
        "tracing": {"provider": OTEL, "attributes": [{"name": "a", "environment": {"name": "E"}}]},
        "useRemoteAddress": False, "xffTrustedCIDRs": ["10.0.0.0/8"],
        "upgradeConfig": {"enabledUpgrades": ["websocket"]},
        "forwardClientCertDetails": {"mode": "SanitizeSet", "details": {"subject": True}}}},
        "perPort": [{"port": 8080, "listener": {"perConnectionBufferLimitBytes": 1}},
                    {"port": 8443, "listener": {"perConnectionBufferLimitBytes": 2}}]}),
    "backend-config-policy": bcp(dns={"refreshRate": "10s", "jitter": "1s"}, tls={"sni": "svc.example.com"},
                                 loadBalancer={"roundRobin": {"slowStart": {"aggression": "0.5"}}}),
    "backend-config-policy-on-backend": ("BackendConfigPolicy", {"targetRefs": [
        {"group": "gateway.kgateway.dev", "kind": "Backend", "name": "b"}], "connectTimeout": "2s"}),
    "jwt-extension": jwt(tokenSource={"header": {"header": "authorization", "prefix": "Bearer "}}),
    "jwt-extension-remote": jwt(jwks={"remote": {"url": "https://idp.example.com/keys", "cacheDuration": "5m",
                                                 "backendRef": {"name": "svc", "port": 80}}}),
    "jwt-extension-lists": jwt(audiences=["api"], claimsToHeaders=[{"name": "sub", "header": "x-sub"}],
                               jwks={"remote": {**REMOTE, "timeout": "1ms", "asyncFetch": {
                                   "failedRefetchDuration": "1s"}, "retryPolicy": {"backOff": {
                                       "baseInterval": "1s", "maxInterval": "1s"}}}}),
    "oauth2-extension-cookies": oauth2(**HTTPS, cookies={"domain": "app.example.com"},
                                       denyRedirect={"headers": [{"name": "x-requested-with", "value": "fetch"}]},
                                       jwt={"jwksURI": "https://idp.example.com/keys",
                                            "accessToken": {"audiences": ["api"]}}),
    "oauth2-extension": oauth2(**HTTPS, endSessionEndpoint="https://idp.example.com/logout",
                               jwt={"jwksURI": "https://idp.example.com/keys", "accessToken": {}}),
    "ext-auth-extension": ge(type="ExtAuth", extAuth={"grpcService": {**BACKEND, "requestTimeout": "1ms", "retry": {
        "backoff": {"baseInterval": "1s", "maxInterval": "1s"}}}}),
}


def manifest(name: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": copy.deepcopy(spec)}


@functools.cache
def lychgate_errors() -> dict[str, list[tuple[str, str]]]:
    """(field, message) of every error `lychgate check` finds, by object name: all cases
    in one run, as a user would check a directory."""
    import tempfile

    docs = [manifest(n, k, s) for n, (k, s, _) in REFUSED.items()] + [manifest(n, k, s) for n, (k, s) in
                                                                      ACCEPTED.items()]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "world.yaml").write_text(WORLD)
        (Path(tmp) / "cases.yaml").write_text(yaml.safe_dump_all(docs))
        result = CliRunner().invoke(app, ["check", tmp, "-o", "json"])
    report = json.loads(result.stdout)
    out: dict[str, list[tuple[str, str]]] = {}
    for f in report["findings"]:
        if f["severity"] == "error" and f.get("object"):
            out.setdefault(f["object"].rsplit("/", 1)[-1], []).append((f["field"], f["message"]))
    return out


# --- the CRD, as the API server would apply it -----------------------------------------------


@functools.cache
def crd_schema(kind: str) -> dict[str, Any]:
    for path in (ROOT / "charts" / "lychgate" / "crds").glob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        if doc["spec"]["names"]["kind"] == kind:
            schema: dict[str, Any] = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(kind)


def _defaulted(value: Any, schema: dict[str, Any]) -> Any:
    """The object after the API server's defaulting (CEL rules see the defaults)."""
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties") or {}
        out = {k: _defaulted(v, props.get(k) or {}) for k, v in value.items()}
        out.update({k: p["default"] for k, p in props.items() if k not in out and "default" in p})
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_defaulted(v, schema["items"]) for v in value]
    return value


_CEL = celpy.Environment()


@functools.cache
def _program(rule: str) -> Any:
    return _CEL.program(_CEL.compile(rule))  # a rule that does not compile fails here


# kgateway's size rules call the API server's quantity library (quantity('4Gi').isLessThan(...),
# Kubernetes 1.29+), which cel-python lacks: such a rule is evaluated here for an integer (its
# int branch) and skipped for a string. For the string cases below the CRD test checks the
# rule sits on the field; lychgate's own check (translation) is held to them as to every case.
QUANTITY_STRINGS = {"buffer-size-4gi", "window-size-large"}


def _cel_errors(value: Any, schema: dict[str, Any], path: str) -> Iterator[str]:
    for rule in schema.get("x-kubernetes-validations") or []:
        if "quantity(" in rule["rule"] and not isinstance(value, int):
            continue
        result = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        if result is not True and not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            yield f"{path}: {rule['message']}"
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, item in value.items():
            if key in props:
                yield from _cel_errors(item, props[key], f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from _cel_errors(item, schema["items"], f"{path}[{i}]")


def crd_errors(obj: dict[str, Any]) -> list[str]:
    """What the API server would refuse `obj` for under lychgate's CRD: schema, then CEL."""
    schema = crd_schema(obj["kind"])
    obj = _defaulted(obj, schema)
    errors = ["".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path).lstrip(".")
              + f": {e.message}" for e in jsonschema.Draft4Validator(schema).iter_errors(obj)]
    if errors:  # as the API server: CEL rules run on a schema-valid object
        return errors
    return [e.lstrip(".") for e in _cel_errors(obj, schema, "")]


# --- the tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_lychgate_refuses_it_naming_the_field(name: str) -> None:
    errors = lychgate_errors().get(name, [])
    assert errors, f"{name}: lychgate accepted what kgateway refuses"
    assert REFUSED[name][2] in [field for field, _ in errors], errors


def schema_at(kind: str, field: str) -> dict[str, Any]:
    """The CRD's schema of `field` (`spec.buffer.maxRequestSize`, list indexes as `[0]`)."""
    node = crd_schema(kind)
    for part in field.replace("[", ".[").split("."):
        node = node["items"] if part.startswith("[") else node["properties"][part]
    return node


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_crd_refuses_it_as_kgateways_does(name: str) -> None:
    kind, spec, field = REFUSED[name]
    if name in QUANTITY_STRINGS:  # see QUANTITY_STRINGS: the API server's rule is there
        assert any("quantity(" in r["rule"] for r in schema_at(kind, field)["x-kubernetes-validations"])
        return
    errors = crd_errors(manifest(name, kind, spec))
    assert errors, f"{name}: the CRD admits what kgateway's refuses"
    # The rule sits on the field, or on the object holding the fields it relates.
    assert any((field or "spec").startswith(e.split(":", 1)[0]) for e in errors), errors


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_what_kgateway_accepts_stays_accepted(name: str) -> None:
    assert lychgate_errors().get(name, []) == []
    assert crd_errors(manifest(name, *ACCEPTED[name])) == []


def test_file_sink_without_a_format_keeps_lychgates_default() -> None:
    """kgateway demands stringFormat or jsonFormat; lychgate documents `fileSink: {path}` as its
    default format (docs/observability.md) and keeps it, in the model and the CRD alike."""
    kind, spec = lp(accessLog=[{"fileSink": {"path": "/dev/null"}}])
    assert crd_errors(manifest("x", kind, spec)) == []


def test_every_crd_rule_compiles() -> None:
    """Every x-kubernetes-validations rule of lychgate's CRDs parses as CEL."""
    def rules(schema: dict[str, Any]) -> Iterator[str]:
        yield from (r["rule"] for r in schema.get("x-kubernetes-validations") or [])
        for sub in (schema.get("properties") or {}).values():
            yield from rules(sub)
        for key in ("items", "additionalProperties"):
            if isinstance(schema.get(key), dict):
                yield from rules(schema[key])

    found = [r for path in (ROOT / "charts" / "lychgate" / "crds").glob("*.yaml")
             for r in rules(yaml.safe_load(path.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"])]
    assert len(found) > 40
    for rule in found:
        _program(rule)


def test_oauth2_takes_http_only_to_a_loopback_provider() -> None:
    """lychgate run's local identity provider (examples/oauth2) speaks http on 127.0.0.1: no
    packet leaves the host, so lychgate takes it; the CRD, as kgateway's, does not."""
    from lychgate.api.policy import GatewayExtension
    from lychgate.translate.policies import oauth2 as oauth2_policy

    for issuer in ("http://127.0.0.1:9003", "http://localhost:9003", "http://[::1]:9003"):
        ext = GatewayExtension.model_validate(manifest("local", *oauth2(issuerURI=issuer)))
        oauth2_policy.validate(ext)  # no Invalid
        assert crd_errors(manifest("local", *oauth2(issuerURI=issuer))), issuer


def test_endpoints_a_discovery_document_lists_must_be_https() -> None:
    """An https issuer whose document sends the browser or the token request over http fails
    closed, as an http endpoint written in the spec would be refused."""
    from lychgate.translate.policies import oauth2 as oauth2_policy
    from lychgate.translate.values import Unresolved

    doc = {"authorization_endpoint": "https://idp.example.com/auth", "token_endpoint": "http://idp.example.com/t"}
    assert oauth2_policy._discovered(doc, "authorization_endpoint", "https://idp.example.com").startswith("https")
    with pytest.raises(Unresolved, match="must be an https URL"):
        oauth2_policy._discovered(doc, "token_endpoint", "https://idp.example.com")
