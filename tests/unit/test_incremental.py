"""Incremental translation must equal translation from scratch, after every change.

Each step changes the store the way a user would (a Service appears, endpoints
move, a ReferenceGrant is added, a namespace gets the label a listener selects,
a route is edited or deleted, a gRPC or TCP route comes and goes, a
BackendTLSPolicy and its CA appear); after each, a translation that keeps its state
between calls is compared with a fresh one.
"""

from __future__ import annotations

import base64
from typing import Any

from lychgate.api.base import ObjectKey
from lychgate.api.registry import parse
from lychgate.controlplane import builtin_class
from lychgate.status.store import StatusStore
from lychgate.store import Store
from lychgate.translate.aggregate import Aggregate
from lychgate.translate.gateway import translate
from lychgate.xds.translator import build
from lychgate.xds.translator.wire import WireCache
from tests.certs import CA


def obj(doc: dict[str, Any]) -> Any:
    return parse(doc)


GATEWAY = {
    "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw", "namespace": "infra"},
    "spec": {"gatewayClassName": "lychgate", "listeners": [
        {"name": "http", "protocol": "HTTP", "port": 80,
         "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"expose": "yes"}}}}},
        {"name": "tcp", "protocol": "TCP", "port": 5432, "allowedRoutes": {"namespaces": {"from": "All"}}},
    ]},
}


def route(name: str, backend_ns: str = "apps", path: str = "/") -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}], "rules": [
            {"matches": [{"path": {"value": path}}],
             "backendRefs": [{"name": "svc", "namespace": backend_ns, "port": 80}]}]},
    }


def tcp_route() -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "TCPRoute",
            "metadata": {"name": "db", "namespace": "apps"},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "infra", "sectionName": "tcp"}],
                     "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]}}


def grpc_route() -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
            "metadata": {"name": "rpc", "namespace": "apps"},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "infra", "sectionName": "http"}],
                     "hostnames": ["rpc.example.com"],
                     "rules": [{"matches": [{"method": {"service": "demo.Echo"}}],
                                "backendRefs": [{"name": "svc", "port": 80}]}]}}


def backend_tls(ca_pem: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca", "namespace": "apps"},
             "data": {"ca.crt": ca_pem}},
            {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
             "metadata": {"name": "tls", "namespace": "apps"},
             "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "svc"}],
                      "validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
                                     "hostname": "svc.apps.example"}}}]


def service(ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": ns},
            "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}


def endpoints(ns: str, ip: str) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "svc-1", "namespace": ns, "labels": {"kubernetes.io/service-name": "svc"}},
            "endpoints": [{"addresses": [ip]}], "ports": [{"port": 8080}]}


LYCHGATE = "gateway.lychgate.dev/v1alpha1"


def backends_route() -> dict[str, Any]:
    """A route whose rules use a Backend and a DirectResponse (both lychgate kinds)."""
    doc = route("ext", path="/ext")
    doc["spec"]["rules"].append({
        "matches": [{"path": {"value": "/retired"}}],
        "filters": [{"type": "ExtensionRef",
                     "extensionRef": {"group": "gateway.lychgate.dev", "kind": "DirectResponse", "name": "gone"}}]})
    doc["spec"]["rules"][0]["backendRefs"] = [{"group": "gateway.lychgate.dev", "kind": "Backend", "name": "legacy"}]
    return doc


def backend(port: int) -> dict[str, Any]:
    return {"apiVersion": LYCHGATE, "kind": "Backend", "metadata": {"name": "legacy", "namespace": "apps"},
            "spec": {"type": "Static", "static": {"hosts": [{"host": "10.9.0.1", "port": port}]}}}


def direct_response(status: int) -> dict[str, Any]:
    return {"apiVersion": LYCHGATE, "kind": "DirectResponse", "metadata": {"name": "gone", "namespace": "apps"},
            "spec": {"status": status, "body": "gone\n"}}


def backend_config(timeout: str) -> dict[str, Any]:
    return {"apiVersion": LYCHGATE, "kind": "BackendConfigPolicy", "metadata": {"name": "svc-cfg", "namespace": "apps"},
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "svc"}], "connectTimeout": timeout}}


