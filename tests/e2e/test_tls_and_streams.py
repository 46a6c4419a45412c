"""HTTPS, TLS passthrough, TCP, UDP and gRPC through a real Envoy.

Clients and backends are real: Python's ssl module speaks TLS with the SNI the
test chooses, the gRPC backend is a grpcio server, TCP and UDP backends are
echo servers on loopback that prefix each answer with their name.
"""

from __future__ import annotations

import base64
import json
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.certs import CA
from tests.harness import EchoBackends, Lychgate, service_yaml, wait_for

pytestmark = pytest.mark.e2e

HTTPS_PORT = 8443
TLS_PORT = 9443
TCP_PORT = 9000
UDP_PORT = 9053


def secret_yaml(name: str, cert: bytes, key: bytes, namespace: str = "default") -> str:
    return f"""\
apiVersion: v1
kind: Secret
metadata: {{name: {name}, namespace: {namespace}}}
type: kubernetes.io/tls
data:
  tls.crt: {base64.b64encode(cert).decode()}
  tls.key: {base64.b64encode(key).decode()}
"""


def https_get(address: str, sni: str, host: str, path: str, ca: CA, port: int = HTTPS_PORT,
              client_cert: Path | None = None) -> tuple[int, dict[str, Any]]:
    """One HTTP/1.1 request over TLS with SNI and Host chosen apart, as a client
    reusing a connection for another hostname would send it (with a client
    certificate: a directory holding tls.crt and tls.key)."""
    context = ssl.create_default_context(cadata=ca.pem.decode())
    context.check_hostname = False
    if client_cert is not None:
        context.load_cert_chain(client_cert / "tls.crt", client_cert / "tls.key")
    with socket.create_connection((address, port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=sni) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    try:
        return status, json.loads(body)
    except ValueError:
        return status, {}


class _Named(socketserver.ThreadingMixIn):
    daemon_threads = True
    allow_reuse_address = True
    name = ""


class TCPEcho(_Named, socketserver.TCPServer):
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            line = self.rfile.readline()
            self.wfile.write(self.server.name.encode() + b":" + line)  # type: ignore[attr-defined]


class UDPEcho(_Named, socketserver.UDPServer):
    class Handler(socketserver.DatagramRequestHandler):
        def handle(self) -> None:
            self.wfile.write(self.server.name.encode() + b":" + self.rfile.read())  # type: ignore[attr-defined]


class TLSEcho(TCPEcho):
    """A TLS server with its own certificate: passthrough means the client sees it."""

    def __init__(self, address: tuple[str, int], cert: Path, key: Path) -> None:
        super().__init__(address, TCPEcho.Handler)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        return self.context.wrap_socket(sock, server_side=True), addr


@pytest.fixture
def servers() -> Iterator[list[socketserver.BaseServer]]:
    started: list[socketserver.BaseServer] = []
    yield started
    for s in started:
        s.shutdown()
        s.server_close()


def _serve(servers: list[socketserver.BaseServer], server: _Named, name: str) -> int:
    server.name = name
    threading.Thread(target=server.serve_forever, daemon=True).start()  # type: ignore[attr-defined]
    servers.append(server)  # type: ignore[arg-type]
    return int(server.server_address[1])  # type: ignore[attr-defined]


def _tcp_roundtrip(address: str, port: int, message: bytes, sni: str | None = None, ca: CA | None = None) -> bytes:
    with socket.create_connection((address, port), timeout=5) as raw:
        conn: socket.socket = raw
        if sni is not None:
            context = ssl.create_default_context(cadata=ca.pem.decode()) if ca else ssl.create_default_context()
            conn = context.wrap_socket(raw, server_hostname=sni)
        conn.sendall(message + b"\n")
        return conn.recv(1024)


def _udp_roundtrip(address: str, port: int, message: bytes) -> bytes | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1)
        s.sendto(message, (address, port))
        try:
            return s.recv(1024)
        except TimeoutError:
            return None


