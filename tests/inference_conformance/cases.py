"""The 14 tests of the Inference Extension v1.6.0 conformance suite, in upstream's order,
each making the requests and status checks of its Go test (conformance/tests/*.go).

Where a Go test waits a fixed time before polling (HTTPRouteDeletionReconciliationTimeout),
the case polls at once: every check after it is an eventual one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tests.conformance.suite import Cond, Exp, ensure
from tests.inference_conformance.servers import RESULT_HEADER, SELECTION_HEADER
from tests.inference_conformance.suite import (
    APP,
    PRIMARY_DEPLOYMENT,
    PRIMARY_EPP_SERVICE,
    PRIMARY_GW,
    PRIMARY_LABEL,
    PRIMARY_POOL,
    REPLICAS,
    SECONDARY_GW,
    SECONDARY_LABEL,
    SECONDARY_POOL,
    InferenceSuite,
)

Run = Callable[[InferenceSuite], None]
GATEWAY = "SupportGateway"
HTTPROUTE = "SupportHTTPRoute"
POOL = "SupportInferencePool"
PROMPT = b'{"model": "conformance-fake-model", "prompt": "Answer with no disclaimers: What are the advantages ' \
         b'and disadvantages of genetically modified food?"}'
CRITIC = b'{"model": "conformance-fake-model", "prompt": "Write as if you were a critic: San Francisco"}'


@dataclass(frozen=True)
class Case:
    short_name: str
    description: str
    features: tuple[str, ...]
    manifests: tuple[str, ...]
    run: Run

    @property
    def file(self) -> str:
        return f"case-{self.short_name}"


CASES: list[Case] = []


def case(short_name: str, manifest: str, features: tuple[str, ...] = (POOL, GATEWAY)) -> Callable[[Run], Run]:
    def register(fn: Run) -> Run:
        CASES.append(Case(short_name, (fn.__doc__ or "").strip(), features, (f"tests/{manifest}",), fn))
        return fn
    return register


def names_and_ips(suite: InferenceSuite, label: str) -> tuple[list[str], list[str]]:
    pods = suite.pods_with_labels({"app": label})
    return [p["metadata"]["name"] for p in pods], [p["status"]["podIP"] for p in pods]


def ready(suite: InferenceSuite, route: str, gateway: str, pool: str, label: str,
          replicas: int = REPLICAS) -> tuple[str, list[str], list[str]]:
    """The common start of the traffic tests: route accepted and resolved, pool accepted by
    the Gateway, its address, and the pool's `replicas` Pods (names, IPs)."""
    suite.route_accepted_and_resolved(route, gateway)
    suite.pool_accepted(pool, gateway)
    address = suite.gateway_address(gateway)
    names, ips = names_and_ips(suite, label)
    ensure(len(names) == replicas, f"expected {replicas} backend pods, found {len(names)}")
    return address, names, ips


def post(host: str, path: str, selection: str, body: bytes = PROMPT, backend: str = "",
         result: str | None = None) -> Exp:
    return Exp(path=path, host=host, method="POST", body=body, headers={SELECTION_HEADER: selection},
               backend=backend, namespace=APP, response_headers={RESULT_HEADER: result} if result else None)


# --- basic status and routing ----------------------------------------------------------------


@case("InferencePoolAccepted", "inferencepool_accepted.yaml")
def pool_accepted(suite: InferenceSuite) -> None:
    """A minimal InferencePool resource should be accepted by the controller and report an Accepted condition"""
    suite.pool_condition(PRIMARY_POOL, PRIMARY_GW, Cond("Accepted", "True"))


@case("InferencePoolResolvedRefsCondition", "inferencepool_resolvedrefs_condition.yaml")
def resolved_refs_condition(suite: InferenceSuite) -> None:
    """Verify that an InferencePool correctly updates its parent-specific status (e.g., Accepted condition) when
    referenced by HTTPRoutes attached to shared Gateways, and clears parent statuses when no longer referenced."""
    primary_route, secondary_route = "httproute-for-primary-gw", "httproute-for-secondary-gw"
    suite.route_accepted_and_resolved(primary_route, PRIMARY_GW)
    suite.route_accepted_and_resolved(secondary_route, SECONDARY_GW)
    primary, secondary = suite.gateway_address(PRIMARY_GW), suite.gateway_address(SECONDARY_GW)
    to_primary = Exp(host="primary.example.com", path="/primary-gateway-test", backend=PRIMARY_DEPLOYMENT,
                     namespace=APP)
    to_secondary = Exp(host="secondary.example.com", path="/secondary-gateway-test", backend=PRIMARY_DEPLOYMENT,
                       namespace=APP)
    suite.pool_accepted(PRIMARY_POOL, PRIMARY_GW)
    suite.pool_accepted(PRIMARY_POOL, SECONDARY_GW)
    suite.expect(primary, to_primary)
    suite.expect(secondary, to_secondary)

    suite.delete_object("HTTPRoute", APP, primary_route)
    suite.pool_accepted(PRIMARY_POOL, SECONDARY_GW)
    suite.expect(secondary, to_secondary)
    suite.expect(primary, Exp(host="primary.example.com", path="/primary-gateway-test", status=404))

    suite.delete_object("HTTPRoute", APP, secondary_route)
    suite.pool_has_no_parents(PRIMARY_POOL)
    suite.expect(secondary, Exp(host="secondary.example.com", path="/secondary-gateway-test", status=404))


