"""HTTPRoutes served through a real Envoy started by `lychgate run`."""

from __future__ import annotations

import collections

import httpx
import pytest

from tests.harness import EchoBackends, Lychgate, gateway_yaml, service_yaml, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def three_backends(lychgate: Lychgate, backends: EchoBackends) -> Lychgate:
    for name in ("v1", "v2", "v3"):
        port = backends.start(pod=name)
        lychgate.write(f"svc-{name}.yaml", service_yaml(name, 80, port))
    lychgate.write("gateway.yaml", gateway_yaml())
    return lychgate


def test_each_match_kind_reaches_its_backend(three_backends: Lychgate) -> None:
    lg = three_backends
    lg.write("route.yaml", """
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {name: matches}
        spec:
          parentRefs: [{name: gw}]
          hostnames: [match.example.com]
          rules:
            - matches: [{path: {type: Exact, value: /exact}}]
              backendRefs: [{name: v1, port: 80}]
            - matches: [{path: {type: PathPrefix, value: /prefix}}]
              backendRefs: [{name: v2, port: 80}]
            - matches: [{path: {type: RegularExpression, value: "/re/[0-9]+"}}]
              backendRefs: [{name: v3, port: 80}]
            - matches: [{headers: [{name: X-Version, value: two}]}]
              backendRefs: [{name: v2, port: 80}]
            - matches: [{queryParams: [{name: v, value: "3"}]}]
              backendRefs: [{name: v3, port: 80}]
            - matches: [{method: DELETE}]
              backendRefs: [{name: v3, port: 80}]
            - backendRefs: [{name: v1, port: 80}]
    """)
    lg.start()
    addr = lg.address()
    host = {"host": "match.example.com"}
    lg.wait_pod(addr, "v1", "/exact", **host)
    assert lg.pod(addr, "/exact/more", **host) == "v1"  # falls to the catch-all rule
    assert lg.pod(addr, "/prefix", **host) == "v2"
    assert lg.pod(addr, "/prefix/deeper", **host) == "v2"
    assert lg.pod(addr, "/prefixnot", **host) == "v1"  # prefixes match whole segments
    assert lg.pod(addr, "/re/42", **host) == "v3"
    assert lg.pod(addr, "/re/abc", **host) == "v1"
    assert lg.pod(addr, "/any", headers={"x-version": "two"}, **host) == "v2"
    assert lg.pod(addr, "/any?v=3", **host) == "v3"
    assert lg.pod(addr, "/any", method="DELETE", **host) == "v3"
    assert lg.pod(addr, "/any", **host) == "v1"
    # No route for another host: Envoy answers 404.
    assert lg.pod(addr, "/exact", host="other.example.com") == 404


def test_precedence_follows_the_gateway_api_order(three_backends: Lychgate) -> None:
    """Exact beats prefix, the longer prefix wins, and more header matches win,
    whatever order the rules and routes are written in."""
    lg = three_backends
    lg.write("a.yaml", """
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {name: a-broad}
        spec:
          parentRefs: [{name: gw}]
          rules:
            - matches: [{path: {type: PathPrefix, value: /api}}]
              backendRefs: [{name: v1, port: 80}]
            - matches: [{path: {type: PathPrefix, value: /api/v2}}]
              backendRefs: [{name: v2, port: 80}]
    """)
    lg.write("b.yaml", """
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {name: b-specific}
        spec:
          parentRefs: [{name: gw}]
          rules:
            - matches: [{path: {type: Exact, value: /api/v2/users}}]
              backendRefs: [{name: v3, port: 80}]
            - matches: [{path: {type: PathPrefix, value: /api}, headers: [{name: x-canary, value: "1"}]}]
              backendRefs: [{name: v3, port: 80}]
    """)
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v3", "/api/v2/users")
    assert lg.pod(addr, "/api/v2/users/1") == "v2"
    assert lg.pod(addr, "/api/other") == "v1"
    assert lg.pod(addr, "/api/other", headers={"x-canary": "1"}) == "v3"


