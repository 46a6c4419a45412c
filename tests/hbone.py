"""A real HBONE client: HTTP/2 CONNECT to a waypoint, then HTTP/1.1 inside the tunnel.

This is what a ztunnel does for a workload in an ambient mesh: it opens an
HTTP/2 connection to the waypoint (port 15008), sends `CONNECT` with the
destination `host:port` as `:authority`, and carries the workload's own bytes
in the stream's DATA frames. Here the workload's bytes are one HTTP/1.1
request, and the answer is read back out of the tunnel.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.events


@dataclass
class TunnelResult:
    """The CONNECT answer, and (when the tunnel opened) the inner HTTP response."""

    connect_status: int
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def pod(self) -> str | int:
        """Which echo backend answered, or the status code when none did."""
        if self.connect_status != 200:
            return self.connect_status
        if self.status == 200 and self.headers.get("content-type", "").startswith("application/json"):
            return str(self.json().get("pod"))
        return self.status or 0


def request(
    waypoint: str, authority: str, path: str = "/", *, port: int = 15008, method: str = "GET",
    headers: dict[str, str] | None = None, host: str | None = None, timeout: float = 5.0,
    tls: ssl.SSLContext | None = None,
) -> TunnelResult:
    """One HTTP/1.1 request through an HBONE tunnel to `authority` ("host:port"); with
    `tls`, the HTTP/2 connection to the waypoint is (m)TLS, as between ztunnel and waypoint."""
    deadline = time.monotonic() + timeout
    with socket.create_connection((waypoint, port), timeout=timeout) as raw, \
            (tls.wrap_socket(raw, server_hostname="waypoint.mesh") if tls else raw) as sock:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        stream = conn.get_next_available_stream_id()
        conn.send_headers(stream, [(":method", "CONNECT"), (":authority", authority)])
        sock.sendall(conn.data_to_send())
        connect_status: int | None = None
        inner = b""
        sent = False
        ended = False
        while not ended:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no complete answer through the tunnel to {authority} in {timeout}s")
            data = sock.recv(65536)
            if not data:
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream:
                    connect_status = int(dict(event.headers)[":status"])
                    if connect_status != 200:
                        ended = True
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream:
                    inner += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, stream)
                    if _complete(inner):
                        ended = True
                elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)) and event.stream_id == stream:
                    ended = True
            if connect_status == 200 and not sent:
                lines = [f"{method} {path} HTTP/1.1", f"Host: {host or authority}", "Content-Length: 0",
                         *(f"{k}: {v}" for k, v in (headers or {}).items())]
                conn.send_data(stream, ("\r\n".join(lines) + "\r\n\r\n").encode())
                sent = True
            sock.sendall(conn.data_to_send())
        if connect_status is None:
            raise ConnectionError(f"the waypoint closed the connection without answering CONNECT {authority}")
        result = TunnelResult(connect_status)
        if connect_status == 200 and inner:
            _parse(inner, result)
        return result


def _split(raw: bytes) -> tuple[bytes, bytes] | None:
    head, sep, body = raw.partition(b"\r\n\r\n")
    return (head, body) if sep else None


def _complete(raw: bytes) -> bool:
    parts = _split(raw)
    if parts is None:
        return False
    head, body = parts
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value.strip())
    return False  # no length: the body ends with the stream


def _parse(raw: bytes, out: TunnelResult) -> None:
    parts = _split(raw)
    if parts is None:
        return
    head, body = parts
    status_line, *lines = head.decode("latin-1").split("\r\n")
    out.status = int(status_line.split()[1])
    for line in lines:
        name, _, value = line.partition(":")
        out.headers[name.strip().lower()] = value.strip()
    out.body = body