@case("InferencePoolMissingEPPRef", "inferencepool_missing_epp_ref.yaml", (GATEWAY, HTTPROUTE, POOL))
def missing_epp_ref(suite: InferenceSuite) -> None:
    """An HTTPRoute that references an InferencePool with endpointPickerRef unspecified should have Accepted
    condition with status True. The InferencePool should either have Accepted condition with status True or with
    status False and reason EndpointPickerRefMissing"""
    suite.route_condition("httproute-for-missing-epp-ref-pool", PRIMARY_GW, Cond("Accepted", "True", "Accepted"))
    suite.pool_condition("pool-with-missing-epp-ref", PRIMARY_GW, Cond("Accepted", "True"),
                         Cond("Accepted", "False", "EndpointPickerRefMissing"))


@case("InferencePoolInvalidEPPService", "inferencepool_invalid_epp_service.yaml", (GATEWAY, HTTPROUTE, POOL))
def invalid_epp_service(suite: InferenceSuite) -> None:
    """An HTTPRoute that references an InferencePool with a non-existent EPP service should have a ResolvedRefs
    condition with a status of False and a reason of BackendNotFound."""
    address = suite.gateway_address(PRIMARY_GW)
    suite.route_condition("httproute-for-invalid-epp-pool", PRIMARY_GW, Cond("Accepted", "True", "Accepted"))
    suite.pool_condition("pool-with-invalid-epp", PRIMARY_GW, Cond("ResolvedRefs", "False"))
    suite.expect(address, Exp(path="/invalid-epp-test", status=(500, 501, 502, 503, 504), namespace=APP))


@case("InferencePoolHTTPRoutePortValidation", "inferencepool_httproute_port_validation.yaml")
def port_validation(suite: InferenceSuite) -> None:
    """Validates HTTPRoute backendRef port configurations (unspecified, matching, non-matching) when referencing
    an InferencePool, and checks resulting status conditions."""
    address = suite.gateway_address(PRIMARY_GW)
    for scenario in ("unspecified", "matching", "non-matching"):
        suite.route_accepted_and_resolved(f"httproute-pool-port-{scenario}", PRIMARY_GW)
        suite.pool_accepted(PRIMARY_POOL, PRIMARY_GW)
        # Non-matching too: the port of an InferencePool backendRef is ignored.
        suite.expect(address, Exp(host=f"port-{scenario}.example.com", path=f"/test-port-{scenario}",
                                  backend=PRIMARY_DEPLOYMENT, namespace=APP))


@case("InferencePoolAppProtocol", "inferencepool_appprotocol.yaml")
def app_protocol(suite: InferenceSuite) -> None:
    """An InferencePool should honor explicit appProtocol values and default to HTTP/1.1 when appProtocol is
    omitted."""
    address = suite.gateway_address(PRIMARY_GW)
    body = b'{"model": "conformance-fake-model", "prompt": "Describe San Francisco in one sentence."}'
    for kind, port, pool, label in (
        ("h2c", "3001", "appprotocol-h2c-inference-pool", "appprotocol-inference-model-server"),
        ("http", "3000", "appprotocol-http-inference-pool", "appprotocol-inference-model-server"),
        ("default", "3000", PRIMARY_POOL, PRIMARY_LABEL),
    ):
        suite.route_accepted_and_resolved(f"httproute-for-inferencepool-appprotocol-{kind}", PRIMARY_GW)
        suite.pool_accepted(pool, PRIMARY_GW)
        names, ips = names_and_ips(suite, label)
        ensure(bool(names), f"no backend pods for {label}")
        for name, ip in zip(names, ips, strict=True):
            selected = f"{ip}:{port}"
            suite.expect(address, post(f"appprotocol-{kind}.example.com", f"/inferencepool-app-protocol-{kind}",
                                       selected, body, backend=name, result=selected))