def listener_policy() -> dict[str, Any]:
    return {"apiVersion": LYCHGATE, "kind": "ListenerPolicy", "metadata": {"name": "logs", "namespace": "infra"},
            "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}],
                     "default": {"httpSettings": {"accessLog": [{"fileSink": {"path": "/dev/stdout"}}]}}}}


def hosted_route(name: str, hostname: str) -> dict[str, Any]:
    doc = route(name, path=f"/{name}")
    doc["spec"]["hostnames"] = [hostname]
    return doc


def snapshot(store: Store, state: Aggregate | None, wire: WireCache | None = None,
             statuses: StatusStore | None = None, address: str | None = "127.0.1.1",
             policy_merge: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """The xDS resources and statuses of a pass; with `wire` and `statuses` kept
    across calls, as the control loop keeps them (spliced route tables, statuses
    compared by identity; their transition times left out)."""
    result = translate(store, lambda _gw: address, state=state, policy_merge=policy_merge)
    xds = {ref: {t: {n: r.SerializeToString(deterministic=True) for n, r in byname.items()}
                 for t, byname in build(gw, wire).by_type.items()}
           for ref, gw in result.gateways.items()}
    if statuses is None:
        return xds, result.status
    statuses.update(result.status)
    return xds, {key: untimed(status) for key, status in statuses.items()}


def test_incremental_translation_equals_fresh_translation() -> None:
    store = Store()
    state = Aggregate()
    wire, statuses = WireCache(), StatusStore()
    incremental_passes = 0
    steps = [
        lambda: store.upsert(builtin_class()),
        lambda: store.upsert(obj(GATEWAY)),
        lambda: store.upsert(obj(route("a"))),
        lambda: store.upsert(obj(route("b", backend_ns="shared", path="/b"))),
        lambda: store.upsert(obj({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "apps", "labels": {"expose": "yes"}}})),
        lambda: store.upsert(obj(service("apps"))),
        lambda: store.upsert(obj(endpoints("apps", "10.0.0.1"))),
        lambda: store.upsert(obj(endpoints("apps", "10.0.0.2"))),
        lambda: store.upsert(obj(service("shared"))),
        lambda: store.upsert(obj({
            "apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": "g", "namespace": "shared"},
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "apps"}],
                     "to": [{"group": "", "kind": "Service"}]}})),
        lambda: store.upsert(obj(endpoints("shared", "10.0.1.1"))),
        lambda: store.upsert(obj(route("a", path="/a"))),
        lambda: store.upsert(obj(tcp_route())),
        lambda: store.upsert(obj(grpc_route())),
        lambda: [store.upsert(obj(doc)) for doc in backend_tls(CA().pem.decode())],
        # The BackendTLSPolicy edited and deleted: the clusters that read it change.
        lambda: store.upsert(obj({**backend_tls(CA().pem.decode())[1], "spec": {
            **backend_tls("")[1]["spec"], "validation": {**backend_tls("")[1]["spec"]["validation"],
                                                         "hostname": "other.apps.example"}}})),
        lambda: store.delete(ObjectKey("BackendTLSPolicy", "apps", "tls")),
        # Backends, DirectResponses and BackendConfigPolicies: absent first, then there, edited, gone.
        lambda: store.upsert(obj(backends_route())),
        lambda: store.upsert(obj(backend(8081))),
        lambda: store.upsert(obj(direct_response(410))),
        lambda: store.upsert(obj(direct_response(404))),
        lambda: store.upsert(obj(backend(8082))),
        lambda: store.upsert(obj(backend_config("2s"))),
        lambda: store.upsert(obj(backend_config("3s"))),
        lambda: store.delete(ObjectKey("BackendConfigPolicy", "apps", "svc-cfg")),
        lambda: store.delete(ObjectKey("DirectResponse", "apps", "gone")),
        lambda: store.delete(ObjectKey("Backend", "apps", "legacy")),
        lambda: store.upsert(obj(listener_policy())),
        lambda: store.delete(ObjectKey("ListenerPolicy", "infra", "logs")),
        lambda: store.delete(ObjectKey("TCPRoute", "apps", "db")),
        lambda: store.delete(ObjectKey("ReferenceGrant", "shared", "g")),
        lambda: store.delete(ObjectKey("EndpointSlice", "apps", "svc-1")),
        lambda: store.upsert(obj({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "apps", "labels": {"expose": "no"}}})),
        lambda: store.delete(ObjectKey("HTTPRoute", "apps", "b")),
        lambda: store.upsert(obj({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "apps", "labels": {"expose": "yes"}}})),
        # Hosts that come and go between others: the route table is spliced in place.
        lambda: store.upsert(obj(hosted_route("c", "c.example.com"))),
        lambda: store.upsert(obj(hosted_route("x", "x.example.com"))),
        lambda: store.upsert(obj(hosted_route("m", "m.example.com"))),
        lambda: store.upsert(obj(hosted_route("m", "n.example.com"))),
        lambda: store.delete(ObjectKey("HTTPRoute", "apps", "c")),
        lambda: store.delete(ObjectKey("HTTPRoute", "apps", "x")),
    ]
    changed_outputs = 0
    previous = None
    for i, step in enumerate(steps):
        step()
        before = state.revision
        routes_before = dict(state.routes)
        kept, fresh = snapshot(store, state, wire, statuses), snapshot(store, None)
        assert kept == fresh, f"step {i}: incremental translation differs from a fresh one"
        # An incremental pass keeps the contributions of routes it did not touch.
        incremental_passes += before is not None and any(
            state.routes.get(k) is v for k, v in routes_before.items())
        changed_outputs += kept != previous
        previous = kept
    assert changed_outputs >= len(steps) - 1  # every step changed something a user would see
    # Only the first steps, the namespace label steps, and the first BackendTLSPolicy and
    # BackendConfigPolicy (every route learned there were none) recompiled every route.
    assert incremental_passes >= len(steps) - 8, incremental_passes


