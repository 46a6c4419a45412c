"""ListenerPolicy listener settings end to end, each seen in a request through real Envoy.

Every test checks lychgate's default first, then writes the Gateway's
ListenerPolicy (one object, replaced by each test) and sees the setting change
what a client or the backend gets: the health path answered by Envoy, the
client address Envoy trusts (in the access log), PROXY protocol v1 and v2
clients, header limits and changes, request ids, HTTP/1.0, timeouts, HTTP/2
settings and upgrades, Host and path normalisation, the Server name,
100-continue, the connection lifetime and the TLS handshake deadline.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import struct
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import httpx
import pytest

from tests.certs import CA
from tests.harness import free_port, service_yaml, wait_for
from tests.policies.conftest import Stack
from tests.policies.servers import body_of

pytestmark = pytest.mark.e2e

HOST = "settings.example.com"
PORT = 8080


def listener_policy(stack: Stack, http: str = "", listener: str = "") -> None:
    """The Gateway's ListenerPolicy: `listener` settings (PROXY protocol, ...) and `httpSettings`."""
    default = textwrap.dedent(listener).strip("\n")
    if http:
        default += "\nhttpSettings:\n" + textwrap.indent(textwrap.dedent(http).strip("\n"), "  ")
    stack.write("listener-policy.yaml", """
        apiVersion: gateway.lychgate.dev/v1alpha1
        kind: ListenerPolicy
        metadata: {name: settings}
        spec:
          targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]
          default:\n""" + textwrap.indent(default.strip("\n"), " " * 12))


@pytest.fixture(scope="module", autouse=True)
def route(stack: Stack) -> None:
    stack.write("route-settings.yaml", stack.route("settings", HOST))
    stack.wait(HOST, lambda r: r.status_code == 200, what="the settings route")


def raw(stack: Stack, data: bytes, timeout: float = 5) -> bytes:
    """Send bytes on a new connection and read until Envoy closes it."""
    chunks = []
    with socket.create_connection((stack.addr, PORT), timeout=timeout) as s:
        s.sendall(data)
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def http_request(path: str, host: str = HOST, version: str = "1.1") -> bytes:
    return f"GET {path} HTTP/{version}\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def logged(stack: Stack, log: Path, expected: str, send: Any) -> str:
    """Make the request `send()` makes until its access log line is `expected` (a
    policy being replaced logs with the old settings for a moment)."""
    def attempt() -> str | None:
        send()
        return expected if expected in lines(log) else None

    try:
        return wait_for(attempt, 15, f"{expected!r} in {log}")
    except AssertionError as err:
        raise AssertionError(f"{err}; the log has {lines(log)[-5:]}") from None


def test_health_check_answered_by_envoy_without_a_backend(stack: Stack) -> None:
    assert stack.get("unknown.example.com", "/healthz").status_code == 404  # no route: nothing answers it
    listener_policy(stack, "healthCheck: {path: /healthz}")
    stack.wait("unknown.example.com", lambda r: r.status_code == 200, path="/healthz", what="the health path")
    assert stack.get(HOST, "/healthz").status_code == 200
    assert "/healthz" not in stack.echo.hits  # Envoy answered, no backend was asked
    assert stack.get(HOST, "/healthz/deeper").status_code == 200  # only the exact path is the check...
    assert stack.echo.hits.get("/healthz/deeper") == 1  # ...other paths go to the routes


def test_inline_http_settings_configure_every_port(stack: Stack) -> None:
    """kgateway's other shape: `spec.httpSettings` with no `default`, as its listener_policy suite writes it."""
    stack.write("listener-policy.yaml", """
        apiVersion: gateway.lychgate.dev/v1alpha1
        kind: ListenerPolicy
        metadata: {name: settings}
        spec:
          targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]
          httpSettings:
            healthCheck: {path: /inline-health}
    """)
    stack.wait("unknown.example.com", lambda r: r.status_code == 200, path="/inline-health", what="the health path")
    assert "/inline-health" not in stack.echo.hits