@case("HTTPRouteMultipleRulesDifferentPools", "inferencepool_multiple_rules_different_pools.yaml",
      (GATEWAY, HTTPROUTE, POOL))
def multiple_rules_different_pools(suite: InferenceSuite) -> None:
    """An HTTPRoute with two rules routing to two different InferencePools"""
    route = "httproute-multiple-rules-different-pools"
    for pool in (PRIMARY_POOL, SECONDARY_POOL):
        suite.route_accepted_and_resolved(route, PRIMARY_GW)
        suite.pool_accepted(pool, PRIMARY_GW)
    address = suite.gateway_address(PRIMARY_GW)
    suite.expect(address, Exp(path="/primary", backend=PRIMARY_LABEL, namespace=APP))
    suite.expect(address, Exp(path="/secondary", backend=SECONDARY_LABEL, namespace=APP))


@case("HTTPRouteInvalidInferencePoolRef", "httproute_invalid_inferencepool_ref.yaml")
def invalid_pool_ref(suite: InferenceSuite) -> None:
    """Tests HTTPRoute status when it references an InferencePool that does not exist."""
    route = "httproute-to-non-existent-pool"
    suite.route_condition(route, PRIMARY_GW, Cond("Accepted", "True", "Accepted"))
    suite.route_condition(route, PRIMARY_GW, Cond("ResolvedRefs", "False", "BackendNotFound"))


@case("HTTPRouteMultipleGatewaysDifferentPools", "httproute_multiple_gateways_different_pools.yaml", ())
def multiple_gateways_different_pools(suite: InferenceSuite) -> None:
    """Validates two HTTPRoutes on different Gateways successfully referencing different InferencePools and routes
    traffic accordingly."""
    for route, gateway, pool, host, path, backend in (
        ("route-for-primary-gateway", PRIMARY_GW, PRIMARY_POOL, "primary.example.com", "/test-primary-gateway",
         PRIMARY_LABEL),
        ("route-for-secondary-gateway", SECONDARY_GW, SECONDARY_POOL, "secondary.example.com",
         "/test-secondary-gateway", SECONDARY_LABEL),
    ):
        suite.route_accepted_and_resolved(route, gateway)
        suite.pool_accepted(pool, gateway)
        suite.expect(suite.gateway_address(gateway), Exp(host=host, path=path, backend=backend, namespace=APP))


# --- following the endpoint picker -----------------------------------------------------------


def only_to(suite: InferenceSuite, address: str, exp: Exp, allowed: list[str], total: int = 100,
            concurrency: int = 10) -> list[dict[str, object]]:
    """assertTrafficOnlyReachesToExpectedPods: every answer passes and comes from an allowed pod."""
    echoes = [a.json() or {} for a in suite.many(address, exp, total, concurrency)]
    for echo in echoes:
        ensure(echo.get("pod") in allowed, f"request was handled by an unexpected pod {echo.get('pod')!r}")
    return echoes


@case("GatewayFollowingEPPRouting", "gateway_following_epp_routing.yaml")
def following_epp_routing(suite: InferenceSuite) -> None:
    """Inference gateway should send traffic to an endpoint in the list returned by EPP"""
    host, path = "primary.example.com", "/primary-gateway-test"
    address, names, ips = ready(suite, "httproute-for-primary-gw", PRIMARY_GW, PRIMARY_POOL, PRIMARY_LABEL)
    for name, ip in zip(names, ips, strict=True):
        suite.expect(address, post(host, path, ip, backend=name))
    for chosen in ([2], [0, 1], [0, 1, 2]):
        only_to(suite, address, post(host, path, ",".join(ips[i] for i in chosen), backend=PRIMARY_LABEL),
                [names[i] for i in chosen])


