"""BackendTLSPolicy through a real Envoy to a real TLS backend.

The backend is an aiohttp echo server serving TLS with a certificate made in the
test; the policy's CA is a ConfigMap, as in a cluster.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from lychgate.echo import echo_app
from tests.certs import CA
from tests.harness import Lychgate, free_port, gateway_yaml, service_yaml, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def tls_backend(tmp_path: Path) -> Iterator[tuple[CA, int]]:
    """An echo server answering over TLS as backend.example.com."""
    ca = CA()
    certs = ca.write_tls_dir(tmp_path / "backend", "backend.example.com", ["backend.example.com"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs / "tls.crt", certs / "tls.key")
    port = free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(echo_app("tls-backend"))
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield ca, port
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def _policy(name: str, hostname: str, ca_ref: str) -> str:
    return f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: secure}}]
  validation:
    caCertificateRefs: [{{group: "", kind: ConfigMap, name: {ca_ref}}}]
    hostname: {hostname}
"""


def _ca_configmap(ca: CA) -> str:
    pem = "\n".join("    " + line for line in ca.pem.decode().splitlines())
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: backend-ca, namespace: default}}\ndata:\n  ca.crt: |\n{pem}\n"


ROUTE = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: secure, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: secure, port: 443}]}]
"""


def _conditions(lg: Lychgate) -> dict[str, dict[str, Any]]:
    ancestors = lg.status("BackendTLSPolicy", "tls").get("ancestors") or [{}]
    return {c["type"]: c for c in ancestors[0].get("conditions", [])}


def test_the_gateway_speaks_verified_tls_to_the_backend(lychgate: Lychgate, tls_backend: tuple[CA, int]) -> None:
    ca, port = tls_backend
    lychgate.write("gw.yaml", gateway_yaml())
    lychgate.write("svc.yaml", service_yaml("secure", 443, port))
    lychgate.write("route.yaml", ROUTE)
    lychgate.write("ca.yaml", _ca_configmap(ca))
    lychgate.write("policy.yaml", _policy("tls", "backend.example.com", "backend-ca"))
    lychgate.start()
    address = lychgate.address()
    lychgate.wait_pod(address, "tls-backend", timeout=20)
    assert _conditions(lychgate)["Accepted"]["status"] == "True"

    # A name the certificate does not carry: the handshake is refused, no plaintext fallback.
    lychgate.write("policy.yaml", _policy("tls", "other.example.com", "backend-ca"))
    wait_for(lambda: lychgate.pod(address) == 503, 15, "a certificate for another name to be refused")

    # A CA that does not exist: the policy says why and the Service gets no traffic.
    lychgate.write("policy.yaml", _policy("tls", "backend.example.com", "missing-ca"))
    wait_for(lambda: _conditions(lychgate).get("ResolvedRefs", {}).get("reason") == "InvalidCACertificateRef",
             10, "the policy to report its missing CA")
    assert "missing-ca" in _conditions(lychgate)["ResolvedRefs"]["message"]
    wait_for(lambda: lychgate.pod(address) == 503, 10, "traffic to stop rather than go out in plaintext")


def test_without_a_policy_the_tls_backend_is_spoken_to_in_plaintext(
    lychgate: Lychgate, tls_backend: tuple[CA, int]
) -> None:
    """The contrast that shows the policy is what turns TLS on."""
    _, port = tls_backend
    lychgate.write("gw.yaml", gateway_yaml())
    lychgate.write("svc.yaml", service_yaml("secure", 443, port))
    lychgate.write("route.yaml", ROUTE)
    lychgate.start()
    address = lychgate.address()
    # The TLS server hangs up on plaintext: Envoy answers 503 (reset before headers).
    wait_for(lambda: lychgate.pod(address) == 503, 15, "plaintext to a TLS port to fail")


def _system_policy(value: str) -> str:
    return f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: tls, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: secure}}]
  validation:
    wellKnownCACertificates: {value}
    hostname: backend.example.com
"""


def test_well_known_system_cas_verify_against_the_system_store(
    lychgate: Lychgate, tls_backend: tuple[CA, int]
) -> None:
    """`wellKnownCACertificates: System` (as kgateway's manifests write it) is Accepted and
    verifies: the backend's private CA is not in the system store, so the handshake fails,
    while the same backend is reached once its CA is named."""
    ca, port = tls_backend
    lychgate.write("gw.yaml", gateway_yaml())
    lychgate.write("svc.yaml", service_yaml("secure", 443, port))
    lychgate.write("route.yaml", ROUTE)
    lychgate.write("ca.yaml", _ca_configmap(ca))
    lychgate.write("policy.yaml", _system_policy("System"))
    lychgate.start()
    address = lychgate.address()
    wait_for(lambda: _conditions(lychgate).get("Accepted", {}).get("status") == "True", 15, "the policy to be Accepted")
    wait_for(lambda: lychgate.pod(address) == 503, 15, "a certificate from a private CA to be refused")
    lychgate.write("policy.yaml", _policy("tls", "backend.example.com", "backend-ca"))
    lychgate.wait_pod(address, "tls-backend", timeout=20)

    # A set of CAs lychgate does not know: not Accepted (Invalid), no plaintext fallback.
    lychgate.write("policy.yaml", _system_policy("Mozilla"))
    wait_for(lambda: _conditions(lychgate).get("Accepted", {}).get("reason") == "Invalid", 10,
             "an unknown wellKnownCACertificates to make the policy Invalid")
    assert "wellKnownCACertificates" in _conditions(lychgate)["Accepted"]["message"]
    wait_for(lambda: lychgate.pod(address) == 503, 10, "traffic to stop rather than go out in plaintext")