def test_trusted_client_address_in_the_access_log(stack: Stack, tmp_path: Path) -> None:
    log = tmp_path / "clients.log"
    access = f'accessLog: [{{fileSink: {{path: {log}, stringFormat: "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %REQ(:PATH)%"}}}}]'
    listener_policy(stack, access)
    # By default the peer's address, whatever XFF says.
    logged(stack, log, "127.0.0.1 /default", lambda: stack.get(HOST, "/default",
                                                               headers={"x-forwarded-for": "203.0.113.9"}))

    listener_policy(stack, access + "\nxffNumTrustedHops: 1")
    logged(stack, log, "203.0.113.9 /one-hop", lambda: stack.get(HOST, "/one-hop",
                                                                 headers={"x-forwarded-for": "203.0.113.9"}))

    # Behind trusted proxies (by address range) and transparent: XFF is passed on as it came.
    listener_policy(stack, access + "\nuseRemoteAddress: false\nxffTrustedCIDRs: [127.0.0.0/8, 10.0.0.0/8]")
    xff = "198.51.100.20, 203.0.113.9, 10.1.2.3"
    logged(stack, log, "203.0.113.9 /cidrs", lambda: stack.get(HOST, "/cidrs", headers={"x-forwarded-for": xff}))
    seen = body_of(stack.get(HOST, "/cidrs-backend", headers={"x-forwarded-for": xff}))["headers"]
    assert seen["x-forwarded-for"] == xff  # skipXFFAppend implied: the peer is not appended


def _proxy_v2(src: str, dst: str, sport: int, dport: int) -> bytes:
    body = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport)
    return b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + struct.pack("!H", len(body)) + body


def test_proxy_protocol_v1_and_v2_clients(stack: Stack, tmp_path: Path) -> None:
    log = tmp_path / "proxied.log"
    access = f'accessLog: [{{fileSink: {{path: {log}, stringFormat: "%DOWNSTREAM_REMOTE_ADDRESS% %REQ(:PATH)%"}}}}]'
    listener_policy(stack, access, listener="proxyProtocol: {}")
    v1 = b"PROXY TCP4 198.51.100.7 10.0.0.1 40001 8080\r\n" + http_request("/v1")
    logged(stack, log, "198.51.100.7:40001 /v1", lambda: raw(stack, v1))
    answer = raw(stack, _proxy_v2("198.51.100.8", "10.0.0.1", 40002, 8080) + http_request("/v2"))
    assert answer.startswith(b"HTTP/1.1 200")
    logged(stack, log, "198.51.100.8:40002 /v2", lambda: None)
    assert raw(stack, http_request("/plain")) == b""  # no PROXY header: the connection is refused

    listener_policy(stack, access, listener="proxyProtocol: {allowRequestsWithoutProxyProtocol: true}")
    wait_for(lambda: raw(stack, http_request("/plain")).startswith(b"HTTP/1.1 200"), 15, "a client without PROXY")
    assert raw(stack, v1.replace(b"/v1", b"/v1-again")).startswith(b"HTTP/1.1 200")


def test_header_limits_changes_and_request_ids(stack: Stack) -> None:
    big = {"x-big": "a" * 3000}
    xfcc = {"x-forwarded-client-cert": "By=spiffe://upstream;Hash=abc"}
    # lychgate's defaults first.
    assert stack.get(HOST, "/big", headers=big).status_code == 200
    seen = body_of(stack.get(HOST, "/defaults", headers={"x-internal-user": "mallory", "x-request-id": "abc-123",
                                                          **xfcc}))["headers"]
    assert seen["x-internal-user"] == "mallory" and "x-edge" not in seen
    assert seen["x-request-id"] != "abc-123"  # an edge proxy replaces the client's request id
    assert "x-forwarded-client-cert" not in seen  # and drops a client's XFCC (Sanitize)

    listener_policy(stack, """
        maxRequestHeadersKb: 2
        earlyRequestHeaderModifier: {set: [{name: x-edge, value: "1"}], remove: [x-internal-user]}
        preserveExternalRequestId: true
        generateRequestId: false
        forwardClientCertDetails: {mode: AlwaysForwardOnly}
        serverHeaderTransformation: PassThrough
    """)
    stack.wait(HOST, lambda r: r.status_code == 431, path="/big", what="big headers to be refused", headers=big)
    resp = stack.get(HOST, "/changed", headers={"x-internal-user": "mallory", "x-request-id": "abc-123", **xfcc})
    seen = body_of(resp)["headers"]
    assert seen["x-edge"] == "1" and "x-internal-user" not in seen
    assert seen["x-request-id"] == "abc-123"
    assert seen["x-forwarded-client-cert"] == xfcc["x-forwarded-client-cert"]
    assert resp.headers["server"].startswith("Python")  # the backend's own Server header
    assert "x-request-id" not in body_of(stack.get(HOST, "/no-id"))["headers"]


