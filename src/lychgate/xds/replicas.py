"""The local cluster: the proxy replicas of one Gateway, as Envoy's own cluster.

Every proxy's bootstrap names LOCAL_CLUSTER as its cluster manager's local
cluster (deploy/bootstrap.py). Envoy insists that cluster is a static one, so it
is an EDS cluster of the bootstrap whose endpoints come over ADS: one endpoint
per proxy of the Gateway connected to this control plane, sent to that
Gateway's proxies only (xds/cache.py puts it in the Gateway's snapshot). Envoy
never connects to these endpoints; it counts them: a local rate limit with
`local_cluster_rate_limit` (rateLimit.local.shareAcrossGateway) gives each proxy
1/N of the bucket, and the whole bucket while the cluster is empty.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import unquote

from envoy.config.endpoint.v3 import endpoint_pb2

LOCAL_CLUSTER = "lychgate-local-replicas"


def _address(peer: str) -> tuple[str, int]:
    """The IP and port of a gRPC peer ("ipv4:10.0.0.7:41234", "ipv6:[::1]:5"); ("0.0.0.0", 0) otherwise."""
    kind, _, rest = unquote(peer).partition(":")
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    if kind not in ("ipv4", "ipv6") or not port.isdigit():
        return "0.0.0.0", 0
    try:
        return str(ipaddress.ip_address(host)), int(port)
    except ValueError:
        return "0.0.0.0", 0


def replica_assignment(peers: Iterable[str]) -> endpoint_pb2.ClusterLoadAssignment:
    """The local cluster's endpoints: one per connected proxy, at the address it
    connected from. Addresses are made distinct (Envoy keys hosts by address, so
    two equal ones would count once): a clash, or a peer with no IP address,
    takes the next free port of its address."""
    out = endpoint_pb2.ClusterLoadAssignment(cluster_name=LOCAL_CLUSTER)
    taken: set[tuple[str, int]] = set()
    for host, port in sorted(_address(p) for p in peers):
        while port == 0 or (host, port) in taken:
            port = port % 65535 + 1
        taken.add((host, port))
    if taken:
        group = out.endpoints.add()
        for host, port in sorted(taken):
            address = group.lb_endpoints.add().endpoint.address.socket_address
            address.address, address.port_value = host, port
    return out
