"""A waypoint of an ambient mesh: real HBONE (HTTP/2 CONNECT) through a real Envoy.

The client is what a ztunnel is to the waypoint: it opens an HTTP/2
connection to the waypoint's HBONE port, CONNECTs to a Service's address and
speaks HTTP/1.1 inside the tunnel (tests/hbone.py).
"""

from __future__ import annotations

import base64
import collections
import ssl
import textwrap
from pathlib import Path

import pytest

from tests import hbone
from tests.certs import CA
from tests.harness import EchoBackends, Lychgate, free_port, service_yaml, wait_for

pytestmark = pytest.mark.e2e

REVIEWS = "reviews.default.svc.cluster.local:80"
REVIEWS_IP = "10.96.0.10:80"
RATINGS = "ratings.default.svc.cluster.local:80"


def waypoint_yaml(port: int) -> str:
    return textwrap.dedent(f"""\
        apiVersion: gateway.networking.k8s.io/v1
        kind: Gateway
        metadata: {{name: waypoint, namespace: default}}
        spec:
          gatewayClassName: lychgate-waypoint
          listeners:
            - {{name: mesh, protocol: HBONE, port: {port}}}
        """)


def opted_in(text: str, cluster_ip: str | None = None) -> str:
    """A Service manifest labelled to use the waypoint (and given a cluster IP)."""
    extra = f"\n  clusterIP: {cluster_ip}" if cluster_ip else ""
    return text.replace("metadata: {name: reviews, namespace: default}",
                        "metadata:\n  name: reviews\n  namespace: default\n"
                        "  labels: {istio.io/use-waypoint: waypoint}", 1).replace(
        "spec:\n  ports:", f"spec:{extra}\n  ports:", 1)


@pytest.fixture
def mesh(lychgate: Lychgate, backends: EchoBackends) -> tuple[Lychgate, str, int]:
    lg = lychgate
    lg.write("reviews.yaml", opted_in(service_yaml("reviews", 80, backends.start(pod="reviews-v1")),
                                      cluster_ip="10.96.0.10"))
    lg.write("reviews-v2.yaml", service_yaml("reviews-v2", 80, backends.start(pod="reviews-v2")))
    lg.write("ratings.yaml", service_yaml("ratings", 80, backends.start(pod="ratings")))
    port = free_port()
    lg.write("waypoint.yaml", waypoint_yaml(port))
    lg.start("--waypoint")
    return lg, lg.address("waypoint"), port


def test_gamma_routes_steer_service_traffic_through_the_waypoint(mesh: tuple[Lychgate, str, int]) -> None:
    lg, addr, port = mesh

    def via(authority: str, path: str = "/", **kwargs: object) -> hbone.TunnelResult:
        return hbone.request(addr, authority, path, port=port, **kwargs)  # type: ignore[arg-type]

    # No route yet: the captured Service's traffic goes to the Service, by name or cluster IP.
    wait_for(lambda: via(REVIEWS).pod == "reviews-v1", 20, "reviews through the waypoint")
    assert via(REVIEWS_IP, "/x").pod == "reviews-v1"
    # A Service that did not opt in is not captured: nothing to tunnel to.
    assert via(RATINGS).connect_status == 404

    lg.write("route.yaml", """
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {name: reviews, namespace: default}
        spec:
          parentRefs: [{group: "", kind: Service, name: reviews, port: 80}]
          rules:
            - matches: [{path: {type: PathPrefix, value: /v2}}]
              backendRefs: [{name: reviews-v2, port: 80}]
            - matches: [{path: {type: PathPrefix, value: /api}, headers: [{name: x-canary, value: "yes"}]}]
              filters:
                - type: RequestHeaderModifier
                  requestHeaderModifier: {set: [{name: x-routed-by, value: waypoint}]}
              backendRefs: [{name: reviews-v2, port: 80}]
            - matches: [{path: {type: PathPrefix, value: /api}}]
              backendRefs: [{name: reviews, port: 80, weight: 1}, {name: reviews-v2, port: 80, weight: 1}]
    """)
    wait_for(lambda: via(REVIEWS, "/v2/books").pod == "reviews-v2", 10, "the path rule")
    canary = via(REVIEWS_IP, "/api/x", headers={"x-canary": "yes"})
    assert canary.pod == "reviews-v2"
    assert canary.json()["headers"]["X-Routed-By"] == ["waypoint"]
    split = collections.Counter(via(REVIEWS, "/api/y").pod for _ in range(40))
    assert set(split) == {"reviews-v1", "reviews-v2"}, split
    # With routes on the Service, a request no rule matches is a 404 (Gateway API).
    assert via(REVIEWS, "/other").status == 404
    assert via(RATINGS).connect_status == 404

    (parent,) = lg.status("HTTPRoute", "reviews")["parents"]
    assert parent["parentRef"] == {"group": "", "kind": "Service", "namespace": "default", "name": "reviews",
                                   "port": 80}
    assert parent["controllerName"] == "gateway.lychgate.dev/lychgate"
    conds = {c["type"]: c for c in parent["conditions"]}
    assert conds["Accepted"]["status"] == "True", conds
    assert "waypoint default/waypoint" in conds["Accepted"]["message"]
    assert conds["ResolvedRefs"]["status"] == "True"
    (listener,) = lg.status("Gateway", "waypoint")["listeners"]
    assert listener["attachedRoutes"] == 1

    # Opting out again: the Service is no longer captured.
    lg.write("reviews.yaml", lg.manifests.joinpath("reviews.yaml").read_text().replace(
        "istio.io/use-waypoint: waypoint", "istio.io/use-waypoint: none"))
    wait_for(lambda: via(REVIEWS).connect_status == 404, 10, "reviews to leave the waypoint")


