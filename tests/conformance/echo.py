"""Local stand-ins for the conformance suite's echo pods (upstream image echo-basic).

One `EchoPod` per Deployment of the manifests, named `<deployment>-<suffix>` like a
real pod, so a case can check which backend answered by namespace + name prefix.
What each server answers is what the upstream echo-basic answers:

- HTTP (`http`): HTTP/1.1 and h2c on the same port (h2c by prior knowledge, as
  Envoy speaks it), optionally behind TLS (ALPN h2 / http/1.1). Every request gets
  the JSON of the request (path, host, method, proto, headers as a map of lists,
  namespace, ingress, service, pod, tls, sni); `/status/<code>` answers that code,
  `?delay=<duration>` waits first, `X-Echo-Set-Header: Name:value,...` sets
  response headers, `/ws` is a WebSocket echo.
- gRPC (`grpc`): the service `gateway_api_conformance.echo_basic.grpcecho.GrpcEcho`
  (Echo, EchoTwo; EchoThree unimplemented) answering with the request metadata,
  the :authority and the pod's identity. Descriptors are built at run time.
- TCP (`tcp`): a welcome line, then `TEST` -> the pod's JSON, `IS_TLS`, `PING` -> `PONG`;
  optionally TLS.
- UDP (`dns`): a DNS server answering like CoreDNS `whoami`: the client address
  and port in the additional section.
- UDP (`udp`): echo-basic's UDP_ECHO_SERVER: JSON of the request, namespace,
  service and pod for every datagram.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import re
import socket
import ssl
import struct
import threading
from collections.abc import Awaitable, Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
import h2.config
import h2.connection
import h2.events
import h11
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from wsproto.connection import Connection as WsConnection
from wsproto.connection import ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Message, Ping, TextMessage

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
GRPC_SERVICE = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho"
TCP_WELCOME = b"Gateway API Test TCP Server\n"


@dataclass(frozen=True)
class Identity:
    """What echo-basic reads from its environment (NAMESPACE, POD_NAME, ...)."""

    namespace: str
    pod: str
    service: str = ""
    ingress: str = ""

    def context(self) -> dict[str, str]:
        return {"namespace": self.namespace, "ingress": self.ingress,
                "service": self.service, "pod": self.pod}


def canonical_header(name: str) -> str:
    """Go's canonical MIME header key: `x-foo-bar` -> `X-Foo-Bar`."""
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


