"""Several ExtProc extensions on one route, as kgateway decides it: translation only.

kgateway (TestExtProcWithFilterStageWeightOrdering, TestExtProcWithDeepMerge): with
`policyMerge.trafficPolicy.extProc: DeepMerge` every extension the route's policies name
runs, each its own filter; without it one policy's extProc applies.
"""

from __future__ import annotations

import pytest
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2 as proc_pb

from lychgate import ir
from lychgate.xds.translator.ext_proc import ExtProc
from tests.policies.test_translate import applied, routes, run, tp

DEEP = {"trafficPolicy": {"extProc": "DeepMerge"}}
GATEWAY = "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]"
RULE_ONE = "targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: one}]"


def extension(name: str, stage: str = "") -> str:
    return f"""---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: {name}}}
spec:
  extProc:
    grpcService: {{backendRef: {{name: authz, port: 9000}}}}
{stage}
"""


EXTENSIONS = (extension("proc-a", "    filterStage: {stage: AuthN, predicate: Before}")
              + extension("proc-b", "    filterStage: {stage: Route, predicate: After}"))


def uses(name: str, extra: str = "") -> str:
    return f"  extProc:\n    extensionRef: {{name: {name}}}\n{extra}"


def names(route: ir.Route) -> list[str]:
    return [p.service.name for p in route.policy.ext_proc] if route.policy is not None else []


def test_without_deep_merge_one_policy_applies_even_for_other_extensions() -> None:
    t = run(EXTENSIONS + tp("a", uses("proc-a")) + tp("b", uses("proc-b")))
    assert names(routes(t)["r/one"]) == ["default/proc-a"]
    b = applied(t, "b", 0)
    assert b["reason"] == "Overridden" and b["message"] == "extProc overridden by older policy default/a"


def test_deep_merge_enables_every_extension_named() -> None:
    t = run(EXTENSIONS + tp("a", uses("proc-a")) + tp("b", uses("proc-b")), merge=DEEP)
    assert names(routes(t)["r/one"]) == ["default/proc-a", "default/proc-b"]
    assert applied(t, "a", 0)["message"] == "applied: extProc (deep-merged with default/b)"
    b = applied(t, "b", 0)
    assert b["reason"] == "Merged"
    assert b["message"] == "deep-merged into older or more specific policies: extProc (with default/a)"


def test_deep_merge_across_gateway_and_route() -> None:
    """kgateway's TestExtProcWithDeepMerge: the Gateway's extension and the route's both run;
    a route with none of its own keeps the Gateway's."""
    t = run(EXTENSIONS + tp("gw", uses("proc-a"), GATEWAY) + tp("route", uses("proc-b"), RULE_ONE), merge=DEEP)
    rs = routes(t)
    assert names(rs["r/one"]) == ["default/proc-b", "default/proc-a"]  # most specific first
    assert names(rs["r/two"]) == ["default/proc-a"]
    assert names(rs["other/0"]) == ["default/proc-a"]


def test_deep_merge_keeps_the_higher_priority_settings_of_an_extension_named_twice() -> None:
    t = run(EXTENSIONS
            + tp("a", uses("proc-a", "    processingMode: {requestBodyMode: BUFFERED}"))
            + tp("b", uses("proc-a", "    processingMode: {requestBodyMode: STREAMED, responseHeaderMode: SEND}"))
            + tp("c", uses("proc-b")), merge=DEEP)
    policy = routes(t)["r/one"].policy
    assert policy is not None
    assert [(p.service.name, p.processing_mode) for p in policy.ext_proc] == [
        ("default/proc-a", ir.ProcessingMode(request_body="BUFFERED")), ("default/proc-b", None)]
    assert applied(t, "a", 0)["message"] == "applied: extProc (deep-merged with default/c)"
    b = applied(t, "b", 0)
    assert b["reason"] == "Overridden"
    assert b["message"] == ("extProc overridden by older policy default/a, "
                            "which names the same GatewayExtension")


@pytest.mark.parametrize("where", ["gateway", "route"])
def test_deep_merge_disable_anywhere_turns_every_extension_off(where: str) -> None:
    off = tp("proc-off", "  extProc:\n    disable: {}", GATEWAY if where == "gateway" else RULE_ONE)
    t = run(EXTENSIONS + off + tp("a", uses("proc-a"), RULE_ONE) + tp("b", uses("proc-b")), merge=DEEP)
    rs = routes(t)
    assert names(rs["r/one"]) == []
    assert names(rs["r/two"]) == ([] if where == "gateway" else ["default/proc-b"])
    a = applied(t, "a", 0)
    assert a["reason"] == "Overridden" and a["message"].endswith(", which disables extProc")


def test_every_extension_of_a_route_is_enabled_on_it() -> None:
    t = run(EXTENSIONS + tp("a", uses("proc-a", "    processingMode: {responseHeaderMode: SKIP}"))
            + tp("b", uses("proc-b")), merge=DEEP)
    out = route_pb.Route()
    ExtProc().patch_route(routes(t)["r/one"], out)
    assert sorted(out.typed_per_filter_config) == ["envoy.filters.http.ext_proc/default/proc-a",
                                                   "envoy.filters.http.ext_proc/default/proc-b"]
    fc = route_pb.FilterConfig()
    out.typed_per_filter_config["envoy.filters.http.ext_proc/default/proc-a"].Unpack(fc)
    per_route = proc_pb.ExtProcPerRoute()
    fc.config.Unpack(per_route)
    assert per_route.overrides.processing_mode.response_header_mode == 2  # SKIP
