"""xDS over TLS (spec §5.1) with a CA made in the test and real Envoy proxies."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from tests.certs import CA
from tests.harness import EchoBackends, Lychgate, gateway_yaml, service_yaml

pytestmark = pytest.mark.e2e

ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: v1, port: 80}]}]
"""


async def _one_request(channel: grpc.aio.Channel) -> None:
    stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)

    async def requests():  # type: ignore[no-untyped-def]
        request = discovery_pb2.DiscoveryRequest(type_url="type.googleapis.com/envoy.config.cluster.v3.Cluster")
        request.node.id = "default/gw"  # answered only for a Gateway that exists
        yield request
        await asyncio.sleep(5)

    call = stub.StreamAggregatedResources(requests())
    await asyncio.wait_for(call.read(), 3)


def _refused(address: str, credentials: grpc.ChannelCredentials | None) -> bool:
    async def go() -> bool:
        channel = (grpc.aio.secure_channel(address, credentials) if credentials
                   else grpc.aio.insecure_channel(address))
        try:
            await _one_request(channel)
        except (grpc.aio.AioRpcError, TimeoutError):
            return True
        finally:
            await channel.close()
        return False

    return asyncio.run(go())


def _serve_one_route(lg: Lychgate, backends: EchoBackends) -> None:
    lg.write("svc.yaml", service_yaml("v1", 80, backends.start(pod="v1")))
    lg.write("gateway.yaml", gateway_yaml())
    lg.write("route.yaml", ROUTE)


def test_proxies_fetch_config_over_tls_and_plaintext_is_refused(
    lychgate: Lychgate, backends: EchoBackends, tmp_path: Path
) -> None:
    ca = CA()
    tls_dir = ca.write_tls_dir(tmp_path / "xds-tls", "lychgate", ["127.0.0.1", "lychgate.lychgate-system.svc"])
    _serve_one_route(lychgate, backends)
    lychgate.start("--xds-tls", "--xds-tls-dir", str(tls_dir))
    addr = lychgate.address()
    lychgate.wait_pod(addr, "v1")  # Envoy verified the server with ca.crt and got its config
    bootstrap = (lychgate.state / "proxies/default/gw/bootstrap.json").read_text()
    assert "ca.crt" in bootstrap and "UpstreamTlsContext" in bootstrap
    assert _refused(lychgate.xds, None)  # a plain-text client gets nothing
    trusted = grpc.ssl_channel_credentials(root_certificates=ca.pem)
    assert not _refused(lychgate.xds, trusted)
    other = grpc.ssl_channel_credentials(root_certificates=CA("someone else").pem)
    assert _refused(lychgate.xds, other)  # a server cert from an unknown CA is not trusted


def test_client_certificates_can_be_required(
    lychgate: Lychgate, backends: EchoBackends, tmp_path: Path
) -> None:
    ca = CA()
    tls_dir = ca.write_tls_dir(tmp_path / "xds-tls", "lychgate", ["127.0.0.1"])
    _serve_one_route(lychgate, backends)
    lychgate.start("--xds-tls", "--xds-tls-dir", str(tls_dir), "--xds-tls-require-client-cert")
    lychgate.wait_pod(lychgate.address(), "v1")  # the proxy showed its certificate
    no_cert = grpc.ssl_channel_credentials(root_certificates=ca.pem)
    assert _refused(lychgate.xds, no_cert)
    cert, key = ca.issue("proxy", ["proxy"])
    with_cert = grpc.ssl_channel_credentials(root_certificates=ca.pem, private_key=key, certificate_chain=cert)
    assert not _refused(lychgate.xds, with_cert)