def test_weights_split_traffic(three_backends: Lychgate) -> None:
    lg = three_backends
    lg.write("route.yaml", """
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {name: split}
        spec:
          parentRefs: [{name: gw}]
          rules:
            - backendRefs:
                - {name: v1, port: 80, weight: 3}
                - {name: v2, port: 80, weight: 1}
                - {name: v3, port: 80, weight: 0}
    """)
    lg.start()
    addr = lg.address()
    wait_for(lambda: lg.pod(addr) in ("v1", "v2"), 10, "the split route")
    counts = collections.Counter(lg.pod(addr) for _ in range(400))
    assert set(counts) <= {"v1", "v2"}, counts  # weight 0 gets nothing
    share = counts["v1"] / 400
    assert 0.65 <= share <= 0.85, counts  # 3:1 asked, 0.75 expected


def test_editing_a_route_moves_traffic_and_deleting_gives_404(three_backends: Lychgate) -> None:
    lg = three_backends
    route = """
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {{name: moving}}
        spec:
          parentRefs: [{{name: gw}}]
          rules:
            - backendRefs: [{{name: {backend}, port: 80}}]
    """
    lg.write("route.yaml", route.format(backend="v1"))
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v1")
    lg.write("route.yaml", route.format(backend="v2"))
    lg.wait_pod(addr, "v2", timeout=5)

    def clusters() -> set[str]:
        xds = lg.client.get(f"http://{lg.admin}/snapshots/xds").json()
        cds = next(t for url, t in xds["proxies"][0]["types"].items() if url.endswith("Cluster"))
        return {c["name"] for c in cds["resources"]}

    # v1's cluster lingers only until Envoy has accepted the routes that left it.
    wait_for(lambda: clusters() == {"kube_default_v2_80"}, 5, "the unused cluster to be removed")
    status = lg.status("HTTPRoute", "moving")
    assert status["parents"][0]["conditions"][0]["observedGeneration"] == 2
    lg.delete("route.yaml")
    lg.wait_pod(addr, 404, timeout=5)


def test_unresolvable_backend_answers_500_and_says_why(three_backends: Lychgate) -> None:
    lg = three_backends
    lg.write("route.yaml", """
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {name: half-broken}
        spec:
          parentRefs: [{name: gw}]
          rules:
            - matches: [{path: {value: /missing}}]
              backendRefs: [{name: does-not-exist, port: 80}]
            - backendRefs: [{name: v1, port: 80}]
    """)
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v1", "/fine")
    assert lg.get(addr, "/missing").status_code == 500
    resolved = next(c for c in lg.status("HTTPRoute", "half-broken")["parents"][0]["conditions"]
                    if c["type"] == "ResolvedRefs")
    assert resolved["status"] == "False"
    assert resolved["reason"] == "BackendNotFound"
    assert "default/does-not-exist" in resolved["message"]


def test_cross_namespace_backend_needs_a_reference_grant(three_backends: Lychgate, backends: EchoBackends) -> None:
    lg = three_backends
    port = backends.start(pod="other-ns")
    lg.write("other.yaml", service_yaml("shared", 80, port, namespace="other"))
    lg.write("route.yaml", """
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {name: cross}
        spec:
          parentRefs: [{name: gw}]
          rules:
            - backendRefs: [{name: shared, namespace: other, port: 80}]
    """)
    lg.start()
    addr = lg.address()
    wait_for(lambda: lg.get(addr).status_code == 500, 10, "a 500 without a ReferenceGrant")
    cond = lg.status("HTTPRoute", "cross")["parents"][0]["conditions"][1]
    assert (cond["type"], cond["status"], cond["reason"]) == ("ResolvedRefs", "False", "RefNotPermitted")
    lg.write("grant.yaml", """
        apiVersion: gateway.networking.k8s.io/v1beta1
        kind: ReferenceGrant
        metadata: {name: allow-default, namespace: other}
        spec:
          from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}]
          to: [{group: "", kind: Service}]
    """)
    lg.wait_pod(addr, "other-ns")


