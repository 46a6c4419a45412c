"""IR listeners → Envoy Listeners: HTTP connection managers, TLS and TCP/UDP proxies."""

from __future__ import annotations

from collections.abc import Mapping

from envoy.config.core.v3 import address_pb2, base_pb2, config_source_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2, udp_listener_config_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2 as tcp_pb
from envoy.extensions.filters.udp.udp_proxy.v3 import route_pb2 as udp_route_pb
from envoy.extensions.filters.udp.udp_proxy.v3 import udp_proxy_pb2 as udp_pb
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from google.protobuf import any_pb2

from lychgate import ir
from lychgate.xds.translator import chain_routes, scoped, tls_params
from lychgate.xds.translator.features import FEATURES
from lychgate.xds.translator.route import INVALID_BACKEND


def ads_source() -> config_source_pb2.ConfigSource:
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(),
        resource_api_version=config_source_pb2.V3,
    )


def _pack(message: object) -> any_pb2.Any:
    out = any_pb2.Any()
    out.Pack(message)
    return out


def http_connection_manager(listener: ir.HTTPListener, scope_bits: int = 0,
                            native_key: bool = False) -> hcm_pb.HttpConnectionManager:
    """`scope_bits`: the listener's routes are split into scopes by a key of
    that many bits (scoped.py); 0: one table. `native_key`: lychgate's Envoy
    module computes the key, not CEL."""
    hcm = hcm_pb.HttpConnectionManager(
        stat_prefix=listener.name,
        normalize_path={"value": True},
        merge_slashes=True,
        use_remote_address={"value": True},
    )
    table = chain_routes.routes_name(listener)
    if scope_bits:
        hcm.scoped_routes.CopyFrom(scoped.scoped_routes(table, ads_source()))
    else:
        hcm.rds.CopyFrom(hcm_pb.Rds(config_source=ads_source(), route_config_name=table))
    for feature in FEATURES:
        feature.patch_hcm(listener, hcm)
    if scope_bits:
        # Sets the scope key before Envoy looks the route up (and before any
        # filter); last of the early mutations, so it hashes the Host those leave.
        hcm.early_header_mutation_extensions.append(scoped.scope_key_mutation(table, scope_bits, native_key))
    # The router is always last: filters a feature added run before it.
    hcm.http_filters.append(
        hcm_pb.HttpFilter(name="envoy.filters.http.router", typed_config=_pack(router_pb2.Router()))
    )
    return hcm


def tls_socket(tls: ir.DownstreamTLS) -> base_pb2.TransportSocket:
    context = tls_pb2.DownstreamTlsContext(
        common_tls_context=tls_pb2.CommonTlsContext(
            tls_certificates=[
                common_pb2.TlsCertificate(
                    certificate_chain=base_pb2.DataSource(inline_string=c.chain),
                    private_key=base_pb2.DataSource(inline_string=c.key),
                )
                for c in tls.certificates
            ],
            alpn_protocols=list(tls.alpn),
        )
    )
    if tls.client_ca is not None:
        validation = context.common_tls_context.validation_context
        validation.trusted_ca.inline_string = tls.client_ca
        if tls.client_optional:
            # AllowInsecureFallback: ask for a certificate, let clients in without a valid one.
            validation.trust_chain_verification = common_pb2.CertificateValidationContext.ACCEPT_UNTRUSTED
        elif not tls.client_may_omit:
            context.require_client_certificate.value = True
        # else (mode Optional): Envoy asks for a certificate and verifies the chain of one
        # presented (VERIFY_TRUST_CHAIN, the default), but lets a client without one in.
    tls_params.apply(tls.params, context.common_tls_context.tls_params)
    if tls.client_sans or tls.client_hashes:
        tls_params.verify(context.common_tls_context.validation_context, tls.client_hashes, tls.client_sans)
        if tls.client_ca is None:
            # Fingerprints alone pin the clients: one without a certificate is not let in either.
            context.require_client_certificate.value = True
    return base_pb2.TransportSocket(name="envoy.transport_sockets.tls", typed_config=_pack(context))


def _chain(name: str, server_names: tuple[str, ...], tls: ir.DownstreamTLS | None,
           network_filter: listener_components_pb2.Filter) -> listener_components_pb2.FilterChain:
    chain = listener_components_pb2.FilterChain(filters=[network_filter])
    if server_names or tls is not None:
        chain.name = name  # one of several chains on the port: named in stats and dumps
    if server_names:
        chain.filter_chain_match.server_names.extend(server_names)
    if tls is not None:
        chain.transport_socket.CopyFrom(tls_socket(tls))
    return chain