@case("GatewayFollowingEPPRoutingWithDataParallelism", "gateway_following_epp_routing_dp.yaml")
def following_epp_routing_dp(suite: InferenceSuite) -> None:
    """Inference gateway should restrict traffic to EPP-selected pods while EPP balances across multiple
    targetPorts (DP ranks)"""
    host, path = "primary.example.com", "/primary-gateway-dp-test"
    dp_ports = {"3000", "3002", "3004"}
    address, names, ips = ready(suite, "httproute-for-primary-gw-dp", PRIMARY_GW, "dp-inference-pool",
                                "dp-inference-model-server")
    ip_of = dict(zip(names, ips, strict=True))
    for name, ip in zip(names, ips, strict=True):
        suite.expect(address, post(host, path, ip, backend=name))
    for allowed_ports, expected in (
        ({ips[1]: set[str]()}, [names[1]]),
        ({ips[0]: set(), ips[2]: {"3002"}}, [names[0], names[2]]),
        ({ips[0]: set(), ips[1]: {"3000", "3004"}, ips[2]: set()}, names),
    ):
        # buildEPPHeader: "IP" for any rank, "IP:port" for each allowed rank; sorted.
        tokens = [tok for ip in sorted(allowed_ports)
                  for tok in ([ip] if not allowed_ports[ip] else [f"{ip}:{p}" for p in sorted(allowed_ports[ip])])]
        for echo in only_to(suite, address, post(host, path, ",".join(tokens), backend="dp-inference-model-server"),
                            expected):
            port = str(echo.get("httpPort") or "")
            ensure(bool(port), "missing httpPort in echo JSON body response")
            allowed = allowed_ports.get(ip_of[str(echo["pod"])])
            ensure(allowed is not None, f"pod {echo['pod']} not present in EPP selection")
            ensure(port in (allowed or dp_ports), f"unexpected httpPort {port!r} for pod {echo['pod']} "
                                                  f"(allowed: {sorted(allowed or dp_ports)})")


@case("GatewayWeightedAcrossTwoInferencePools", "gateway_weighted_two_pools.yaml")
def weighted_two_pools(suite: InferenceSuite) -> None:
    """Gateway should split traffic across two InferencePools based on backendRef weights and route only to
    endpoints of the selected InferencePool"""
    host, path = "primary.example.com", "/weighted-two-pools-test"
    total, primary_weight, secondary_weight = 200, 70, 30
    suite.route_accepted_and_resolved("httproute-weighted-two-pools", PRIMARY_GW)
    suite.pool_accepted(PRIMARY_POOL, PRIMARY_GW)
    suite.pool_accepted(SECONDARY_POOL, PRIMARY_GW)
    address = suite.gateway_address(PRIMARY_GW)
    primary_names, primary_ips = names_and_ips(suite, PRIMARY_LABEL)
    secondary_names, secondary_ips = names_and_ips(suite, SECONDARY_LABEL)
    ensure(len(primary_names) == 3 and len(secondary_names) == 3, "expected 3 pods in each pool")
    selection = ",".join(primary_ips + secondary_ips)
    suite.expect(address, post(host, path, selection, b'{"model":"conformance-fake-model","prompt":"Warmup"}'))
    hits = {"primary": 0, "secondary": 0}
    for echo in (a.json() or {} for a in suite.many(address, post(host, path, selection, CRITIC), total, 5)):
        pod = echo.get("pod")
        if pod in primary_names:
            hits["primary"] += 1
        elif pod in secondary_names:
            hits["secondary"] += 1
        else:
            ensure(False, f"request was handled by unexpected pod {pod!r} (not in either pool)")
    observed = hits["primary"] / total
    expected = primary_weight / (primary_weight + secondary_weight)
    tolerance = max(0.10, 3.0 * math.sqrt(expected * (1 - expected) / total))
    ensure(abs(observed - expected) <= tolerance,
           f"weighted split out of bounds: observed primary={observed:.3f} (hits={hits['primary']}/{total}), "
           f"expected={expected:.3f}, tolerance=±{tolerance:.3f}")


@case("GatewayDestinationEndpointServed", "gateway_destination_endpoint_served.yaml")
def destination_endpoint_served(suite: InferenceSuite) -> None:
    """A conformance test to verify that the gateway correctly reports the endpoint that served the request."""
    address, names, ips = ready(suite, "httproute-for-destination-endpoint-served", PRIMARY_GW, PRIMARY_POOL,
                                PRIMARY_LABEL)
    for name, ip in zip(names, ips, strict=True):
        suite.expect(address, post("primary.example.com", "/destination-endpoint-served-test", ip, CRITIC,
                                   backend=name, result=f"{ip}:3000"))


@case("EppUnAvailableFailOpen", "epp_unavailable_fail_open.yaml")
def epp_unavailable_fail_open(suite: InferenceSuite) -> None:
    """Inference gateway should send traffic to backends even when the EPP is unavailable (fail-open)"""
    host, path = "secondary.example.com", "/failopen-pool-test"
    address, names, ips = ready(suite, "httproute-for-failopen-pool-gw", SECONDARY_GW, SECONDARY_POOL,
                                SECONDARY_LABEL)
    suite.expect(address, post(host, path, ips[0], backend=names[0]))
    # As upstream v1.6.0 does: it makes the *primary* pool's picker Service unavailable.
    with suite.service_unavailable(PRIMARY_EPP_SERVICE):
        suite.expect(address, post(host, path, ips[0], backend=SECONDARY_LABEL))
