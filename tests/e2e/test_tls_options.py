"""TLS options (a listener's `tls.options`, a BackendTLSPolicy's `options`) through a
real Envoy, against Python ssl clients and servers limited to what each case needs.

Modelled on kgateway's backendtls scenarios (a TLS 1.2-only backend, a backend
offering one curve) and its listener TLS options."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from lychgate.echo import echo_app
from tests.certs import CA
from tests.e2e.test_tls_and_streams import https_get, secret_yaml
from tests.harness import EchoBackends, Lychgate, free_port, gateway_yaml, service_yaml, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[Callable[[str, Callable[[ssl.SSLContext], None]], int]]:
    """Start echo servers answering over TLS as backend.example.com, each context
    narrowed by the given function; the servers stop with the test."""
    ca = CA()
    certs = ca.write_tls_dir(tmp_path / "backend", "backend.example.com", ["backend.example.com"])
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runners: list[web.AppRunner] = []

    def start(pod: str, narrow: Callable[[ssl.SSLContext], None]) -> int:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certs / "tls.crt", certs / "tls.key")
        narrow(context)
        port = free_port()

        async def go() -> None:
            runner = web.AppRunner(echo_app(pod))
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
            runners.append(runner)

        asyncio.run_coroutine_threadsafe(go(), loop).result(10)
        return port

    start.ca = ca  # type: ignore[attr-defined]
    yield start  # type: ignore[misc]

    async def stop() -> None:
        for runner in runners:
            await runner.cleanup()

    asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def _ca_configmap(ca: CA) -> str:
    pem = "\n".join("    " + line for line in ca.pem.decode().splitlines())
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: backend-ca, namespace: default}}\ndata:\n  ca.crt: |\n{pem}\n"


def _routed(service: str, port: int, backend_port: int, options: dict[str, str]) -> str:
    """A Service on a local backend, a route to it for host <service>.example.com and
    a BackendTLSPolicy for it with the given options."""
    opts = "".join(f"\n    {k}: {v!r}" for k, v in options.items())
    return service_yaml(service, port, backend_port) + f"""\
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {service}, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{service}.example.com]
  rules: [{{backendRefs: [{{name: {service}, port: {port}}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: {service}, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: {service}}}]
  validation:
    caCertificateRefs: [{{group: "", kind: ConfigMap, name: backend-ca}}]
    hostname: backend.example.com
  options:{opts or " {}"}
"""


def _accepted(lg: Lychgate, policy: str) -> dict[str, Any]:
    ancestors = lg.status("BackendTLSPolicy", policy).get("ancestors") or [{}]
    return {c["type"]: c for c in ancestors[0].get("conditions", [])}.get("Accepted", {})


def _tls12_only(c: ssl.SSLContext) -> None:
    c.maximum_version = ssl.TLSVersion.TLSv1_2


def _p256_only(c: ssl.SSLContext) -> None:
    c.set_ecdh_curve("prime256v1")


def test_backend_tls_options_bound_versions_and_curves(lychgate: Lychgate, tls_server: Any) -> None:
    tls12 = tls_server("tls12-backend", _tls12_only)
    p256 = tls_server("p256-backend", _p256_only)
    lychgate.write("gw.yaml", gateway_yaml())
    lychgate.write("ca.yaml", _ca_configmap(tls_server.ca))
    # kgateway's own keys and ours, side by side; another vendor's key is left alone.
    lychgate.write("a.yaml", _routed("tls13-min", 443, tls12, {"kgateway.dev/min-tls-version": "1.3",
                                                              "example.com/ignored": "x"}))
    lychgate.write("b.yaml", _routed("tls12-ok", 443, tls12, {"gateway.lychgate.dev/min-tls-version": "1.2",
                                                             "kgateway.dev/max-tls-version": "1.2"}))
    lychgate.write("c.yaml", _routed("p384", 443, p256, {"kgateway.dev/ecdh-curves": "P-384"}))
    lychgate.write("d.yaml", _routed("p256", 443, p256, {"kgateway.dev/ecdh-curves": "P-384,P-256"}))
    lychgate.write("e.yaml", _routed("badcurve", 443, p256, {"kgateway.dev/ecdh-curves": "P-999"}))
    lychgate.start()
    address = lychgate.address()
    lychgate.wait_pod(address, "tls12-backend", host="tls12-ok.example.com", timeout=20)
    lychgate.wait_pod(address, "p256-backend", host="p256.example.com", timeout=10)
    # The same backends, refused by what the policies ask for: no fallback to weaker TLS.
    assert lychgate.pod(address, host="tls13-min.example.com") == 503
    assert lychgate.pod(address, host="p384.example.com") == 503
    for name in ("tls13-min", "tls12-ok", "p384", "p256"):
        wait_for(lambda n=name: _accepted(lychgate, n).get("status") == "True", 10, f"{name} to be Accepted")

    # A curve Envoy does not know: the policy is Invalid, naming the option, and the
    # Service's traffic fails closed (a 503, never plaintext).
    bad = wait_for(lambda: _accepted(lychgate, "badcurve") or None, 10, "badcurve's status")
    assert (bad["status"], bad["reason"]) == ("False", "Invalid")
    assert "kgateway.dev/ecdh-curves" in bad["message"] and "P-999" in bad["message"]
    assert lychgate.pod(address, host="badcurve.example.com") == 503


def _handshake(address: str, port: int, ca: CA, version: ssl.TLSVersion | None) -> str:
    """The TLS version a client gets (capped at `version`), or the error it gets."""
    context = ssl.create_default_context(cadata=ca.pem.decode())
    context.check_hostname = False
    if version is not None:
        context.maximum_version = version
    try:
        with socket.create_connection((address, port), timeout=5) as raw, \
                context.wrap_socket(raw, server_hostname="www.example.com") as conn:
            return str(conn.version())
    except ssl.SSLError as e:
        return f"refused: {e.reason}"


def test_listener_tls_options(lychgate: Lychgate, tmp_path: Path) -> None:
    ca = CA()
    cert, key = ca.issue("www.example.com", ["www.example.com"])
    backends = EchoBackends()
    try:
        port = backends.start("web")
        listeners = """
    - name: https
      protocol: HTTPS
      port: 8443
      tls:
        certificateRefs: [{name: cert}]
        options: {kgateway.dev/min-tls-version: "1.3", kgateway.dev/alpn-protocols: "http/1.1"}
    - name: bad
      protocol: HTTPS
      port: 8444
      tls:
        certificateRefs: [{name: cert}]
        options: {gateway.lychgate.dev/min-tls-versions: "1.3"}"""
        lychgate.write("gw.yaml", gateway_yaml(extra_listeners=listeners))
        lychgate.write("cert.yaml", secret_yaml("cert", cert, key))
        lychgate.write("svc.yaml", service_yaml("web", 80, port))
        lychgate.write("route.yaml", """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
""")
        lychgate.start()
        address = lychgate.address()
        wait_for(lambda: _handshake(address, 8443, ca, None) == "TLSv1.3", 20, "the HTTPS listener to serve TLS 1.3")
        assert _handshake(address, 8443, ca, ssl.TLSVersion.TLSv1_2).startswith("refused")
        status, body = https_get(address, "www.example.com", "www.example.com", "/", ca)
        assert (status, body.get("pod")) == (200, "web")

        # The misspelled option: that listener is neither Accepted nor Programmed, and says which key.
        listeners_status = {s["name"]: {c["type"]: c for c in s["conditions"]}
                            for s in lychgate.status("Gateway", "gw")["listeners"]}
        bad = listeners_status["bad"]
        assert bad["Accepted"]["status"] == "False" and bad["Programmed"]["status"] == "False"
        assert "gateway.lychgate.dev/min-tls-versions" in bad["Accepted"]["message"]
        assert listeners_status["https"]["Programmed"]["status"] == "True"
        with pytest.raises(OSError):
            socket.create_connection((address, 8444), timeout=2).close()
    finally:
        backends.close()