def parse_duration(text: str) -> float:
    """A Go duration (`1s`, `500ms`, `1m30s`) in seconds."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"([\d.]+)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


def tls_assertions(sslobj: ssl.SSLObject | ssl.SSLSocket | None, server_name: str) -> dict[str, Any] | None:
    if sslobj is None:
        return None
    version = {"TLSv1.3": "TLSv1.3", "TLSv1.2": "TLSv1.2"}.get(sslobj.version() or "", sslobj.version())
    out: dict[str, Any] = {
        "version": version,
        "serverName": server_name,
        "cipherSuite": (sslobj.cipher() or ("",))[0],
    }
    if sslobj.selected_alpn_protocol():
        out["negotiatedProtocol"] = sslobj.selected_alpn_protocol()
    peer = sslobj.getpeercert(binary_form=True)
    if peer:
        out["peerCertificates"] = [ssl.DER_cert_to_PEM_cert(peer)]
    return out


@dataclass
class HttpExchange:
    """One request as the echo handler sees it, whatever the protocol."""

    method: str
    target: str
    host: str
    proto: str
    headers: list[tuple[str, str]]
    tls: dict[str, Any] | None = None


# What echo-basic logs for every request it echoes ("Echoing back request made to
# <path> to client"): (namespace, pod, path), read by the mirror cases as pod logs.
REQUEST_LOG: list[tuple[str, str, str]] = []
# echo-basic's retry simulation: how many requests each `uuid` has made so far.
_RETRY_ATTEMPTS: dict[str, int] = {}


def _retry_simulation(query: str) -> int | None:
    """`?responseCode=C&succeedAfter=N&uuid=U`: answer C to the first N requests of U,
    then echo as usual (None)."""
    params = dict(p.partition("=")[::2] for p in query.split("&") if p)
    if not {"responseCode", "succeedAfter", "uuid"} <= params.keys():
        return None
    seen = _RETRY_ATTEMPTS.get(params["uuid"], 0) + 1
    _RETRY_ATTEMPTS[params["uuid"]] = seen
    return int(params["responseCode"]) if seen <= int(params["succeedAfter"]) else None


async def echo_answer(identity: Identity, req: HttpExchange) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body echo-basic would answer."""
    path, _, query = req.target.partition("?")
    REQUEST_LOG.append((identity.namespace, identity.pod, path))
    simulated = _retry_simulation(query)
    if simulated is not None:
        return simulated, [], b""
    status_match = re.fullmatch(r"/status/(\d\d\d)", req.target)
    if path.startswith("/status/"):
        return (int(status_match.group(1)) if status_match else 400), [], b""
    delay = next((v for k, v in (p.partition("=")[::2] for p in query.split("&")) if k == "delay"), "")
    if delay:
        try:
            await asyncio.sleep(parse_duration(delay))
        except ValueError as err:
            return 500, [("content-type", "application/json")], json.dumps({"message": str(err)}).encode()
    headers: dict[str, list[str]] = {}
    for name, value in req.headers:
        if name.lower() == "host" or name.startswith(":"):
            continue
        headers.setdefault(canonical_header(name), []).append(value)
    body: dict[str, Any] = {
        "path": req.target, "host": req.host, "method": req.method, "proto": req.proto,
        "headers": headers, **identity.context(), "sni": "",
    }
    if req.tls is not None:
        body["tls"] = req.tls
        if "backendTLS" in req.target:
            body["sni"] = req.tls.get("serverName", "")
    response_headers = [("content-type", "application/json"), ("x-content-type-options", "nosniff")]
    set_headers: dict[str, str] = {}
    for value in headers.get("X-Echo-Set-Header", []):
        for pair in value.split(","):
            name, _, val = pair.strip().partition(":")
            set_headers[name] = f"{set_headers[name]},{val.strip()}" if name in set_headers else val
    response_headers += list(set_headers.items())
    return 200, response_headers, json.dumps(body, indent=1).encode()