def test_routes_to_services_of_a_labelled_namespace(lychgate: Lychgate, backends: EchoBackends) -> None:
    """A Namespace label captures every Service in it; a Service's own `none` opts it out."""
    lg = lychgate
    lg.write("ns.yaml", """
        apiVersion: v1
        kind: Namespace
        metadata: {name: shop, labels: {istio.io/use-waypoint: waypoint, istio.io/use-waypoint-namespace: default}}
    """)
    lg.write("cart.yaml", service_yaml("cart", 8080, backends.start(pod="cart"), namespace="shop"))
    lg.write("admin.yaml", service_yaml("admin", 8080, backends.start(pod="admin"), namespace="shop").replace(
        "metadata: {name: admin, namespace: shop}",
        "metadata: {name: admin, namespace: shop, labels: {istio.io/use-waypoint: none}}", 1))
    port = free_port()
    lg.write("waypoint.yaml", waypoint_yaml(port))
    lg.start("--waypoint")
    addr = lg.address("waypoint")
    wait_for(lambda: hbone.request(addr, "cart.shop.svc.cluster.local:8080", port=port).pod == "cart", 20,
             "cart through the waypoint")
    assert hbone.request(addr, "admin.shop.svc.cluster.local:8080", port=port).connect_status == 404


def test_hbone_with_certificates_is_mutual_tls(lychgate: Lychgate, backends: EchoBackends, tmp_path: Path) -> None:
    """With tls.certificateRefs on the HBONE listener and the mesh CA as the
    Gateway's client CA, only clients with a mesh certificate get a tunnel."""
    mesh_ca = CA("mesh CA")
    cert, key = mesh_ca.issue("waypoint.mesh", ["waypoint.mesh"])
    client = mesh_ca.write_tls_dir(tmp_path / "ztunnel", "ztunnel", ["ztunnel.mesh"])
    pem = "\n".join("    " + line for line in mesh_ca.pem.decode().splitlines())
    port = free_port()
    lychgate.write("reviews.yaml", opted_in(service_yaml("reviews", 80, backends.start(pod="reviews-v1"))))
    lychgate.write("waypoint.yaml", f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: waypoint, namespace: default}}
spec:
  gatewayClassName: lychgate-waypoint
  tls: {{frontend: {{default: {{validation: {{caCertificateRefs: [{{kind: ConfigMap, name: mesh-ca}}]}}}}}}}}
  listeners:
    - {{name: mesh, protocol: HBONE, port: {port}, tls: {{certificateRefs: [{{name: waypoint-cert}}]}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: mesh-ca, namespace: default}}
data:
  ca.crt: |
{pem}
---
apiVersion: v1
kind: Secret
metadata: {{name: waypoint-cert, namespace: default}}
type: kubernetes.io/tls
data: {{tls.crt: {base64.b64encode(cert).decode()}, tls.key: {base64.b64encode(key).decode()}}}
""")
    lychgate.start("--waypoint")
    addr = lychgate.address("waypoint")

    def context(with_cert: bool) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cadata=mesh_ca.pem.decode())
        ctx.set_alpn_protocols(["h2"])
        if with_cert:
            ctx.load_cert_chain(client / "tls.crt", client / "tls.key")
        return ctx

    def through(with_cert: bool) -> str | int:
        try:
            return hbone.request(addr, REVIEWS, port=port, tls=context(with_cert)).pod
        except (ssl.SSLError, OSError, ConnectionError) as err:
            return type(err).__name__

    wait_for(lambda: through(True) == "reviews-v1", 20, "a mesh client through the mTLS tunnel")
    assert through(False) != "reviews-v1"  # no mesh certificate: no tunnel
    # Plain HTTP/2 to an mTLS port gets nowhere either.
    with pytest.raises((ConnectionError, OSError, TimeoutError)):
        hbone.request(addr, REVIEWS, port=port, timeout=2)