def _http_chain(listener: ir.HTTPListener, scope_bits: int, native_key: bool) -> listener_components_pb2.FilterChain:
    hcm = listener_components_pb2.Filter(
        name="envoy.filters.network.http_connection_manager",
        typed_config=_pack(http_connection_manager(listener, scope_bits, native_key)),
    )
    return _chain(listener.name, listener.server_names, listener.tls, hcm)


def _tcp_chain(listener: ir.TCPListener) -> listener_components_pb2.FilterChain:
    proxy = tcp_pb.TcpProxy(stat_prefix=listener.name)
    if len(listener.backends) == 1:
        proxy.cluster = listener.backends[0].cluster or INVALID_BACKEND
    else:
        for b in listener.backends:
            proxy.weighted_clusters.clusters.append(
                tcp_pb.TcpProxy.WeightedCluster.ClusterWeight(name=b.cluster or INVALID_BACKEND, weight=b.weight))
    f = listener_components_pb2.Filter(name="envoy.filters.network.tcp_proxy", typed_config=_pack(proxy))
    return _chain(listener.name, listener.server_names, listener.tls, f)


def _socket(address: str, port: int, udp: bool = False) -> address_pb2.Address:
    return address_pb2.Address(socket_address=address_pb2.SocketAddress(
        address=address, port_value=port,
        protocol=address_pb2.SocketAddress.UDP if udp else address_pb2.SocketAddress.TCP))


def _udp_listener(listener: ir.UDPListener) -> listener_pb2.Listener:
    proxy = udp_pb.UdpProxyConfig(stat_prefix=listener.name)
    route = any_pb2.Any()
    route.Pack(udp_route_pb.Route(cluster=listener.backends[0].cluster or INVALID_BACKEND))
    proxy.matcher.on_no_match.action.name = "route"
    proxy.matcher.on_no_match.action.typed_config.CopyFrom(route)
    return listener_pb2.Listener(
        name=f"udp-{listener.port}",
        # Envoy refuses UDP on several workers without SO_REUSEPORT (each worker
        # gets its own socket and the kernel keeps a client's packets on one).
        enable_reuse_port={"value": True},
        address=_socket(listener.address, listener.port, udp=True),
        udp_listener_config=udp_listener_config_pb2.UdpListenerConfig(),
        listener_filters=[listener_components_pb2.ListenerFilter(
            name="envoy.filters.udp_listener.udp_proxy", typed_config=_pack(proxy))],
    )


def envoy_listeners(gateway: ir.GatewayIR, scoped_tables: Mapping[str, int] | None = None,
                    native_key: bool = False) -> list[listener_pb2.Listener]:
    """One Envoy listener per address and port, with one filter chain per Gateway
    listener (or TLSRoute hostname set) served there. `scoped_tables`: the HTTP
    listeners whose routes are split into scopes, and the bits of their keys
    (computed by lychgate's Envoy module with `native_key`, else by CEL)."""
    scoped_tables = scoped_tables or {}
    ports: dict[tuple[str, int], list[ir.HTTPListener | ir.TCPListener]] = {}
    out: list[listener_pb2.Listener] = []
    for chain in (*gateway.listeners, *gateway.streams):
        if isinstance(chain, ir.UDPListener):
            out.append(_udp_listener(chain))
        else:
            ports.setdefault((chain.address, chain.port), []).append(chain)
    for (address, port), chains in ports.items():
        tls = any(c.tls is not None or c.server_names or (isinstance(c, ir.TCPListener) and c.sni)
                  for c in chains)
        http = all(isinstance(c, ir.HTTPListener) for c in chains)
        listener = listener_pb2.Listener(
            # Plain HTTP keeps the name it always had: a renamed listener drains.
            name=f"{'tls' if tls else 'http' if http else 'tcp'}-{port}",
            # Envoy's default SO_REUSEPORT would let a second process bind the same
            # address and port and silently take half the connections; without it
            # a taken port is refused and reported on the listener's status.
            enable_reuse_port={"value": False},
            # One socket shared by the workers: the kernel wakes whichever worker
            # is waiting, and one can end up with most connections (measured: 0.77
            # to 0.84 of Envoy's default throughput, one core idle). Exact balancing
            # hands each accepted connection to the worker with the fewest.
            connection_balance_config=listener_pb2.Listener.ConnectionBalanceConfig(
                exact_balance=listener_pb2.Listener.ConnectionBalanceConfig.ExactBalance()),
            address=_socket(address, port),
            filter_chains=[_http_chain(c, scoped_tables.get(c.name, 0), native_key) if isinstance(c, ir.HTTPListener) else _tcp_chain(c)
                           for c in chains],
        )
        if tls:
            listener.listener_filters.append(listener_components_pb2.ListenerFilter(
                name="envoy.filters.listener.tls_inspector",
                typed_config=_pack(tls_inspector_pb2.TlsInspector())))
        for feature in FEATURES:
            feature.patch_listener(gateway, port, listener)
        out.append(listener)
    return out