def test_many_routes_keep_gateway_api_precedence(lychgate: Lychgate, backends: EchoBackends) -> None:
    """A virtual host with MATCHER_MIN_ROUTES routes or more is a prefix map on
    :path in Envoy (route_matcher.py), not a route list: the answers through
    the real Envoy stay those of the Gateway API precedence order."""
    from lychgate.xds.translator.route_matcher import MATCHER_MIN_ROUTES

    lg = lychgate
    for name in ("exact", "p1", "p10", "root", "canary", "plain", "regex", "filler"):
        lg.write(f"svc-{name}.yaml", service_yaml(name, 80, backends.start(pod=name)))
    lg.write("gateway.yaml", gateway_yaml())
    fillers = [f"/filler/{i}" for i in range(MATCHER_MIN_ROUTES)]
    lg.write("fillers.yaml", "---\n".join(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
        f"metadata: {{name: fillers-{n}}}\n"
        "spec:\n  parentRefs: [{name: gw}]\n  hostnames: [many.example.com]\n"
        f"  rules: [{{matches: [{', '.join(f'{{path: {{value: {p}}}}}' for p in fillers[n:n + 32])}],"
        " backendRefs: [{name: filler, port: 80}]}]\n"
        for n in range(0, len(fillers), 32)))
    lg.write("route.yaml", """
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {name: many}
        spec:
          parentRefs: [{name: gw}]
          hostnames: [many.example.com]
          rules:
            - matches: [{path: {type: PathPrefix, value: /}}]
              backendRefs: [{name: root, port: 80}]
            - matches: [{path: {type: PathPrefix, value: /p1}}]
              backendRefs: [{name: p1, port: 80}]
            - matches: [{path: {type: PathPrefix, value: /p10}}]
              filters:
                - type: RequestHeaderModifier
                  requestHeaderModifier: {set: [{name: x-route, value: p10}]}
              backendRefs: [{name: p10, port: 80}]
            - matches: [{path: {type: Exact, value: /p1}}]
              backendRefs: [{name: exact, port: 80}]
            - matches: [{path: {type: PathPrefix, value: /api}}]
              backendRefs: [{name: plain, port: 80}]
            - matches: [{path: {type: PathPrefix, value: /api}, headers: [{name: x-canary, value: "yes"}]}]
              backendRefs: [{name: canary, port: 80}]
            - matches: [{path: {type: RegularExpression, value: "/re/[0-9]+"}}]
              backendRefs: [{name: regex, port: 80}]
    """)
    lg.start()
    addr = lg.address()
    host = {"host": "many.example.com"}
    lg.wait_pod(addr, "exact", "/p1", **host)
    # Envoy holds a matcher tree for this host, not a route list.
    admin = lg.proxies()["default/gw"]["admin"]
    dump = httpx.get(f"http://{admin}/config_dump", params={"resource": "dynamic_route_configs"}).json()
    [vh] = [vh for c in dump["configs"] for vh in c["route_config"]["virtual_hosts"]
            if vh["domains"] == ["many.example.com"]]
    assert "matcher" in vh and not vh.get("routes")
    expected = {
        "/p1": "exact",  # Exact beats the prefix of the same path
        "/p1?x=1": "exact",  # the query string is not part of the path
        "/p1/": "p1",
        "/p1/x": "p1",
        "/p10": "p10",  # the longer prefix wins
        "/p10/x?y=2": "p10",
        "/p100": "root",  # /p10 and /p1 match whole segments only: falls to "/"
        "/p1x": "root",
        "/api/x": "plain",
        "/apix": "root",
        "/re/42": "regex",  # a regex route is tried under every path key
        "/re/x": "root",
        "/filler/7": "filler",
        "/": "root",
    }
    assert {path: lg.pod(addr, path, **host) for path in expected} == expected
    assert lg.pod(addr, "/api/x", headers={"x-canary": "yes"}, **host) == "canary"  # more header matches win
    assert lg.pod(addr, "/apix", headers={"x-canary": "yes"}, **host) == "root"
    assert lg.pod(addr, "/api/x", headers={"x-canary": "no"}, **host) == "plain"
    # Route-level configuration travels with the route into the tree.
    assert lg.get(addr, "/p10/x", **host).json()["headers"]["X-Route"] == ["p10"]
