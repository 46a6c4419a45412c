"""In Kubernetes mode both xDS ports, main (9977) and agent gateway (9978), serve
TLS from the lychgate-xds-cert layout and refuse plain-text clients (spec §5.1).
Runs against the in-process API server stand-in (tests/kubefake)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import grpc
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from tests.certs import CA
from tests.kube.helpers import Controller

CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _handshake(port: int, credentials: grpc.ChannelCredentials | None) -> bool:
    """Does an ADS stream open? (TLS handshake and HTTP/2 both done.)"""
    target = f"127.0.0.1:{port}"
    channel = grpc.aio.secure_channel(target, credentials) if credentials else grpc.aio.insecure_channel(target)
    try:
        await asyncio.wait_for(channel.channel_ready(), 3)
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
        call = stub.StreamAggregatedResources(iter([discovery_pb2.DiscoveryRequest(type_url=CDS)]))
        call.cancel()
        return True
    except (TimeoutError, grpc.aio.AioRpcError):
        return False
    finally:
        await channel.close()


async def test_both_xds_ports_serve_tls_only(controller: Controller, tmp_path: Path) -> None:
    ca = CA()
    tls_dir = ca.write_tls_dir(tmp_path / "xds", "lychgate", ["127.0.0.1", "lychgate.lychgate-system.svc"])
    agent_port = _free_port()
    async with controller(xds_tls_enabled=True, xds_tls_dir=tls_dir,
                          agentgateway_xds_address=f"127.0.0.1:{agent_port}") as wiring:
        trusted = grpc.ssl_channel_credentials(root_certificates=ca.pem)
        for port in (wiring.xds_port, agent_port):
            assert await _handshake(port, trusted), f"TLS client refused on {port}"
            assert not await _handshake(port, None), f"plain-text client accepted on {port}"