def _bcp_tls(tls: str) -> str:
    return f"""\
apiVersion: gateway.lychgate.dev/v1alpha1
kind: BackendConfigPolicy
metadata: {{name: bcp-tls, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: secure}}]
  tls: {tls}
"""


def test_backend_config_tls_with_only_sni_verifies_with_the_system_cas(
    lychgate: Lychgate, tls_backend: tuple[CA, int]
) -> None:
    """BackendConfigPolicy `tls: {sni: ...}` and no trust source (kgateway: the system CAs
    verify, for the sni): the backend's private CA is not in the proxy's system bundle, so
    the handshake is refused (503) rather than skipped; the same backend is reached once
    verification is switched off, so it is the verification that refused it."""
    _, port = tls_backend
    lychgate.write("gw.yaml", gateway_yaml())
    lychgate.write("svc.yaml", service_yaml("secure", 443, port))
    lychgate.write("route.yaml", ROUTE)
    lychgate.write("policy.yaml", _bcp_tls("{sni: backend.example.com, insecureSkipVerify: false}"))
    lychgate.start()
    address = lychgate.address()

    def accepted() -> bool:
        ancestors = lychgate.status("BackendConfigPolicy", "bcp-tls").get("ancestors") or [{}]
        return any(c["type"] == "Accepted" and c["status"] == "True" for c in ancestors[0].get("conditions", []))

    wait_for(accepted, 15, "the policy to be Accepted")
    wait_for(lambda: lychgate.pod(address) == 503, 15, "a certificate from a private CA to be refused")
    lychgate.write("policy.yaml", _bcp_tls("{sni: backend.example.com, insecureSkipVerify: true}"))
    lychgate.wait_pod(address, "tls-backend", timeout=20)


@pytest.fixture
def mtls_backend(tmp_path: Path) -> Iterator[tuple[CA, Path, int]]:
    """An echo server answering over TLS as backend.example.com (a private CA) that
    refuses any handshake without a client certificate from the client CA; the client
    certificate's files are in the returned directory."""
    backend_ca, client_ca = CA("backend CA"), CA("client CA")
    certs = backend_ca.write_tls_dir(tmp_path / "backend", "backend.example.com", ["backend.example.com"])
    client = client_ca.write_tls_dir(tmp_path / "client", "gateway", ["gateway.example.com"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs / "tls.crt", certs / "tls.key")
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=client_ca.pem.decode())
    port = free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(echo_app("mtls-backend"))
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield backend_ca, client, port
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def _tls_secret(name: str, client: Path, ca: CA | None) -> str:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()
    ca_line = f"\n  ca.crt: {b64(ca.pem)}" if ca is not None else ""
    return (f"apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: default}}\ntype: kubernetes.io/tls\n"
            f"data:\n  tls.crt: {b64((client / 'tls.crt').read_bytes())}\n"
            f"  tls.key: {b64((client / 'tls.key').read_bytes())}{ca_line}\n")


def test_a_client_certificate_alone_is_no_licence_to_skip_verification(
    lychgate: Lychgate, mtls_backend: tuple[CA, Path, int]
) -> None:
    """BackendConfigPolicy `tls.secretRef` to a Secret with only tls.crt/tls.key, and `files`
    without rootCA: the backend's certificate is still verified, with the system CAs
    (kgateway checks nothing then). The backend's private CA is not in the system bundle,
    so it is not reached (503); it is once its CA is given as ca.crt / rootCA. The backend
    requires a client certificate, so reaching it proves the certificate is presented."""
    backend_ca, client, port = mtls_backend
    (client / "backend-ca.crt").write_bytes(backend_ca.pem)
    lychgate.write("gw.yaml", gateway_yaml())
    lychgate.write("svc.yaml", service_yaml("secure", 443, port))
    lychgate.write("route.yaml", ROUTE)
    lychgate.write("secret.yaml", _tls_secret("client-only", client, None))
    lychgate.write("policy.yaml", _bcp_tls("{secretRef: {name: client-only}, sni: backend.example.com}"))
    lychgate.start()
    address = lychgate.address()

    def accepted() -> bool:
        ancestors = lychgate.status("BackendConfigPolicy", "bcp-tls").get("ancestors") or [{}]
        return any(c["type"] == "Accepted" and c["status"] == "True" for c in ancestors[0].get("conditions", []))

    wait_for(accepted, 15, "the policy to be Accepted")
    wait_for(lambda: lychgate.pod(address) == 503, 15, "a certificate from a private CA to be refused")
    lychgate.write("secret.yaml", _tls_secret("client-only", client, backend_ca))
    lychgate.wait_pod(address, "mtls-backend", timeout=20)

    files = f"{{tlsCertificate: {client / 'tls.crt'}, tlsKey: {client / 'tls.key'}}}"
    lychgate.write("policy.yaml", _bcp_tls(f"{{files: {files}, sni: backend.example.com}}"))
    wait_for(lambda: lychgate.pod(address) == 503, 15, "files without rootCA to verify with the system CAs")
    with_ca = f"{{tlsCertificate: {client / 'tls.crt'}, tlsKey: {client / 'tls.key'}, rootCA: {client / 'backend-ca.crt'}}}"
    lychgate.write("policy.yaml", _bcp_tls(f"{{files: {with_ca}, sni: backend.example.com}}"))
    lychgate.wait_pod(address, "mtls-backend", timeout=20)