GATEWAY = f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: lychgate
  listeners:
    - {{name: http, protocol: HTTP, port: 8080, allowedRoutes: {{namespaces: {{from: All}}}}}}
    - name: https
      protocol: HTTPS
      port: {HTTPS_PORT}
      tls: {{certificateRefs: [{{name: serving}}]}}
    - name: https-second
      protocol: HTTPS
      port: {HTTPS_PORT}
      hostname: second.example.org
      tls: {{certificateRefs: [{{name: serving}}]}}
    - name: tls
      protocol: TLS
      port: {TLS_PORT}
      hostname: "*.passthrough.test"
      tls: {{mode: Passthrough}}
    - {{name: tcp, protocol: TCP, port: {TCP_PORT}}}
    - {{name: udp, protocol: UDP, port: {UDP_PORT}}}
"""


def _without_https(gateway: str) -> str:
    """The Gateway without its HTTPS listeners (no certificate needed)."""
    blocks = gateway.split("    - ")
    return "    - ".join(b for b in blocks if "protocol: HTTPS" not in b)


def _route(kind: str, name: str, section: str, backend: str, port: int, hostnames: str = "") -> str:
    return f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: {kind}
metadata: {{name: {name}, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: {section}}}]{hostnames}
  rules:
    - backendRefs: [{{name: {backend}, port: {port}}}]
"""


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), None)


def test_https_listeners_share_a_port_by_sni_and_answer_421_for_misdirected_hosts(
    lychgate: Lychgate, backends: EchoBackends, tmp_path: Path
) -> None:
    ca = CA()
    cert, key = ca.issue("example.org", ["example.org", "second.example.org"])
    first, second = backends.start("first"), backends.start("second")
    lychgate.write("gw.yaml", GATEWAY + "---\n" + secret_yaml("serving", cert, key))
    lychgate.write("svc.yaml", service_yaml("first", 80, first) + "---\n" + service_yaml("second", 80, second))
    lychgate.write("routes.yaml", _route("HTTPRoute", "one", "https", "first", 80, "\n  hostnames: [example.org]")
                   + "---\n" + _route("HTTPRoute", "two", "https-second", "second", 80))
    lychgate.start()
    address = lychgate.address()

    wait_for(lambda: https_get(address, "example.org", "example.org", "/", ca)[1].get("pod") == "first", 20,
             "HTTPS through the catch-all listener")
    assert https_get(address, "second.example.org", "second.example.org", "/x", ca)[1]["pod"] == "second"
    # The connection was made for one listener; the Host belongs to another.
    assert https_get(address, "example.org", "second.example.org", "/", ca)[0] == 421
    assert https_get(address, "second.example.org", "example.org", "/", ca)[0] == 421
    # A host no route serves on the catch-all listener is a plain 404.
    assert https_get(address, "example.org", "unknown.example.org", "/", ca)[0] == 404

    status = lychgate.status("Gateway", "gw")
    https = next(l for l in status["listeners"] if l["name"] == "https")
    assert https["attachedRoutes"] == 1
    assert _condition(https, "Programmed")["status"] == "True"  # type: ignore[index]


def test_a_missing_certificate_is_reported_and_leaves_other_listeners_serving(
    lychgate: Lychgate, backends: EchoBackends
) -> None:
    first = backends.start("first")
    lychgate.write("gw.yaml", GATEWAY)  # the Secret "serving" does not exist
    lychgate.write("svc.yaml", service_yaml("first", 80, first))
    lychgate.write("routes.yaml", _route("HTTPRoute", "plain", "http", "first", 80))
    lychgate.start()
    address = lychgate.address()
    lychgate.wait_pod(address, "first")

    def https_status() -> dict[str, Any] | None:
        listeners = lychgate.status("Gateway", "gw").get("listeners", [])
        return next((l for l in listeners if l["name"] == "https"), None)

    listener = wait_for(https_status, 10, "listener status")
    refs = _condition(listener, "ResolvedRefs")
    assert refs is not None and refs["status"] == "False" and refs["reason"] == "InvalidCertificateRef"
    assert "default/serving" in refs["message"] and "not found" in refs["message"]
    assert _condition(listener, "Programmed")["status"] == "False"  # type: ignore[index]