class HttpEchoServer:
    """HTTP/1.1, h2c and WebSocket on one port (optionally TLS), like echo-basic."""

    def __init__(self, identity: Identity, tls: ssl.SSLContext | None = None) -> None:
        self.identity = identity
        self.tls = tls
        self._server_names: dict[int, str] = {}
        if tls is not None:
            tls.set_alpn_protocols(["h2", "http/1.1"])
            tls.sni_callback = self._remember_sni

    def _remember_sni(self, sslobj: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        self._server_names[id(sslobj)] = name or ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sslobj = writer.get_extra_info("ssl_object")
        tls = tls_assertions(sslobj, self._server_names.pop(id(sslobj), "")) if sslobj else None
        try:
            first = await reader.read(65536)
            if first.startswith(H2_PREFACE[: len(first)]) and len(first) < len(H2_PREFACE):
                first += await reader.readexactly(len(H2_PREFACE) - len(first))
            if first.startswith(H2_PREFACE):
                await self._serve_h2(first, reader, writer, tls)
            elif first:
                await self._serve_h1(first, reader, writer, tls)
        except (ConnectionError, asyncio.IncompleteReadError, h11.RemoteProtocolError,
                h2.exceptions.ProtocolError, ssl.SSLError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_h1(self, data: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        tls: dict[str, Any] | None) -> None:
        conn = h11.Connection(h11.SERVER)
        conn.receive_data(data)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                chunk = await reader.read(65536)
                conn.receive_data(chunk)
                if not chunk and conn.their_state is not h11.DONE:
                    return
                continue
            if isinstance(event, h11.ConnectionClosed) or (event is h11.PAUSED and conn.our_state is h11.MUST_CLOSE):
                return
            if isinstance(event, h11.Request):
                request = event
                headers = [(k.decode(), v.decode()) for k, v in request.headers]
                target = request.target.decode()
                if target.split("?")[0] == "/ws" and any(
                        k.lower() == "upgrade" and v.lower() == "websocket" for k, v in headers):
                    await self._serve_ws(headers, conn.trailing_data[0], reader, writer)
                    return
                while not isinstance(event, h11.EndOfMessage):  # drain the body
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        conn.receive_data(await reader.read(65536))
                host = next((v for k, v in headers if k.lower() == "host"), "")
                proto = f"HTTP/{request.http_version.decode()}"
                status, out_headers, body = await echo_answer(
                    self.identity, HttpExchange(request.method.decode(), target, host, proto, headers, tls))
                out_headers = [*out_headers, ("content-length", str(len(body)))]
                writer.write(conn.send(h11.Response(status_code=status, headers=out_headers)))
                writer.write(conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
                await writer.drain()
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()

    async def _serve_ws(self, headers: list[tuple[str, str]], rest: bytes, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> None:
        key = next(v for k, v in headers if k.lower() == "sec-websocket-key")
        accept = base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()
        writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Accept: {accept}\r\n\r\n").encode())
        ws = WsConnection(ConnectionType.SERVER)
        data = rest
        while True:
            if data:
                ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, TextMessage | BytesMessage):
                    writer.write(ws.send(Message(data=event.data)))
                elif isinstance(event, Ping):
                    writer.write(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    with contextlib.suppress(Exception):
                        writer.write(ws.send(event.response()))
                    return
            await writer.drain()
            data = await reader.read(65536)
            if not data:
                return

    async def _serve_h2(self, data: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        tls: dict[str, Any] | None) -> None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        requests: dict[int, list[tuple[str, str]]] = {}
        tasks: set[asyncio.Task[None]] = set()

        async def answer(stream_id: int, headers: list[tuple[str, str]]) -> None:
            pseudo = dict(h for h in headers if h[0].startswith(":"))
            status, out_headers, body = await echo_answer(self.identity, HttpExchange(
                pseudo.get(":method", ""), pseudo.get(":path", ""), pseudo.get(":authority", ""),
                "HTTP/2.0", headers, tls))
            with contextlib.suppress(h2.exceptions.ProtocolError):
                conn.send_headers(stream_id, [(":status", str(status)), *out_headers,
                                              ("content-length", str(len(body)))])
                conn.send_data(stream_id, body, end_stream=True)
                writer.write(conn.data_to_send())

        while data:
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    requests[event.stream_id] = [(str(k), str(v)) for k, v in event.headers]
                    if event.stream_ended is not None:
                        tasks.add(asyncio.ensure_future(answer(event.stream_id, requests.pop(event.stream_id))))
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id in requests:
                    tasks.add(asyncio.ensure_future(answer(event.stream_id, requests.pop(event.stream_id))))
                elif isinstance(event, h2.events.ConnectionTerminated):
                    return
            writer.write(conn.data_to_send())
            await writer.drain()
            data = await reader.read(65536)
        for task in tasks:
            task.cancel()


class TcpEchoServer:
    """echo-basic's TCP mode: welcome line, then TEST / IS_TLS / PING commands."""

    def __init__(self, identity: Identity, port: int, tls_port: int | None,
                 tls: ssl.SSLContext | None = None) -> None:
        self.identity = identity
        self.port = str(port)
        self.tls_port = str(tls_port) if tls_port else ""
        # A server-side SSL object does not keep the client's SNI: remember it here.
        self._server_names: dict[int, str] = {}
        if tls is not None:
            tls.sni_callback = self._remember_sni

    def _remember_sni(self, sslobj: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        self._server_names[id(sslobj)] = name or ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sslobj = writer.get_extra_info("ssl_object")
        server_name = self._server_names.pop(id(sslobj), "") if sslobj is not None else ""
        payload: dict[str, Any] = {**self.identity.context(), "tcpport": self.port, "isTLS": sslobj is not None}
        if self.tls_port:
            payload["tlsport"] = self.tls_port
        if sslobj is not None:
            payload["tls"] = {"version": sslobj.version(), "serverName": server_name,
                              "cipherSuite": (sslobj.cipher() or ("",))[0]}
        try:
            writer.write(TCP_WELCOME)
            while line := await reader.readline():
                command = line.strip().decode(errors="replace")
                if command == "TEST":
                    writer.write(json.dumps(payload).encode() + b"\n")
                elif command == "IS_TLS":
                    writer.write(b"true\n" if sslobj is not None else b"false\n")
                elif command == "PING":
                    writer.write(b"PONG\n")
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


class DnsWhoami(asyncio.DatagramProtocol):
    """Answers every DNS query like CoreDNS `whoami`: an A record of the client's
    address and an SRV record of its port, in the additional section."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.DatagramTransport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if len(data) < 12:
            return
        ident, flags = struct.unpack("!HH", data[:4])
        end = 12
        while end < len(data) and data[end] != 0:
            end += data[end] + 1
        question = data[12:end + 5]
        header = struct.pack("!HHHHHH", ident, 0x8000 | (flags & 0x0100) | 0x0400, 1, 0, 0, 2)
        a_record = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 0, 4) + socket.inet_aton(addr[0])
        srv = struct.pack("!HHH", 0, 0, addr[1]) + b"\xc0\x0c"
        srv_record = b"\xc0\x0c" + struct.pack("!HHIH", 33, 1, 0, len(srv)) + srv
        self.transport.sendto(header + question + a_record + srv_record, addr)


class UdpEcho(asyncio.DatagramProtocol):
    """echo-basic's UDP mode (UDP_ECHO_SERVER): every datagram is answered with JSON
    naming the request and the pod's identity (namespace, service, pod)."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.DatagramTransport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        answer = {"request": data.decode(errors="replace"), "namespace": self.identity.namespace,
                  "service": self.identity.service, "pod": self.identity.pod}
        self.transport.sendto(json.dumps(answer).encode(), addr)


# --- gRPC ------------------------------------------------------------------------


def _grpc_messages() -> dict[str, Any]:
    """The message classes of upstream's grpcecho.proto, built from a descriptor
    written here field by field (same names and numbers as the .proto)."""
    fd = descriptor_pb2.FileDescriptorProto(name="lychgate_conformance_grpcecho.proto",
                                            package=GRPC_SERVICE.rsplit(".", 1)[0], syntax="proto3")
    string, message, repeated = (descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                                 descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                                 descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    package = "." + fd.package
    layout: dict[str, list[tuple[str, int, int, int, str]]] = {
        "Header": [("key", 1, string, optional, ""), ("value", 2, string, optional, "")],
        "Context": [("namespace", 1, string, optional, ""), ("ingress", 2, string, optional, ""),
                    ("service_name", 3, string, optional, ""), ("pod", 4, string, optional, "")],
        "TLSAssertions": [("version", 1, string, optional, ""), ("negotiated_protocol", 2, string, optional, ""),
                          ("server_name", 3, string, optional, ""), ("cipher_suite", 4, string, optional, ""),
                          ("peer_certificates", 5, string, repeated, "")],
        "Assertions": [("fully_qualified_method", 1, string, optional, ""),
                       ("headers", 2, message, repeated, "Header"), ("authority", 3, string, optional, ""),
                       ("context", 4, message, optional, "Context"),
                       ("tls_assertions", 5, message, optional, "TLSAssertions")],
        "EchoRequest": [],
        "EchoResponse": [("assertions", 1, message, optional, "Assertions"),
                         ("request", 2, message, optional, "EchoRequest")],
    }
    for name, fields in layout.items():
        msg = fd.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = msg.field.add(name=fname, number=number, type=ftype, label=label)  # type: ignore[arg-type]
            if type_name:
                f.type_name = f"{package}.{type_name}"
    svc = fd.service.add(name=GRPC_SERVICE.rsplit(".", 1)[1])
    for method in ("Echo", "EchoTwo", "EchoThree"):
        svc.method.add(name=method, input_type=f"{package}.EchoRequest", output_type=f"{package}.EchoResponse")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{fd.package}.{name}"))
            for name in layout}


GRPC_MESSAGES = _grpc_messages()


def grpc_echo_handler(identity: Identity) -> grpc.GenericRpcHandler:
    response_cls = GRPC_MESSAGES["EchoResponse"]

    def make(method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        def handle(_request: Any, context: grpc.ServicerContext) -> Any:
            metadata = list(context.invocation_metadata())
            authority = next((v for k, v in metadata if k == ":authority"), "")
            response = response_cls()
            a = response.assertions
            a.fully_qualified_method = f"/{GRPC_SERVICE}/{method}"
            a.authority = authority or _authority(context)
            for key, value in metadata:
                if isinstance(value, str):
                    a.headers.add(key=key, value=value)
            a.context.namespace = identity.namespace
            a.context.ingress = identity.ingress
            a.context.service_name = identity.service
            a.context.pod = identity.pod
            return response
        return handle

    request_cls = GRPC_MESSAGES["EchoRequest"]
    handlers = {
        m: grpc.unary_unary_rpc_method_handler(
            make(m), request_deserializer=request_cls.FromString,
            response_serializer=response_cls.SerializeToString)
        for m in ("Echo", "EchoTwo")  # EchoThree stays unimplemented, as upstream
    }
    return grpc.method_handlers_generic_handler(GRPC_SERVICE, handlers)


def _authority(context: grpc.ServicerContext) -> str:
    # grpcio does not put :authority in the invocation metadata; the call details have it.
    details = getattr(context, "_rpc_event", None)
    call_details = getattr(details, "call_details", None)
    host = getattr(call_details, "host", b"")
    return host.decode() if isinstance(host, bytes) else str(host or "")


# --- the pods ---------------------------------------------------------------------


@dataclass
class EchoPods:
    """All echo servers of a run, in one background event loop (plus gRPC servers)."""

    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    servers: list[asyncio.AbstractServer] = field(default_factory=list)
    transports: list[asyncio.BaseTransport] = field(default_factory=list)
    grpc_servers: list[grpc.Server] = field(default_factory=list)
    host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="echo-pods")
        self.thread.start()

    def _run(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)  # type: ignore[arg-type]

    def _stream(self, handler: Callable[..., Awaitable[None]], tls: ssl.SSLContext | None) -> int:
        async def go() -> int:
            server = await asyncio.start_server(handler, self.host, 0, ssl=tls)
            self.servers.append(server)
            return int(server.sockets[0].getsockname()[1])
        return int(self._run(go()))

    def http(self, identity: Identity, tls: ssl.SSLContext | None = None) -> int:
        return self._stream(HttpEchoServer(identity, tls).handle, tls)

    def tcp(self, identity: Identity, tls: ssl.SSLContext | None = None) -> int:
        server = TcpEchoServer(identity, 0, None, tls)
        port = self._stream(server.handle, tls)
        server.port = str(port)
        return port

    def grpc(self, identity: Identity) -> int:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((grpc_echo_handler(identity),))
        port = server.add_insecure_port(f"{self.host}:0")
        server.start()
        self.grpc_servers.append(server)
        return int(port)

    def dns(self) -> int:
        async def go() -> int:
            transport, _ = await self.loop.create_datagram_endpoint(DnsWhoami, local_addr=(self.host, 0))
            self.transports.append(transport)
            return int(transport.get_extra_info("sockname")[1])
        return int(self._run(go()))

    def udp(self, identity: Identity) -> int:
        async def go() -> int:
            transport, _ = await self.loop.create_datagram_endpoint(lambda: UdpEcho(identity),
                                                                    local_addr=(self.host, 0))
            self.transports.append(transport)
            return int(transport.get_extra_info("sockname")[1])
        return int(self._run(go()))

    def close(self) -> None:
        async def stop() -> None:
            for server in self.servers:
                server.close()
            for transport in self.transports:
                transport.close()
            # Open connections (keep-alive from Envoy) end with the loop, not hang it.
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        self._run(stop())
        for g in self.grpc_servers:
            g.stop(0)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def server_tls(cert_pem: bytes, key_pem: bytes, client_ca: bytes | None = None) -> ssl.SSLContext:
    """A server TLS context from PEM bytes (echo-basic's TLS_SERVER_CERT/PRIVKEY)."""
    import tempfile
    from pathlib import Path

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        ctx.load_cert_chain(cert, key)
    if client_ca:
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(cadata=client_ca.decode())
    return ctx
