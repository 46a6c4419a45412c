"""The Envoy bootstrap every proxy starts with, locally and in Kubernetes.

It names the Gateway the proxy serves (node id "namespace/name") and points
ADS at the control plane; everything else arrives over xDS, the endpoints of
the local cluster (the Gateway's proxies, xds/replicas.py) included.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lychgate.api.lychgate import EnvoyBootstrap
from lychgate.deploy.overload import Limits, overload_manager
from lychgate.deploy.overload import limits as overload_limits
from lychgate.xds.replicas import LOCAL_CLUSTER


@dataclass(frozen=True)
class XdsTarget:
    host: str
    port: int
    # PEM files for xDS over TLS: the CA that signed the server certificate,
    # and optionally a client certificate and key.
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None


# Envoy writes file access logs (a path, /dev/stdout included) from a buffer it
# flushes every 10 s by default (or at 64 KiB): a request of a quiet gateway
# reached its log up to 10 s late. Every second instead: a logged request is
# in the file within about a second.
# A connection on a filter chain that changed (a listener's first policy, a new
# GatewayExtension) drains: with the immediate strategy Envoy closes it at its
# next answer (HTTP/1 `Connection: close`, HTTP/2 GOAWAY) instead of with a
# probability that grows over the drain time, so it does not go on running the
# old chain's filters (xds/translator/chain_routes.py). The drain time (how long
# requests in flight, say a stream, may go on) stays Envoy's 600 s.
ENVOY_FLAGS = ("--file-flush-interval-msec", "1000", "--drain-strategy", "immediate")


def node_id(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def bootstrap(
    namespace: str,
    name: str,
    xds: XdsTarget,
    admin_address: str = "127.0.0.1",
    admin_port: int = 19000,
    delta: bool = True,
    limits: Limits | None = None,
) -> dict[str, Any]:
    """Delta xDS by default: a change to one of thousands of clusters then sends
    that cluster alone (10 ms to ACK at 5,000 clusters, against 125 ms for the
    state of the world, as measured in ENVOY-NOTES). `limits`: the heap and
    connection limits of the overload manager (deploy/overload.py; None: the defaults)."""
    xds_cluster: dict[str, Any] = {
        "name": "lychgate_xds",
        "type": "STATIC" if _is_ip(xds.host) else "STRICT_DNS",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {
                    "connection_keepalive": {"interval": "30s", "timeout": "5s"}}},
            }
        },
        "load_assignment": {
            "cluster_name": "lychgate_xds",
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                "socket_address": {"address": xds.host, "port_value": xds.port}}}}]}],
        },
    }
    if xds.ca_file is not None:
        tls: dict[str, Any] = {
            "validation_context": {"trusted_ca": {"filename": str(xds.ca_file)}},
        }
        if xds.cert_file and xds.key_file:
            tls["tls_certificates"] = [{
                "certificate_chain": {"filename": str(xds.cert_file)},
                "private_key": {"filename": str(xds.key_file)},
            }]
        # Verify the server's name too, not only that ca.crt signed its certificate.
        san_type = "IP_ADDRESS" if _is_ip(xds.host) else "DNS"
        tls["validation_context"]["match_typed_subject_alt_names"] = [
            {"san_type": san_type, "matcher": {"exact": xds.host}}
        ]
        xds_cluster["transport_socket"] = {
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "common_tls_context": tls,
                **({} if _is_ip(xds.host) else {"sni": xds.host}),
            },
        }
    ads = {"ads": {}, "resource_api_version": "V3"}
    # Envoy takes a local cluster only from the bootstrap; its members come over EDS.
    local_cluster = {"name": LOCAL_CLUSTER, "type": "EDS", "connect_timeout": "1s",
                     "eds_cluster_config": {"eds_config": ads}}
    return {
        "node": {
            "id": node_id(namespace, name),
            "cluster": f"{namespace}.{name}",
            "metadata": {"gateway": {"namespace": namespace, "name": name}},
        },
        "admin": {"address": {"socket_address": {"address": admin_address, "port_value": admin_port}}},
        # Waypoints hand tunnelled traffic to internal listeners (xds/translator/waypoint.py).
        "bootstrap_extensions": [{
            "name": "envoy.bootstrap.internal_listener",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener"},
        }],
        "dynamic_resources": {
            "ads_config": {
                "api_type": "DELTA_GRPC" if delta else "GRPC",
                "transport_api_version": "V3",
                # Reconnect within 2 s of a control plane coming back (Envoy's default backoff
                # grows to 30 s: after a restart the proxy took ~6 s to resync).
                "grpc_services": [{"envoy_grpc": {"cluster_name": "lychgate_xds", "retry_policy": {
                    "retry_back_off": {"base_interval": "0.25s", "max_interval": "2s"}}}}],
                "set_node_on_first_message_only": True,
            },
            "lds_config": ads,
            "cds_config": ads,
        },
        "cluster_manager": {"local_cluster_name": LOCAL_CLUSTER},
        "static_resources": {"clusters": [xds_cluster, local_cluster]},
        "overload_manager": overload_manager(limits or overload_limits(None)),
    }


def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


SOCKET_INTERFACE = "envoy.extensions.network.socket_interface.default_socket_interface"


def with_parameters(boot: dict[str, Any], settings: EnvoyBootstrap, io_uring: bool = True) -> None:
    """GatewayParameters `envoyContainer.bootstrap` settings that live in the bootstrap;
    `io_uring` False: the kernel refuses io_uring, so it is left out."""
    if settings.io_uring is not None and settings.io_uring.enabled and io_uring:
        use_io_uring(boot)
    if settings.dns_resolver is not None and settings.dns_resolver.udp_max_queries is not None:
        dns_resolver(boot, settings.dns_resolver.udp_max_queries)


def use_io_uring(boot: dict[str, Any]) -> None:
    """GatewayParameters `envoyContainer.bootstrap.ioUring.enabled`: Envoy's default socket
    interface with io_uring options, made the one every socket uses (kgateway renders the same)."""
    boot.setdefault("bootstrap_extensions", []).append({
        "name": SOCKET_INTERFACE,
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.network.socket_interface.v3.DefaultSocketInterface",
            "io_uring_options": {},
        },
    })
    boot["default_socket_interface"] = SOCKET_INTERFACE


def io_uring_available() -> bool:
    """Whether this kernel lets a process set up an io_uring (Linux 5.1+, not disabled by
    `kernel.io_uring_disabled` or a seccomp filter): asked by creating one and closing it."""
    import ctypes
    import os
    import platform

    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    fd = libc.syscall(425, 4, params)  # io_uring_setup: 425 on x86_64 and aarch64
    if fd < 0:
        return False
    os.close(fd)
    return True


def dns_resolver(boot: dict[str, Any], udp_max_queries: int) -> None:
    """GatewayParameters `envoyContainer.bootstrap.dnsResolver`: the c-ares resolver every cluster uses."""
    boot["typed_dns_resolver_config"] = {
        "name": "envoy.network.dns_resolver.cares",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig",
            "udp_max_queries": udp_max_queries,
        },
    }