def test_tls_passthrough_tcp_and_udp_routes(
    lychgate: Lychgate, servers: list[socketserver.BaseServer], tmp_path: Path
) -> None:
    ca = CA()
    backend_dir = ca.write_tls_dir(tmp_path / "backend", "app.passthrough.test", ["app.passthrough.test"])
    tls_port = _serve(servers, TLSEcho(("127.0.0.1", 0), backend_dir / "tls.crt", backend_dir / "tls.key"), "tls-app")
    tcp_port = _serve(servers, TCPEcho(("127.0.0.1", 0), TCPEcho.Handler), "tcp-app")
    udp_port = _serve(servers, UDPEcho(("127.0.0.1", 0), UDPEcho.Handler), "udp-app")
    lychgate.write("gw.yaml", _without_https(GATEWAY))
    lychgate.write("svc.yaml", "---\n".join([
        service_yaml("tls-app", 443, tls_port), service_yaml("tcp-app", 7000, tcp_port),
        service_yaml("udp-app", 53, udp_port).replace("port: 53\n", "port: 53\n      protocol: UDP\n"),
    ]))
    lychgate.write("routes.yaml", "---\n".join([
        _route("TLSRoute", "tls", "tls", "tls-app", 443, "\n  hostnames: [app.passthrough.test]"),
        _route("TCPRoute", "tcp", "tcp", "tcp-app", 7000),
        _route("UDPRoute", "udp", "udp", "udp-app", 53),
    ]))
    lychgate.start()
    address = lychgate.address()

    def tcp() -> bytes | None:
        try:
            return _tcp_roundtrip(address, TCP_PORT, b"hello")
        except OSError:
            return None

    assert wait_for(tcp, 20, "TCPRoute to carry traffic") == b"tcp-app:hello\n"
    # Passthrough: the client's TLS session ends at the backend, whose certificate it verifies.
    assert _tcp_roundtrip(address, TLS_PORT, b"hi", sni="app.passthrough.test", ca=ca) == b"tls-app:hi\n"
    assert wait_for(lambda: _udp_roundtrip(address, UDP_PORT, b"ping"), 10, "UDPRoute") == b"udp-app:ping"

    status = lychgate.status("Gateway", "gw")
    counts = {l["name"]: l["attachedRoutes"] for l in status["listeners"]}
    assert counts["tls"] == 1 and counts["tcp"] == 1 and counts["udp"] == 1
    tls_route = lychgate.status("TLSRoute", "tls")
    assert _condition(tls_route["parents"][0], "Accepted")["status"] == "True"  # type: ignore[index]


def test_grpc_route_matches_service_and_method(lychgate: Lychgate) -> None:
    def serve(name: str) -> tuple[grpc.Server, int]:
        """A gRPC server answering every method with its name and the method called."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))

        class Any_(grpc.GenericRpcHandler):
            def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
                answer = f"{name}:{details.method}".encode()  # type: ignore[attr-defined]
                return grpc.unary_unary_rpc_method_handler(lambda request, context: answer)

        server.add_generic_rpc_handlers((Any_(),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        return server, port

    echo, echo_port = serve("echo")
    other, other_port = serve("other")
    try:
        lychgate.write("gw.yaml", _without_https(GATEWAY))
        lychgate.write("svc.yaml", service_yaml("echo", 9000, echo_port) + "---\n" + service_yaml("other", 9000, other_port))
        lychgate.write("route.yaml", """\
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [grpc.example.com]
  rules:
    - matches: [{method: {service: demo.Echo, method: Two}}]
      backendRefs: [{name: other, port: 9000}]
    - matches: [{method: {service: demo.Echo}}]
      backendRefs: [{name: echo, port: 9000}]
