"""ListenerPolicy attachment and validation as translation decides them: objects in, IR and status out."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import yaml

from lychgate import ir_listener
from lychgate.api.base import ObjectKey
from lychgate.api.registry import ManifestError, parse
from lychgate.controlplane import builtin_class
from lychgate.store import Store
from lychgate.translate.gateway import Translation, translate
from tests.certs import CA
from tests.policies.test_translate import run as run_with

BASE = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, labels: {tier: edge}}
spec:
  gatewayClassName: lychgate
  listeners:
    - {name: a, protocol: HTTP, port: 80, hostname: a.example.com}
    - {name: b, protocol: HTTP, port: 80, hostname: b.example.com}
    - {name: c, protocol: HTTP, port: 81}
---
apiVersion: v1
kind: Service
metadata: {name: app}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: app, port: 80}]}]
"""


def run(policies: str) -> Translation:
    return run_with(policies, base=BASE)  # objects a day apart, in the order written: age decides


def lp(name: str, spec: str, kind: str = "ListenerPolicy",
       targets: str = "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]") -> str:
    return f"---\napiVersion: gateway.lychgate.dev/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}}}\nspec:\n  {targets}\n{spec}\n"


def settings(t: Translation, port: int) -> ir_listener.HTTPSettings | None:
    listener = next(l for l in t.gateways["default/gw"].listeners if l.port == port)
    return listener.settings


def status(t: Translation, name: str, kind: str = "ListenerPolicy") -> dict[str, Any]:
    return t.status[ObjectKey(kind, "default", name)]