def test_http10_and_timeouts(stack: Stack) -> None:
    old = b"GET /old HTTP/1.0\r\n\r\n"
    assert raw(stack, old).startswith(b"HTTP/1.1 426")  # Envoy's default: upgrade required
    listener_policy(stack, f"""
        acceptHttp10: true
        defaultHostForHttp10: {HOST}
        streamIdleTimeout: 300ms
        idleTimeout: 500ms
    """)
    answer = wait_for(lambda: (a := raw(stack, old)).startswith(b"HTTP/1.0 200") and a, 15, "HTTP/1.0 to be served")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["path"] == "/old"  # routed by the default host

    # A backend silent for longer than the stream idle timeout: Envoy gives up (not the 15 s route timeout).
    resp = stack.get(HOST, "/delay/3000")
    assert (resp.status_code, resp.text) == (504, "stream timeout")
    # An idle keep-alive connection is closed by Envoy (idleTimeout), not by the client.
    with socket.create_connection((stack.addr, PORT), timeout=10) as s:
        s.sendall(f"GET /keep HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        try:
            while s.recv(65536):
                pass
        except TimeoutError:
            raise AssertionError("Envoy kept the idle connection open (idleTimeout: 500ms)") from None


def test_http2_settings_upgrades_and_buffer_limit(stack: Stack) -> None:
    def max_streams() -> int | None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        with socket.create_connection((stack.addr, PORT), timeout=5) as s:
            s.sendall(conn.data_to_send())
            for event in conn.receive_data(s.recv(65536)):
                if isinstance(event, h2.events.RemoteSettingsChanged):
                    setting = event.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
                    return setting.new_value if setting else None
        return None

    websocket = {"connection": "upgrade", "upgrade": "websocket", "sec-websocket-version": "13",
                 "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="}
    assert max_streams() != 7
    assert stack.get(HOST, "/ws", headers=websocket).status_code == 403  # upgrades are refused by default
    listener_policy(stack, """
        http2ProtocolOptions: {maxConcurrentStreams: 7}
        upgradeConfig: {enabledUpgrades: [websocket]}
    """, listener="perConnectionBufferLimitBytes: 16384")
    wait_for(lambda: max_streams() == 7, 15, "the HTTP/2 SETTINGS to announce 7 streams")
    resp = stack.get(HOST, "/ws", headers=websocket)
    assert (resp.status_code, resp.headers.get("x-backend")) == (200, "app")  # reaches the backend now
    dump = httpx.get(f"http://{stack.lg.proxies()['default/gw']['admin']}/config_dump",
                     params={"resource": "dynamic_listeners"}).json()
    listener = next(c["active_state"]["listener"] for c in dump["configs"] if c["name"] == f"http-{PORT}")
    assert listener["per_connection_buffer_limit_bytes"] == 16384


@pytest.fixture
def raw_backend(stack: Stack) -> Iterator[list[bytes]]:
    """A backend that records each request's bytes as they arrived (header names in their case)."""
    seen: list[bytes] = []
    server = socket.create_server(("127.0.0.1", free_port()))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                seen.append(conn.recv(65536))
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    threading.Thread(target=serve, daemon=True).start()
    port = server.getsockname()[1]
    stack.write("svc-raw.yaml", service_yaml("raw", port, port))
    stack.write("route-raw.yaml", stack.route("raw", "raw.example.com").replace("name: app, port: 80",
                                                                               f"name: raw, port: {port}"))
    wait_for(lambda: raw(stack, http_request("/ready", "raw.example.com")).startswith(b"HTTP/1.1 200"), 15,
             "the raw backend's route")
    yield seen
    server.close()


def test_http1_header_case_preserved_towards_the_backend(stack: Stack, raw_backend: list[bytes]) -> None:
    request = b"GET /case HTTP/1.1\r\nHost: raw.example.com\r\nX-MiXeD-Case: 1\r\nConnection: close\r\n\r\n"
    raw(stack, request)
    assert b"\r\nx-mixed-case: 1\r\n" in raw_backend[-1]  # Envoy's default: lower case
    listener_policy(stack, "preserveHttp1HeaderCase: true")
    wait_for(lambda: raw(stack, request) and b"\r\nX-MiXeD-Case: 1\r\n" in raw_backend[-1], 15,
             "the header to keep its case")


def test_host_path_server_name_and_100_continue(stack: Stack, raw_backend: list[bytes]) -> None:
    """What the backend and the client see of Host and path normalisation, the Server
    header and `Expect: 100-continue`: lychgate's defaults, then each changed."""
    def seen(request: bytes) -> tuple[bytes, bytes]:
        """(the client's answer, the bytes the backend got, in lower case: an earlier test may
        leave header case preserved) for one request."""
        before = len(raw_backend)
        answer = raw(stack, request)
        return answer, raw_backend[-1].lower() if len(raw_backend) > before else b""

    def get(path: str, host: str = "raw.example.com", extra: str = "") -> bytes:
        return f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n".encode()

    upload = (b"POST /upload HTTP/1.1\r\nHost: raw.example.com\r\nExpect: 100-continue\r\nContent-Length: 2\r\n"
              b"Connection: close\r\n\r\nhi")
    # Defaults: a dotted FQDN matches no host, a port reaches the backend, paths are
    # normalised and slashes merged, Envoy answers 100-continue itself and names itself.
    assert raw(stack, get("/dot", "raw.example.com.")).startswith(b"HTTP/1.1 404")
    answer, backend = seen(get("/port", "raw.example.com:9999"))
    assert b"\r\nhost: raw.example.com:9999\r\n" in backend and b"\r\nserver: envoy\r\n" in answer
    assert seen(get("//a//b/../c"))[1].startswith(b"get /a/c http/1.1")
    answer, backend = seen(upload)
    assert answer.startswith(b"HTTP/1.1 100 Continue") and b"expect:" not in backend

    listener_policy(stack, """
        serverName: lychgate-edge
        stripTrailingHostDot: true
        stripHostPortMode: AnyPort
        normalizePath: false
        mergeSlashes: false
        proxy100Continue: true
    """)
    wait_for(lambda: raw(stack, get("/dot", "raw.example.com.")).startswith(b"HTTP/1.1 200"), 15,
             "a dotted FQDN to match its host")
    assert b"\r\nhost: raw.example.com\r\n" in raw_backend[-1].lower()  # forwarded without the dot...
    answer, backend = seen(get("/port", "raw.example.com:9999"))
    assert b"\r\nhost: raw.example.com\r\n" in backend  # ...and without the port
    assert b"\r\nserver: lychgate-edge\r\n" in answer
    assert seen(get("//a//b/../c"))[1].startswith(b"get //a//b/../c http/1.1")  # the path as sent
    answer, backend = seen(upload)
    assert b"\r\nexpect: 100-continue\r\n" in backend  # the backend decides on 100-continue
    assert answer.startswith(b"HTTP/1.1 200")


TLS_PORT = 8443


def _tls_listener(stack: Stack) -> None:
    """An HTTPS listener beside the module's HTTP one (other tests use only port 8080)."""
    ca = CA()
    cert, key = ca.issue("tls.example.com", ["tls.example.com"])
    stack.write("secret-lp-cert.yaml", f"""
        apiVersion: v1
        kind: Secret
        metadata: {{name: lp-cert}}
        type: kubernetes.io/tls
        data: {{tls.crt: {base64.b64encode(cert).decode()}, tls.key: {base64.b64encode(key).decode()}}}
    """)
    gateway = stack.lg.manifests / "00-gateway.yaml"
    text = gateway.read_text()
    if "lp-cert" not in text:
        listener = (f"    - {{name: https, protocol: HTTPS, port: {TLS_PORT}, allowedRoutes: {{namespaces: {{from: All}}}}, "
                    "tls: {certificateRefs: [{name: lp-cert}]}}\n")
        stack.lg.write("00-gateway.yaml", text.replace("  addresses:", listener + "  addresses:"))

    def handshakes() -> bool:
        context = ssl.create_default_context(cadata=ca.pem.decode())
        try:
            with socket.create_connection((stack.addr, TLS_PORT), timeout=2) as s, \
                    context.wrap_socket(s, server_hostname="tls.example.com"):
                return True
        except OSError:
            return False

    wait_for(handshakes, 15, "the HTTPS listener")


def _stalled_handshake_lifetime(stack: Stack, limit: float) -> float:
    """Seconds until Envoy closes a connection whose client sent its ClientHello and then
    nothing more (`limit` if it is still open then)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    tls = context.wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname="tls.example.com")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    with socket.create_connection((stack.addr, TLS_PORT), timeout=limit) as s:
        start = time.monotonic()
        s.sendall(outgoing.read())  # the ClientHello; the client never answers the server's flight
        try:
            while s.recv(65536):
                pass
        except TimeoutError:
            return limit
        except ConnectionResetError:
            pass
        return time.monotonic() - start


def _closed_after_a_while(stack: Stack, wait: float) -> bool:
    """Does Envoy close a keep-alive connection `wait` seconds old? It answers a request
    then with `connection: close` (HTTP/1.1: how a drain ends a connection in use; an idle
    one is closed at the drain timeout, 5 s later)."""
    with socket.create_connection((stack.addr, PORT), timeout=5) as s:
        request = f"GET /lifetime HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
        s.sendall(request)
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        time.sleep(wait)
        s.sendall(request)
        answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200")
        return b"\r\nconnection: close\r\n" in answer.lower()


def _h2_settings(stack: Stack) -> dict[int, int]:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    with socket.create_connection((stack.addr, PORT), timeout=5) as s:
        s.sendall(conn.data_to_send())
        for event in conn.receive_data(s.recv(65536)):
            if isinstance(event, h2.events.RemoteSettingsChanged):
                return {int(k): v.new_value for k, v in event.changed_settings.items()}
    return {}


def test_connection_lifetime_extended_connect_and_tls_handshake_deadline(stack: Stack) -> None:
    enable_connect = int(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL)
    _tls_listener(stack)
    # Defaults: a connection lives while it is used (the idle timeout is 60 s), a stalled TLS
    # handshake until that timeout too, and HTTP/2 clients are not offered extended CONNECT.
    assert not _closed_after_a_while(stack, 1)
    assert _stalled_handshake_lifetime(stack, 2) == 2
    assert _h2_settings(stack).get(enable_connect) != 1

    listener_policy(stack, "http2ProtocolOptions: {allowConnect: true}", listener="transportSocketConnectTimeout: 500ms")
    wait_for(lambda: _h2_settings(stack).get(enable_connect) == 1, 15, "SETTINGS_ENABLE_CONNECT_PROTOCOL")
    # The client that never finishes its handshake is closed at the deadline.
    assert 0.3 < _stalled_handshake_lifetime(stack, 5) < 3
    assert not _closed_after_a_while(stack, 1)

    # Drained at 700 ms although idle for far less than the idle timeout. (It bounds a stalled
    # handshake too: the connection manager, and its clock, start with the connection.)
    listener_policy(stack, "maxConnectionDuration: 700ms")
    wait_for(lambda: _closed_after_a_while(stack, 1), 15, "a connection older than 700ms to be closed")