""")
        lychgate.start()
        address = lychgate.address()
        with grpc.insecure_channel(f"{address}:8080", options=[("grpc.default_authority", "grpc.example.com")]) as ch:
            def call(method: str) -> str | None:
                try:
                    return ch.unary_unary(method)(b"", timeout=2).decode()
                except grpc.RpcError:
                    return None

            assert wait_for(lambda: call("/demo.Echo/One"), 20, "GRPCRoute") == "echo:/demo.Echo/One"
            assert call("/demo.Echo/Two") == "other:/demo.Echo/Two"
            assert call("/demo.Other/One") is None  # no rule matches: unimplemented (404)
    finally:
        echo.stop(None)
        other.stop(None)


def test_client_certificates_are_checked_per_port(lychgate: Lychgate, backends: EchoBackends, tmp_path: Path) -> None:
    """Gateway spec.tls.frontend: the default requires a certificate from the clients'
    CA; a perPort entry lets clients without one in (AllowInsecureFallback)."""
    ca, clients = CA(), CA("client CA")
    cert, key = ca.issue("example.org", ["example.org"])
    good = clients.write_tls_dir(tmp_path / "good", "client", ["client.example.org"])
    stranger = CA("someone else").write_tls_dir(tmp_path / "bad", "client", ["client.example.org"])
    first = backends.start("first")
    pem = "\n".join("    " + line for line in clients.pem.decode().splitlines())
    lychgate.write("gw.yaml", f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: lychgate
  tls:
    frontend:
      default: {{validation: {{caCertificateRefs: [{{kind: ConfigMap, name: clients}}]}}}}
      perPort:
        - port: 9444
          tls: {{validation: {{caCertificateRefs: [{{kind: ConfigMap, name: clients}}], mode: AllowInsecureFallback}}}}
  listeners:
    - {{name: strict, protocol: HTTPS, port: {HTTPS_PORT}, tls: {{certificateRefs: [{{name: serving}}]}}}}
    - {{name: lenient, protocol: HTTPS, port: 9444, tls: {{certificateRefs: [{{name: serving}}]}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: clients, namespace: default}}
data:
  ca.crt: |
{pem}
---
""" + secret_yaml("serving", cert, key))
    lychgate.write("svc.yaml", service_yaml("first", 80, first))
    lychgate.write("route.yaml", _route("HTTPRoute", "r", "strict", "first", 80) + "---\n"
                   + _route("HTTPRoute", "r2", "lenient", "first", 80))
    lychgate.start()
    address = lychgate.address()

    def answer(port: int, cert: Path | None) -> int | str:
        try:
            return https_get(address, "example.org", "example.org", "/", ca, port, cert)[0]
        except (ssl.SSLError, OSError) as err:
            return type(err).__name__

    wait_for(lambda: answer(HTTPS_PORT, good) == 200, 20, "a client with a trusted certificate")
    assert answer(HTTPS_PORT, None) != 200  # no certificate: refused in the handshake
    assert answer(HTTPS_PORT, stranger) != 200  # a certificate from another CA: refused
    assert answer(9444, None) == 200  # fallback: let in without one
    assert answer(9444, good) == 200


def test_a_missing_client_ca_takes_only_its_listener_down(lychgate: Lychgate, backends: EchoBackends) -> None:
    ca = CA()
    cert, key = ca.issue("example.org", ["example.org"])
    first = backends.start("first")
    lychgate.write("gw.yaml", """\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: lychgate
  tls: {frontend: {default: {validation: {caCertificateRefs: [{kind: ConfigMap, name: nowhere}]}}}}
  listeners:
    - {name: http, protocol: HTTP, port: 8080}
    - {name: https, protocol: HTTPS, port: 8443, tls: {certificateRefs: [{name: serving}]}}
---
""" + secret_yaml("serving", cert, key))
    lychgate.write("svc.yaml", service_yaml("first", 80, first))
    lychgate.write("route.yaml", _route("HTTPRoute", "r", "http", "first", 80))
    lychgate.start()
    address = lychgate.address()
    lychgate.wait_pod(address, "first")  # the HTTP listener is untouched
    https = next(l for l in lychgate.status("Gateway", "gw")["listeners"] if l["name"] == "https")
    conds = {c["type"]: c for c in https["conditions"]}
    assert (conds["ResolvedRefs"]["status"], conds["ResolvedRefs"]["reason"]) == ("False", "InvalidCACertificateRef")
    assert (conds["Accepted"]["status"], conds["Accepted"]["reason"]) == ("False", "NoValidCACertificate")
    assert "default/nowhere" in conds["Accepted"]["message"]
