"""lychgate's checks agree with the real Envoy: what translation accepts, Envoy
accepts, and what it refuses, Envoy refuses (`envoy --mode validate`, the
proxies' own binary, no imitation)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from lychgate import envoy_limits, ir
from lychgate.api.base import ObjectKey
from lychgate.api.registry import ManifestError, parse
from lychgate.controlplane import builtin_class
from lychgate.deploy.local import envoy_binary
from lychgate.store import Store
from lychgate.translate.gateway import translate
from lychgate.xds.translator import build
from lychgate.xds.validate import Preflight

# Pieces of regexes users write, and of the ones RE2 does not take (lookaround,
# back-references, possessive quantifiers, \Z), with repetitions large enough to
# cross Envoy's program-size limit of 100 and RE2's repeat limit of 1000.
_ATOMS = st.sampled_from([
    "a", "b", "/", r"\.", ".", r"\d", r"\w", r"\s", "[a-z]", "[^/]", "[0-9a-f]", r"\p{L}", "(?i:x)",
    "(?=a)", "(?!b)", "(?<=c)", r"\1", r"\Z", "a*+", "(?P<n>a)", "[[:alpha:]]", "(?#c)", r"\Q.\E",
    "é", "[^é]", "日本", r"\x{65e5}", "[a-zé]",
])
_QUANTIFIERS = st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,3}", "{40}", "{1,20}", "{1001}", "*?"])


@st.composite
def regexes(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(_ATOMS, _QUANTIFIERS), min_size=1, max_size=5))
    body = "".join(f"(?:{a}){q}" if q and len(a) > 1 else a + q for a, q in parts)
    return draw(st.sampled_from(["", "/", "^"])) + body + draw(st.sampled_from(["", ".*", "$", "|x"]))


def _gateway(patterns: list[str]) -> ir.GatewayIR:
    cluster = ir.Cluster("kube/default/svc/80", (ir.Endpoint("127.0.0.1", 3000),))
    routes = tuple(
        ir.Route(ir.RouteSource("HTTPRoute", "default", f"r{i}", 0, 0),
                 ir.Match(headers=(ir.StringMatch("x-test", "RegularExpression", p),)),
                 ir.Forward((ir.WeightedCluster(cluster.name, 1),)))
        for i, p in enumerate(patterns)
    )
    listener = ir.HTTPListener("http-80", "127.0.0.1", 80, (ir.VirtualHost("80/*", ("*",), routes),))
    return ir.GatewayIR("default", "gw", (listener,), (cluster,))


def _lychgate_accepts(pattern: str) -> bool:
    try:
        envoy_limits.regex(pattern)
    except envoy_limits.EnvoyRejects:
        return False
    return True


# No shrinking: each step would ask Envoy again; the failure names the patterns.
@settings(max_examples=int(os.environ.get("LYCHGATE_FUZZ_EXAMPLES", "8")), deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(regexes(), min_size=30, max_size=30, unique=True))
def test_lychgate_and_envoy_agree_on_regexes(tmp_path: Path, patterns: list[str]) -> None:
    accepted = [p for p in patterns if _lychgate_accepts(p)]
    refused = [p for p in patterns if p not in accepted]
    pre = Preflight(envoy_binary(), tmp_path)
    # Everything lychgate accepts, in one RouteConfiguration: Envoy must take it
    # (if not, the blame names the patterns that disagree).
    blocked = asyncio.run(pre.check(build(_gateway(accepted)))) if accepted else []
    disagree = [accepted[int(name.split("/")[2][1:])] for b in blocked for name in b.routes]
    assert not blocked, f"lychgate accepts, Envoy refuses: {disagree or blocked}"
    # Each pattern lychgate refuses, alone: Envoy must refuse it too.
    for pattern in refused:
        assert asyncio.run(pre.check(build(_gateway([pattern])))), f"lychgate refuses, Envoy accepts: {pattern!r}"


def test_the_program_size_limit_is_envoys() -> None:
    """The boundary itself: 100 is taken, 101 is refused, by both."""
    pre = Preflight(envoy_binary())
    at_limit, over = "/a{95}", "/a{96}"  # RE2 program sizes 100 and 101
    assert _lychgate_accepts(at_limit) and not _lychgate_accepts(over)
    assert asyncio.run(pre.check(build(_gateway([at_limit])))) == []
    [blocked] = asyncio.run(pre.check(build(_gateway([over]))))
    assert "program size of 101" in blocked.error


_GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw", "namespace": "default"},
            "spec": {"gatewayClassName": "lychgate", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}
_SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "default"},
            "spec": {"ports": [{"port": 80}]}}
_ROUTE = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "r", "namespace": "default"},
          "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]}}
_TO_SERVICE = [{"group": "", "kind": "Service", "name": "svc"}]
_TO_GATEWAY = [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}]
_CHECK = {"interval": "1s", "timeout": "1s", "unhealthyThreshold": 1, "healthyThreshold": 1}
# Policy settings Envoy refuses (found with envoy --mode validate), and the field each must name.
POLICIES = {
    "health check path": ({"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "BackendConfigPolicy",
                           "metadata": {"name": "p", "namespace": "default"},
                           "spec": {"targetRefs": _TO_SERVICE, "healthCheck": {**_CHECK, "http": {"path": "/h\nx"}}}},
                          "spec.healthCheck.http.path"),
    "health check host": ({"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "BackendConfigPolicy",
                           "metadata": {"name": "p", "namespace": "default"},
                           "spec": {"targetRefs": _TO_SERVICE,
                                    "healthCheck": {**_CHECK, "http": {"path": "/h", "host": "a\r\nb"}}}},
                          "spec.healthCheck.http.host"),
    "early header value": ({"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "ListenerPolicy",
                            "metadata": {"name": "p", "namespace": "default"},
                            "spec": {"targetRefs": _TO_GATEWAY, "default": {"httpSettings": {
                                "earlyRequestHeaderModifier": {"set": [{"name": "x-a", "value": "a\nb"}]}}}}},
                           "earlyRequestHeaderModifier.set[0].value"),
    "csrf origin regex": ({"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "TrafficPolicy",
                           "metadata": {"name": "p", "namespace": "default"},
                           "spec": {"targetRefs": _TO_GATEWAY, "csrf": {"additionalOrigins": [
                               {"safeRegex": "https://(?!evil).*"}]}}},
                          "safeRegex"),
}


@pytest.mark.parametrize("case", sorted(POLICIES))
def test_policy_settings_envoy_refuses_are_reported_not_sent(case: str, tmp_path: Path) -> None:
    doc, field = POLICIES[case]
    store = Store()
    store.upsert(builtin_class())
    for d in (_GATEWAY, _SERVICE, _ROUTE):
        store.upsert(parse(d))
    try:
        store.upsert(parse(doc))
    except ManifestError as err:  # refused at load, naming the field: as good
        assert field in str(err)
        return
    t = translate(store, lambda gw: "127.0.1.1")
    status = json.dumps(t.status[ObjectKey(doc["kind"], "default", "p")])
    assert field in status and "Envoy" in status, status
    assert asyncio.run(Preflight(envoy_binary(), tmp_path).check(build(t.gateways["default/gw"]))) == []