def cond(conds: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    return next(c for c in conds if c["type"] == type_)


def test_per_port_replaces_default_and_the_listener_beats_the_gateway() -> None:
    t = run(lp("gw-wide", "  default:\n    httpSettings: {xffNumTrustedHops: 1, generateRequestId: false}\n"
                          "  perPort:\n    - {port: 81, listener: {httpSettings: {maxRequestHeadersKb: 10}}}")
            + lp("on-b", "  default:\n    httpSettings: {xffNumTrustedHops: 3}",
                 targets="targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: b}]"))
    port80, port81 = settings(t, 80), settings(t, 81)
    assert port80 is not None and port81 is not None
    # Listener b shares port 80's connection manager: its (newer) policy wins the field there.
    assert (port80.xff_num_trusted_hops, port80.generate_request_id) == (3, False)
    # perPort replaces default entirely: nothing of default on port 81.
    assert (port81.max_request_headers_kb, port81.xff_num_trusted_hops, port81.generate_request_id) == (10, None, None)
    wide = cond(status(t, "gw-wide")["ancestors"][0]["conditions"], "Applied")
    assert wide["reason"] == "PartiallyApplied"
    assert wide["message"] == ("applied: generateRequestId, maxRequestHeadersKb; xffNumTrustedHops overridden by "
                               "the more specific ListenerPolicy default/on-b on Gateway default/gw listener b")
    anc = status(t, "on-b")["ancestors"][0]
    assert anc["ancestorRef"]["sectionName"] == "b"
    assert cond(anc["conditions"], "Applied")["message"] == "applied: xffNumTrustedHops"


def test_oldest_wins_and_http_listener_policy_loses_to_an_older_listener_policy() -> None:
    t = run(lp("old", "  default:\n    httpSettings: {serverHeaderTransformation: PassThrough}")
            + lp("legacy", "  serverHeaderTransformation: AppendIfAbsent\n  skipXFFAppend: true", kind="HTTPListenerPolicy")
            + lp("new", "  default:\n    httpSettings: {serverHeaderTransformation: Overwrite}"))
    s = settings(t, 80)
    assert s is not None and (s.server_header_transformation, s.skip_xff_append) == ("PASS_THROUGH", True)
    legacy = cond(status(t, "legacy", "HTTPListenerPolicy")["ancestors"][0]["conditions"], "Applied")
    assert legacy["reason"] == "PartiallyApplied" and "serverHeaderTransformation" in legacy["message"]
    new = cond(status(t, "new")["ancestors"][0]["conditions"], "Applied")
    assert (new["status"], new["reason"]) == ("False", "Overridden")
    assert new["message"] == "serverHeaderTransformation overridden by older ListenerPolicy default/old on Gateway default/gw"


def test_selectors_and_missing_targets() -> None:
    t = run(lp("by-label", "  default:\n    httpSettings: {healthCheck: {path: /ready}}",
               targets="targetSelectors: [{group: gateway.networking.k8s.io, kind: Gateway, matchLabels: {tier: edge}}]")
            + lp("no-match", "  default:\n    httpSettings: {healthCheck: {path: /x}}",
                 targets="targetSelectors: [{group: gateway.networking.k8s.io, kind: Gateway, matchLabels: {tier: none}}]")
            + lp("no-listener", "  default:\n    httpSettings: {healthCheck: {path: /x}}",
                 targets="targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: zz}]"))
    s = settings(t, 80)
    assert s is not None and s.health_check_path == "/ready"
    assert cond(status(t, "by-label")["conditions"], "Applied")["status"] == "True"
    nomatch = cond(status(t, "no-match")["conditions"], "Applied")
    assert (nomatch["reason"], nomatch["message"]) == (
        "NoTargetMatched", "not applied: spec.targetSelectors[0] matched no Gateway with labels tier=none in namespace default")
    missing = cond(status(t, "no-listener")["ancestors"][0]["conditions"], "Applied")
    assert (missing["reason"], missing["message"]) == ("TargetNotFound",
                                                       "not applied: Gateway default/gw has no listener named zz")


@pytest.mark.parametrize("spec, error", [
    ("  default:\n    httpSettings:\n      accessLog: [{fileSink: {path: /dev/stdout}, grpcService: {logName: x, backendRef: {name: app, port: 80}}}]",
     "spec.default.httpSettings.accessLog[0]: exactly one of fileSink, grpcService or openTelemetry must be set "
     "(found fileSink, grpcService)"),
    ("  default:\n    httpSettings:\n      accessLog: [{fileSink: {path: /dev/stdout}, filter: {statusCodeFilter: {op: EQ, value: 1}, "
     "durationFilter: {op: EQ, value: 1}}}]",
     "spec.default.httpSettings.accessLog[0].filter: exactly one filter must be set: a condition, andFilter or orFilter"),
    ("  default:\n    httpSettings:\n      accessLog: [{fileSink: {path: /dev/stdout}, filter: {responseFlagFilter: {flags: [XX]}}}]",
     "spec.default.httpSettings.accessLog[0].filter.responseFlagFilter.flags: unknown response flags XX"),
    ("  default:\n    httpSettings:\n      accessLog: [{fileSink: {path: /dev/stdout, stringFormat: '%REQ(:PATH)'}}]",
     "spec.default.httpSettings.accessLog[0].fileSink.stringFormat: '%REQ(:PATH)' has an unpaired '%'"),
    ("  default:\n    httpSettings: {xffTrustedCIDRs: [10.0.0.0/8]}",
     "spec.default.httpSettings.xffTrustedCIDRs: useRemoteAddress must be set to false if xffTrustedCIDRs is set"),
    ("  default:\n    httpSettings: {useRemoteAddress: false, xffTrustedCIDRs: [10.0.0.0/33]}",
     "spec.default.httpSettings.xffTrustedCIDRs[0]: '10.0.0.0/33' is not an address range"),
    ("  default:\n    httpSettings: {streamIdleTimeout: soon}",
     "spec.default.httpSettings.streamIdleTimeout: 'soon' is not a duration"),
    ("  default:\n    httpSettings: {forwardClientCertDetails: {mode: Sanitize, details: {subject: true}}}",
     "spec.default.httpSettings.forwardClientCertDetails.details: details requires mode to be AppendForward"),
    ("  default:\n    httpSettings: {http2ProtocolOptions: {initialStreamWindowSize: 1Ki}}",
     "spec.default.httpSettings.http2ProtocolOptions.initialStreamWindowSize: '1Ki' must be between 65535"),
    ("  default:\n    clientCertificateValidation: {mode: Require, caCertificateRefs: [{group: '', kind: Service, name: ca}]}",
     "spec.default.clientCertificateValidation.caCertificateRefs[0]: core/Service cannot hold CA certificates"),
    ("  perPort:\n    - {port: 80, listener: {}}\n    - {port: 80, listener: {}}",
     "spec.perPort[1].port: port 80 is listed twice"),
    ("  httpSettings: {generateRequestId: false}\n  proxyProtocol: {}\n  default:\n    httpSettings: {xffNumTrustedHops: 1}",
     "spec.proxyProtocol: spec.proxyProtocol, spec.httpSettings cannot be set together with spec.default"),
    ("  perConnectionBufferLimitBytes: 1024\n  perPort:\n    - {port: 81, listener: {}}",
     "spec.perConnectionBufferLimitBytes: spec.perConnectionBufferLimitBytes cannot be set together with spec.perPort"),
    ("  httpSettings: {streamIdleTimeout: soon}",
     "spec.httpSettings.streamIdleTimeout: 'soon' is not a duration"),
    ("  default:\n    httpSettings: {requestHeadersTimeout: 10sec}",
     "spec.default.httpSettings.requestHeadersTimeout: '10sec' is not a duration"),
])
def test_invalid_values_name_the_field_and_change_nothing(spec: str, error: str) -> None:
    t = run(lp("bad", spec))
    accepted = cond(status(t, "bad")["conditions"], "Accepted")
    assert accepted["status"] == "False" and accepted["reason"] == "Invalid"
    assert accepted["message"].startswith(f"invalid field {error}"), accepted["message"]
    assert settings(t, 80) is None  # the proxy keeps lychgate's defaults
    assert cond(status(t, "bad")["ancestors"][0]["conditions"], "Applied")["reason"] == "Invalid"


def test_inline_settings_are_the_default_of_every_port() -> None:
    """kgateway's other shape: the listener configuration directly in the spec, as `default` means it."""
    inline = run(lp("inline", "  httpSettings: {xffNumTrustedHops: 2, serverHeaderTransformation: AppendIfAbsent}\n"
                              "  perConnectionBufferLimitBytes: 4096"))
    nested = run(lp("inline", "  default:\n    httpSettings: {xffNumTrustedHops: 2, serverHeaderTransformation: "
                              "AppendIfAbsent}\n    perConnectionBufferLimitBytes: 4096"))
    for port in (80, 81):
        s = settings(inline, port)
        assert s is not None and (s.xff_num_trusted_hops, s.server_header_transformation) == (2, "APPEND_IF_ABSENT")
        assert s == settings(nested, port)
    assert inline.gateways["default/gw"].ports == nested.gateways["default/gw"].ports
    assert [p.buffer_limit_bytes for p in inline.gateways["default/gw"].ports] == [4096, 4096]
    applied = cond(status(inline, "inline")["ancestors"][0]["conditions"], "Applied")
    assert (applied["reason"], applied["message"]) == (
        "Applied", "applied: perConnectionBufferLimitBytes, serverHeaderTransformation, xffNumTrustedHops")


def test_only_gateways_can_be_targeted() -> None:
    t = run(lp("route", "  default:\n    httpSettings: {generateRequestId: false}",
               targets="targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]"))
    accepted = cond(status(t, "route")["conditions"], "Accepted")
    assert accepted["message"] == ("invalid field spec.targetRefs[0]: gateway.networking.k8s.io/HTTPRoute cannot be "
                                   "targeted; use gateway.networking.k8s.io Gateway")


def test_shape_errors_are_refused_with_the_field_path() -> None:
    with pytest.raises(ManifestError, match=r"spec.default.httpSettings.healthCheck.path: String should match pattern"):
        run(lp("bad", "  default:\n    httpSettings: {healthCheck: {path: no-slash}}"))
    with pytest.raises(ManifestError, match=r"spec.default.httpSettings.accesLog: Extra inputs are not permitted"):
        run(lp("typo", "  default:\n    httpSettings: {accesLog: []}"))


OTEL = ("  default:\n    httpSettings:\n      accessLog:\n        - openTelemetry:\n"
        "            grpcService: {logName: x, backendRef: {name: app, port: 80}}\n            attributes: ")


@pytest.mark.parametrize("attributes, error", [
    ("{values: [{key: k, value: {kvListValue: {values: [{value: {stringValue: v}}]}}}]}",
     r"attributes\.values\[0\]\.value\.kvListValue\.values\[0\]\.key: Field required"),
    # Three levels down, where the CRD keeps the value free-form: the model still names it.
    ("{values: [{key: k, value: {arrayValue: [{stringValue: a}, {kvListValue: {values: [{key: deep, value: "
     "{arrayValue: [{stringValue: x, arrayValue: []}]}}]}}]}}]}",
     r"attributes\.values\[0\]\.value\.arrayValue\[1\]\.kvListValue\.values\[0\]\.value\.arrayValue\[0\]: "
     r"Value error, exactly one of stringValue, arrayValue or kvListValue must be set \(found stringValue, arrayValue\)"),
    ("{values: [{key: k, value: {}}]}",
     r"attributes\.values\[0\]\.value: Value error, exactly one of stringValue, arrayValue or kvListValue must be set$"),
    ("{values: [{key: k, value: {arrayValue: [{intValue: 1}]}}]}",
     r"attributes\.values\[0\]\.value\.arrayValue\[0\]\.intValue: Extra inputs are not permitted"),
])
def test_bad_otel_values_are_refused_at_any_depth(attributes: str, error: str) -> None:
    with pytest.raises(ManifestError, match=error):
        run(lp("bad", OTEL + attributes))


def test_nested_otel_values_reach_envoy_as_otlp_json() -> None:
    t = run(lp("otel", OTEL + "{values: [{key: k, value: {arrayValue: [{stringValue: a}, {kvListValue: {values: "
                              "[{key: deep, value: {arrayValue: [{stringValue: '%PROTOCOL%'}, {arrayValue: []}]}}]}}]}}]}"))
    s = settings(t, 80)
    assert s is not None
    assert json.loads(s.access_logs[0].attributes or "") == {"values": [{"key": "k", "value": {"arrayValue": {"values": [
        {"stringValue": "a"},
        {"kvlistValue": {"values": [{"key": "deep", "value": {"arrayValue": {"values": [
            {"stringValue": "%PROTOCOL%"}, {"arrayValue": {"values": []}}]}}}]}}]}}}]}


def test_unreachable_collector_leaves_the_other_sinks() -> None:
    t = run(lp("logs", "  default:\n    httpSettings:\n      accessLog:\n        - fileSink: {path: /dev/stdout}\n"
                       "        - grpcService: {logName: x, backendRef: {name: gone, port: 9}}"))
    s = settings(t, 80)
    assert s is not None and [sink.kind for sink in s.access_logs] == ["file"]
    applied = cond(status(t, "logs")["ancestors"][0]["conditions"], "Applied")
    assert applied["reason"] == "PartiallyApplied"
    assert applied["message"] == ("applied: accessLog; accessLog not applied: spec.default.httpSettings.accessLog[1]"
                                  ".grpcService.backendRef: Service default/gone not found")


def test_https_listeners_have_connection_managers_of_their_own() -> None:
    cert, key = CA().issue("example.com", ["a.example.com", "b.example.com"])
    secret = (f"---\napiVersion: v1\nkind: Secret\nmetadata: {{name: tls}}\ntype: kubernetes.io/tls\n"
              f"data: {{tls.crt: {base64.b64encode(cert).decode()}, tls.key: {base64.b64encode(key).decode()}}}\n")
    gateway = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: lychgate
  listeners:
    - {name: secure-a, protocol: HTTPS, port: 443, hostname: a.example.com, tls: {certificateRefs: [{name: tls}]}}
    - {name: secure-b, protocol: HTTPS, port: 443, hostname: b.example.com, tls: {certificateRefs: [{name: tls}]}}
"""
    store = Store()
    store.upsert(builtin_class())
    docs = gateway + secret + lp("only-b", "  default:\n    httpSettings: {healthCheck: {path: /b-health}}",
                                 targets="targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, "
                                         "sectionName: secure-b}]")
    for doc in yaml.safe_load_all(docs):
        store.upsert(parse(doc))
    t = translate(store, lambda gw: "127.0.1.1")
    by_name = {l.name: l.settings for l in t.gateways["default/gw"].listeners}
    assert by_name["https-443-secure-a"] is None
    b = by_name["https-443-secure-b"]
    assert b is not None and b.health_check_path == "/b-health"
