"""Strict validation asks the real Envoy binary, and remembers its verdicts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from lychgate import ir
from lychgate.deploy.local import envoy_binary
from lychgate.xds import types
from lychgate.xds.translator import build, route_matcher
from lychgate.xds.validate import Preflight


def _gateway(*paths: tuple[str, str]) -> ir.GatewayIR:
    cluster = ir.Cluster("kube/default/svc/80", (ir.Endpoint("127.0.0.1", 3000),))
    routes = tuple(
        ir.Route(ir.RouteSource("HTTPRoute", "default", name, 0, 0),
                 ir.Match(path_type="RegularExpression", path=regex),
                 ir.Forward((ir.WeightedCluster(cluster.name, 1),)))
        for name, regex in paths
    )
    listener = ir.HTTPListener("http-80", "127.0.0.1", 80, (ir.VirtualHost("80/*", ("*",), routes),))
    return ir.GatewayIR("default", "gw", (listener,), (cluster,))


async def test_valid_snapshot_passes_and_verdicts_are_cached(tmp_path: Path) -> None:
    pre = Preflight(envoy_binary(), tmp_path)
    resources = build(_gateway(("ok", "/a/[0-9]+")))
    assert await pre.check(resources) == []
    runs = pre.runs
    assert await pre.check(build(_gateway(("ok", "/a/[0-9]+")))) == []
    assert pre.runs == runs  # nothing new: Envoy is not asked again


async def test_rejected_routes_are_named(tmp_path: Path) -> None:
    pre = Preflight(envoy_binary(), tmp_path)
    # Python's re accepts a lookahead; Envoy's RE2 does not.
    resources = build(_gateway(("good", "/a/.*"), ("lookahead", "/b(?=c)"), ("other", "/d")))
    [blocked] = await pre.check(resources)
    assert blocked.type_url == types.LISTENER and blocked.name == "http-80"
    assert "(?=" in blocked.error
    assert blocked.routes == ("httproute/default/lookahead/rule/0/match/0",)


async def test_rejected_routes_are_named_inside_a_matcher_tree(tmp_path: Path) -> None:
    # Enough routes for a prefix map on :path; the bad regex sits in every list of it.
    pre = Preflight(envoy_binary(), tmp_path)
    gateway = _gateway(("lookahead", "/b(?=c)"))
    [vh] = gateway.listeners[0].virtual_hosts
    prefixes = tuple(ir.Route(ir.RouteSource("HTTPRoute", "default", f"p{i}", 0, 0), ir.Match(path=f"/p{i}"),
                              vh.routes[0].action) for i in range(route_matcher.MATCHER_MIN_ROUTES))
    listener = replace(gateway.listeners[0], virtual_hosts=(replace(vh, routes=vh.routes + prefixes),))
    resources = build(replace(gateway, listeners=(listener,)))
    assert resources.message(types.ROUTE, "http-80").virtual_hosts[0].HasField("matcher")
    [blocked] = await pre.check(resources)
    assert blocked.routes == ("httproute/default/lookahead/rule/0/match/0",)


async def test_a_listener_that_fails_on_its_own_blames_no_route(tmp_path: Path) -> None:
    """Were the listener itself refused, every route checked inside it would fail
    too: no route may be blamed (and quarantined) for it."""
    from envoy.extensions.filters.network.http_connection_manager.v3 import (
        http_connection_manager_pb2 as hcm_pb,
    )

    from lychgate.xds.translator import as_message

    pre = Preflight(envoy_binary(), tmp_path)
    resources = build(_gateway(("good", "/a/.*"), ("lookahead", "/b(?=c)")))
    listener = as_message(resources.by_type[types.LISTENER]["http-80"])
    hcm = hcm_pb.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(hcm)
    hcm.http_filters.insert(0, hcm_pb.HttpFilter(name="nosuch"))  # no typed config: refused
    listener.filter_chains[0].filters[0].typed_config.Pack(hcm)
    resources.add(types.LISTENER, "http-80", listener)
    # (the stand-in table of the other filter chain is checked inside that listener too)
    [blocked] = [b for b in await pre.check(resources) if b.type_url == types.LISTENER]
    assert blocked.routes == ()


async def test_a_bucket_shared_across_the_gateway_passes(tmp_path: Path) -> None:
    """Envoy refuses local_cluster_rate_limit without a local cluster: the check's
    bootstrap names the one proxies have (deploy/bootstrap.py)."""
    pre = Preflight(envoy_binary(), tmp_path)
    gateway = _gateway(("shared", "/a/.*"))
    [vh] = gateway.listeners[0].virtual_hosts
    bucket = ir.TokenBucket(max_tokens=4, tokens_per_fill=4, fill_interval_ms=60_000, share_across_gateway=True)
    route = replace(vh.routes[0], policy=ir.RoutePolicy(rate_limit=bucket))
    listener = replace(gateway.listeners[0], virtual_hosts=(replace(vh, routes=(route,)),))
    assert await pre.check(build(replace(gateway, listeners=(listener,)))) == []


async def test_tls_files_only_the_proxy_has_are_stood_in_for(tmp_path: Path) -> None:
    """A BackendConfigPolicy's tls.files names paths in the proxy's container: where they do
    not exist on the controller's machine (Kubernetes), Envoy would refuse to load them and
    preflight would withhold a cluster the proxy takes; they are stood in for. A file that
    does exist here is Envoy's to judge, as it is (local mode: the same machine)."""
    from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

    from lychgate.xds.translator import as_message

    def with_files(cert: str, key: str, ca: str) -> object:
        resources = build(_gateway(("ok", "/a")))
        name = next(iter(resources.by_type[types.CLUSTER]))
        cluster = as_message(resources.by_type[types.CLUSTER][name])
        tls = tls_pb2.UpstreamTlsContext(sni="files.internal")
        pair = tls.common_tls_context.tls_certificates.add()
        pair.certificate_chain.filename, pair.private_key.filename = cert, key
        tls.common_tls_context.validation_context.trusted_ca.filename = ca
        cluster.transport_socket.name = "envoy.transport_sockets.tls"
        cluster.transport_socket.typed_config.Pack(tls)
        resources.add(types.CLUSTER, name, cluster)
        return resources

    pre = Preflight(envoy_binary(), tmp_path / "validate")
    elsewhere = with_files("/etc/lychgate/client/tls.crt", "/etc/lychgate/client/tls.key", "/etc/lychgate/ca.crt")
    assert await pre.check(elsewhere) == []  # type: ignore[arg-type]
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    here = with_files(str(garbage), str(garbage), "/etc/lychgate/ca.crt")
    [blocked] = await pre.check(here)  # type: ignore[arg-type]
    assert blocked.type_url == types.CLUSTER and "certificate" in blocked.error.lower(), blocked.error
