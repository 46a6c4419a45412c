"""Several ExtProc extensions on one route, end to end: real Envoy, real ext_proc servers.

kgateway's TestExtProcWithFilterStageWeightOrdering and TestExtProcWithDeepMerge run with
`policyMerge.trafficPolicy.extProc: DeepMerge`, as this module's lychgate does. Each
ProcServer adds `x-proc-<name>: request` and records the request headers it received, so
the server that runs second sees the first one's header: that is the order proof.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.policies.conftest import Stack, condition
from tests.policies.servers import ProcServer, body_of

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("ext-proc-chain"), policy_merge={"trafficPolicy": {"extProc": "DeepMerge"}})
    yield s
    s.close()


def extension(stack: Stack, name: str, stage: str) -> tuple[ProcServer, str]:
    """A ProcServer named `name` and the ExtProc GatewayExtension `name` in front of it."""
    proc = stack.servers.proc(name)
    stack.service(f"proc-{name}", proc.port)
    return proc, f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: {name}}}
spec:
  extProc:
    grpcService: {{backendRef: {{name: proc-{name}, port: {proc.port}}}}}
    filterStage: {stage}
"""


def uses(policy: str, ext: str, target: str = "") -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {policy}}}
spec:
{target}  extProc:
    extensionRef: {{name: {ext}}}
"""


def named_by_rule(stack: Stack, name: str, host: str, *policies: str) -> str:
    """A route whose rule names the policies in ExtensionRef filters (kgateway's scenario)."""
    filters = "".join(f"\n    - {{type: ExtensionRef, extensionRef: {{group: gateway.lychgate.dev, "
                      f"kind: TrafficPolicy, name: {p}}}}}" for p in policies)
    return stack.route(name, host, f"- backendRefs: [{{name: app, port: 80}}]\n  filters:{filters}")


def two_on_a_rule(stack: Stack, name: str, first: str, second: str) -> tuple[ProcServer, ProcServer]:
    """Extensions `name`-first and `name`-second at the given stages, each named by a policy in
    the ExtensionRef filters of the rule of route `name` (second's policy listed first); waits
    until a request to `name`.example.com has passed both."""
    one, one_ext = extension(stack, f"{name}-first", first)
    two, two_ext = extension(stack, f"{name}-second", second)
    # Extensions first: a listener change drains connections opened before it (conftest).
    stack.write(f"{name}-ext.yaml", one_ext, two_ext)
    stack.write(f"{name}.yaml", uses(f"use-{name}-second", f"{name}-second"),
                uses(f"use-{name}-first", f"{name}-first"),
                named_by_rule(stack, name, f"{name}.example.com", f"use-{name}-second", f"use-{name}-first"))
    stack.wait(f"{name}.example.com", ran(f"{name}-first", f"{name}-second"),
               what="both ext_proc servers to process the request")
    return one, two


def ran(*names: str) -> object:
    def check(resp: httpx.Response) -> bool:
        seen = body_of(resp)["headers"] if resp.status_code == 200 else {}
        return all(seen.get(f"x-proc-{n}") == "request" for n in names)
    return check


def saw(proc: ProcServer, path: str = "/") -> dict[str, str]:
    """The request headers `proc` received for the last request to `path`."""
    return [h for h in proc.requests if h.get(":path") == path][-1]


def test_weight_orders_extensions_at_one_stage(stack: Stack) -> None:
    """kgateway's TestExtProcWithFilterStageWeightOrdering: two extensions After AuthZ, named
    by two policies in the rule's ExtensionRef filters; both run, weight 10 before weight -5."""
    high, low = two_on_a_rule(stack, "weight", "{stage: AuthZ, predicate: After, weight: 10}",
                              "{stage: AuthZ, predicate: After, weight: -5}")
    assert "x-proc-weight-second" not in saw(high)  # the weight-10 one ran first ...
    assert saw(low)["x-proc-weight-first"] == "request"  # ... and the other saw what it added
    for name, other in (("use-weight-second", "default/use-weight-first"),
                        ("use-weight-first", "default/use-weight-second")):
        applied = condition(stack.ancestors(name)[0]["conditions"], "Applied")
        assert applied["status"] == "True", applied
        assert other in applied["message"] and "extProc" in applied["message"]


def test_the_stage_orders_before_the_weight(stack: Stack) -> None:
    """kgateway's mixed-stages scenario: Before AuthN runs before After Route whatever the weights."""
    early, late = two_on_a_rule(stack, "stages", "{stage: AuthN, predicate: Before, weight: -10}",
                                "{stage: Route, predicate: After, weight: 10}")
    assert "x-proc-stages-second" not in saw(early)
    assert saw(late)["x-proc-stages-first"] == "request"


def test_a_gateway_extension_joins_a_route_extension(stack: Stack) -> None:
    """kgateway's TestExtProcWithDeepMerge: the Gateway's extension and the route's both run on
    the route; a route without its own gets the Gateway's; a disable there turns both off.
    Runs last in this module: the Gateway's extension reaches every route of the stack."""
    gw_proc, gw_ext = extension(stack, "gwide", "{stage: AuthZ, predicate: After}")
    route_proc, route_ext = extension(stack, "ronly", "{stage: AuthZ, predicate: After}")
    stack.write("deep-ext.yaml", gw_ext, route_ext)
    on_route = "  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: deep-both}]\n"
    stack.write(
        "deep.yaml",
        uses("on-gateway", "gwide", "  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n"),
        uses("on-route", "ronly", on_route),
        stack.route("deep-both", "deep-both.example.com"),
        stack.route("deep-gateway-only", "deep-gateway-only.example.com"),
        stack.route("deep-off", "deep-off.example.com"),
        """
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: deep-off}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: deep-off}]
  extProc: {disable: {}}
""")
    stack.wait("deep-both.example.com", ran("gwide", "ronly"), what="the Gateway's and the route's ext_proc")
    # Same position and weight: by name, so gwide (GatewayExtension default/gwide) runs first.
    assert saw(route_proc)["x-proc-gwide"] == "request"
    assert "x-proc-ronly" not in saw(gw_proc)

    only = stack.wait("deep-gateway-only.example.com", ran("gwide"), what="the Gateway's ext_proc alone")
    assert "x-proc-ronly" not in body_of(only)["headers"]
    off = stack.get("deep-off.example.com")
    assert off.status_code == 200 and not any(h.startswith("x-proc-") for h in body_of(off)["headers"])

    on_route_status = condition(stack.ancestors("on-route")[0]["conditions"], "Applied")
    assert on_route_status["message"] == "applied: extProc (deep-merged with default/on-gateway)"
    gateway_status = condition(stack.ancestors("on-gateway")[0]["conditions"], "Applied")
    assert "policy default/deep-off on the more specific HTTPRoute default/deep-off, which disables extProc" \
        in gateway_status["message"]