def untimed(status: dict[str, Any]) -> Any:
    """A stored status without the lastTransitionTime stamps the store adds."""
    if isinstance(status, dict):
        return {k: untimed(v) for k, v in status.items() if k != "lastTransitionTime"}
    if isinstance(status, list):
        return [untimed(v) for v in status]
    return status


def test_routes_attach_once_the_client_ca_of_their_listener_appears() -> None:
    """A ListenerPolicy asks an HTTPS listener to check clients against a CA ConfigMap that
    does not exist yet: the listener is not served, and the route for it is not attached.
    When the ConfigMap appears no Gateway and no route changed, yet the listener opens; the
    next (incremental) pass must attach the route, as translation from scratch does."""
    ca = CA()
    cert, key = ca.issue("app.example.com", ["app.example.com"])
    store, state = Store(), Aggregate()
    for doc in (
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
         "metadata": {"name": "gw", "namespace": "apps"},
         "spec": {"gatewayClassName": "lychgate", "listeners": [
             {"name": "https", "protocol": "HTTPS", "port": 8443,
              "tls": {"certificateRefs": [{"name": "cert"}]}}]}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cert", "namespace": "apps"},
         "type": "kubernetes.io/tls",
         "data": {"tls.crt": base64.b64encode(cert).decode(), "tls.key": base64.b64encode(key).decode()}},
        {"apiVersion": LYCHGATE, "kind": "ListenerPolicy", "metadata": {"name": "mtls", "namespace": "apps"},
         "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw",
                                  "sectionName": "https"}],
                  "default": {"clientCertificateValidation": {
                      "mode": "Require", "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}]}}}},
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
         "metadata": {"name": "app", "namespace": "apps"},
         "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]}},
        service("apps"),
    ):
        store.upsert(obj(doc))
    store.upsert(builtin_class())

    def attached() -> tuple[int, str]:
        result = translate(store, lambda _gw: "127.0.1.1", state=state)
        listener = result.status[ObjectKey("Gateway", "apps", "gw")]["listeners"][0]
        (parent,) = result.status[ObjectKey("HTTPRoute", "apps", "app")]["parents"]
        accepted = next(c for c in parent["conditions"] if c["type"] == "Accepted")
        return listener["attachedRoutes"], accepted["status"]

    assert attached() == (0, "False")  # the listener is closed: nothing to attach to
    store.upsert(obj({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca", "namespace": "apps"},
                      "data": {"ca.crt": ca.pem.decode()}}))
    assert attached() == (1, "True")
    assert snapshot(store, state) == snapshot(store, None)
