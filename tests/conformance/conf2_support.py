"""Clients and checks for the non-HTTP conformance cases (GRPCRoute, TLSRoute, TCPRoute,
UDPRoute): what upstream's utils/grpc, utils/tcp, utils/udp, utils/tls and utils/weight
do, against one Suite.

Each `expect_*` retries until CONSECUTIVE_SUCCESSES answers in a row match (upstream's
eventually-consistent requests), bounded by CONSISTENCY_TIMEOUT.
"""

from __future__ import annotations

import functools
import json
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from tests.conformance import manifests as mf
from tests.conformance.echo import GRPC_MESSAGES, GRPC_SERVICE, TCP_WELCOME
from tests.conformance.suite import (
    CONSECUTIVE_SUCCESSES,
    CONSISTENCY_TIMEOUT,
    GROUP,
    INFRA,
    CaseFailure,
    Cond,
    Ref,
    Suite,
    check_conditions,
    ensure,
    eventually,
)

# --- addresses and status ----------------------------------------------------------------


def listener_address(s: Suite, gateway: str, listener: str, namespace: str = INFRA) -> str:
    """host:port of one listener (upstream's WaitForGatewayAddress with a section name)."""
    return s.gateway_address(Ref(gateway, namespace, sections=(listener,)))


def routes_accepted(s: Suite, kind: str, ref: Ref, *routes: str, namespace: str = INFRA) -> str:
    """Upstream's GatewayAndRoutesMustBeAccepted for any route kind: the Gateway's address,
    each route with exactly one parent entry per listed section (or one for the Gateway),
    each Accepted, every listener ready."""
    return s.routes_accepted(ref, *routes, kind=kind, namespace=namespace)


def route_parent_condition(s: Suite, kind: str, name: str, namespace: str, gateway: str, cond: Cond,
                           section: str | None = None, gateway_namespace: str = INFRA) -> None:
    """Upstream's <Kind>MustHaveCondition: a parent entry for this Gateway (and this
    section, when given) has the condition, of the route's latest generation."""
    def check() -> None:
        route = s.get(kind, name, namespace)
        generation = route["metadata"].get("generation")
        parents = [p for p in (route.get("status") or {}).get("parents") or []
                   if _is_gateway(p.get("parentRef") or {}, gateway, gateway_namespace)
                   and (section is None or (p.get("parentRef") or {}).get("sectionName") == section)]
        ensure(bool(parents), f"{kind} {name} has no parent status for {gateway}"
                              + (f" section {section}" if section else ""))
        for p in parents:
            ensure(p.get("controllerName") == s.controller, f"{kind} {name}: controllerName {p.get('controllerName')!r}")
        errors = []
        for p in parents:
            try:
                check_conditions(f"{kind} {namespace}/{name} parent {gateway}", p.get("conditions") or [], [cond],
                                 generation)
                return
            except CaseFailure as err:
                errors.append(str(err))
        raise CaseFailure("; ".join(errors))
    eventually(check, f"{kind} {namespace}/{name} to have {cond} for {gateway}")


def _is_gateway(ref: dict[str, Any], gateway: str, namespace: str) -> bool:
    return (ref.get("name") == gateway and ref.get("kind", "Gateway") == "Gateway"
            and ref.get("group", GROUP) == GROUP and ref.get("namespace") in (None, namespace))


def no_accepted_parents(s: Suite, kind: str, name: str, namespace: str = INFRA) -> None:
    """Upstream's RouteMustHaveNoAcceptedParents: no parent entry at all (seen on two polls,
    to tell "not set" from "not yet"), or exactly one, whose Accepted is False."""
    seen_empty = [False]

    def check() -> None:
        parents = (s.get(kind, name, namespace).get("status") or {}).get("parents") or []
        if not parents:
            first, seen_empty[0] = not seen_empty[0], True
            ensure(not first, f"{kind} {name} has no parent status yet")
            return
        ensure(len(parents) == 1, f"{kind} {name} has {len(parents)} parent entries, want at most one")
        check_conditions(f"{kind} {namespace}/{name}", parents[0].get("conditions") or [], [Cond("Accepted", "False")])
    eventually(check, f"{kind} {namespace}/{name} to have no accepted parent")


def zero_routes(s: Suite, gateway: str, namespace: str = INFRA) -> None:
    """Upstream's GatewayMustHaveZeroRoutes: no listener in status, or exactly one with
    attachedRoutes 0."""
    def check() -> None:
        gw = s.get("Gateway", gateway, namespace)
        listeners = (gw.get("status") or {}).get("listeners") or []
        ensure(len(listeners) <= 1, f"Gateway {gateway} has {len(listeners)} listeners in status, want at most one")
        for entry in listeners:
            ensure(entry.get("attachedRoutes") == 0,
                   f"listener {entry.get('name')} attachedRoutes {entry.get('attachedRoutes')}, want 0")
    eventually(check, f"Gateway {namespace}/{gateway} to have no attached route")


@dataclass
class ListenerWant:
    """An expected entry of status.listeners, as upstream's GatewayStatusMustHaveListeners
    compares it: supportedKinds must contain `kinds`, conditions must contain `conditions`."""

    name: str
    conditions: tuple[Cond, ...]
    attached: int = 0
    kinds: tuple[str, ...] = ()


def listeners_match(s: Suite, gateway: str, wanted: list[ListenerWant], namespace: str = INFRA) -> None:
    def check() -> None:
        gw = s.get("Gateway", gateway, namespace)
        got = {e["name"]: e for e in (gw.get("status") or {}).get("listeners") or []}
        ensure(len(got) == len(wanted), f"Gateway {gateway} has listeners {sorted(got)}, "
                                        f"want {sorted(w.name for w in wanted)}")
        for want in wanted:
            ensure(want.name in got, f"Gateway {gateway} has no status for listener {want.name}")
            entry = got[want.name]
            kinds = {(k.get("group", GROUP), k.get("kind")) for k in entry.get("supportedKinds") or []}
            ensure(bool(want.kinds) or not kinds, f"listener {want.name} supportedKinds {sorted(kinds)}, want none")
            for kind in want.kinds:
                ensure((GROUP, kind) in kinds, f"listener {want.name} supportedKinds {sorted(kinds)} lack {kind}")
            ensure(entry.get("attachedRoutes") == want.attached,
                   f"listener {want.name} attachedRoutes {entry.get('attachedRoutes')}, want {want.attached}")
            check_conditions(f"listener {want.name}", entry.get("conditions") or [], want.conditions)
    eventually(check, f"Gateway {namespace}/{gateway} listener status")


def remove_object(s: Suite, file: str, kind: str, name: str, namespace: str) -> None:
    """Delete one object of an applied manifest file (like a kubectl delete)."""
    docs = s._docs(file)  # the Suite has no public reader of an applied file
    kept = [d for d in docs if mf.key(d) != (kind, namespace, name)]
    ensure(len(kept) < len(docs), f"{kind} {namespace}/{name} is not in {file}")
    s.apply(file, kept)


def consistently(check: Callable[[], object], what: str, timeout: float = CONSISTENCY_TIMEOUT) -> None:
    """Retry check() until it passes CONSECUTIVE_SUCCESSES times in a row."""
    streak, last = 0, "never tried"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            check()
            streak += 1
            if streak >= CONSECUTIVE_SUCCESSES:
                return
            continue
        except (CaseFailure, OSError, ValueError, grpc.RpcError) as err:
            streak, last = 0, str(err) or type(err).__name__
        time.sleep(0.1)
    raise CaseFailure(f"timed out after {timeout:.0f}s waiting for {what}: {last}")


def backend_of(pod: str) -> str:
    """The Deployment a local echo pod stands for (`<deployment>-<suffix>`)."""
    return pod.removesuffix(f"-{mf.POD_SUFFIX}")


def weighted(send_once: Callable[[], str], weights: dict[str, float], tolerance: float = 0.05,
             total: int = 500, attempts: int = 10) -> None:
    """Upstream's weight.TestWeightedDistribution: `total` requests, each backend's share
    within `tolerance` of its weight, no traffic elsewhere; retried `attempts` times."""
    problems: list[str] = []
    for _ in range(attempts):
        seen: dict[str, int] = {}
        try:
            for _ in range(total):
                backend = backend_of(send_once())
                seen[backend] = seen.get(backend, 0) + 1
        except (OSError, CaseFailure, ValueError) as err:  # a failed request fails the attempt
            problems = [f"a request failed: {err or type(err).__name__}"]
            time.sleep(0.5)
            continue
        problems = [f"unexpected backend {b}" for b in seen if b not in weights]
        active = sum(1 for w in weights.values() if w > 0)
        if len(seen) != active:
            problems.append(f"{len(seen)} backends answered, want {active}")
        for backend, want in weights.items():
            got = seen.get(backend, 0) / total
            if abs(got - want) > tolerance:
                problems.append(f"{backend} got {got:.0%}, want {want:.0%} (+-{tolerance:.0%})")
        if not problems:
            return
    raise CaseFailure(f"weighted distribution never within tolerance: {'; '.join(problems)}")


# --- gRPC ----------------------------------------------------------------------------------


@dataclass
class GrpcExp:
    """One RPC and what must come back (upstream's grpc.ExpectedResponse)."""

    method: str = "Echo"  # Echo | EchoTwo | EchoThree
    authority: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    code: grpc.StatusCode = grpc.StatusCode.OK
    backend: str = ""
    namespace: str = INFRA


def grpc_call(address: str, exp: GrpcExp, timeout: float = 5.0) -> tuple[grpc.StatusCode, Any]:
    """One unary RPC over h2c to `address`, with the :authority and metadata of `exp`."""
    options = [("grpc.default_authority", exp.authority)] if exp.authority else []
    with grpc.insecure_channel(address, options=options) as channel:
        call = channel.unary_unary(f"/{GRPC_SERVICE}/{exp.method}",
                                   request_serializer=GRPC_MESSAGES["EchoRequest"].SerializeToString,
                                   response_deserializer=GRPC_MESSAGES["EchoResponse"].FromString)
        try:
            response = call(GRPC_MESSAGES["EchoRequest"](), timeout=timeout,
                            metadata=[(k.lower(), v) for k, v in exp.metadata.items()])
        except grpc.RpcError as err:
            return err.code(), None
        return grpc.StatusCode.OK, response


def grpc_check(address: str, exp: GrpcExp) -> str:
    """Send once and compare like upstream's grpc compareResponse; return the pod."""
    code, response = grpc_call(address, exp)
    ensure(code == exp.code, f"{exp.method} {exp.metadata} authority {exp.authority!r}: code {code.name}, "
                             f"want {exp.code.name}")
    if code != grpc.StatusCode.OK:
        return ""
    method = f"/{GRPC_SERVICE}/{exp.method}"
    ensure(response.assertions.fully_qualified_method == method,
           f"the backend served {response.assertions.fully_qualified_method!r}, want {method!r}")
    context = response.assertions.context
    ensure(context.namespace == exp.namespace, f"answered from namespace {context.namespace!r}, want {exp.namespace!r}")
    ensure(context.pod.startswith(exp.backend), f"answered by pod {context.pod!r}, want {exp.backend}-*")
    return str(context.pod)


def expect_grpc(address: str, *cases: GrpcExp) -> None:
    for exp in cases:
        consistently(functools.partial(grpc_check, address, exp),
                     f"{exp.method} {exp.metadata} authority {exp.authority!r} to {address}")


# --- TCP (echo-basic's TCP server) ----------------------------------------------------------


def _connect(address: str, ca: bytes | None, sni: str | None, timeout: float) -> socket.socket:
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout)
    if sni is None:
        return sock
    ctx = ssl.create_default_context(cadata=ca.decode() if ca else None)
    ctx.check_hostname = False  # one CA signs every certificate of the run; the SNI is what matters
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        return ctx.wrap_socket(sock, server_hostname=sni)
    except (OSError, ssl.SSLError):
        sock.close()
        raise


def tcp_exchange(address: str, ca: bytes | None = None, sni: str | None = None,
                 timeout: float = 5.0) -> tuple[bool, dict[str, Any]]:
    """Upstream's WaitForValidTCPResponse, once: welcome line, PING, IS_TLS, TEST.
    `sni` set: TLS to the Gateway with that server name. Returns (IS_TLS, TEST payload)."""
    sock = _connect(address, ca, sni, timeout)
    try:
        reader = sock.makefile("rb")
        ensure(reader.readline() == TCP_WELCOME, "no echo-basic TCP welcome line")
        sock.sendall(b"PING\n")
        ensure(reader.readline() == b"PONG\n", "PING not answered with PONG")
        sock.sendall(b"IS_TLS\n")
        is_tls = reader.readline().strip() == b"true"
        sock.sendall(b"TEST\n")
        line = reader.readline()
        ensure(bool(line), "no answer to TEST")
        return is_tls, json.loads(line)
    finally:
        sock.close()


def expect_tcp(s: Suite, address: str, backend: str, namespace: str = INFRA, sni: str | None = None,
               backend_tls: bool = False, hostname: str = "") -> None:
    """Upstream's MakeTCPRequestAndExpectEventuallyValidResponse."""
    def check() -> None:
        is_tls, payload = tcp_exchange(address, s.certs.ca.pem, sni)
        ensure(is_tls == backend_tls, f"backend IS_TLS {is_tls}, want {backend_tls}")
        ensure(payload.get("namespace") == namespace, f"namespace {payload.get('namespace')!r}, want {namespace!r}")
        pod = str(payload.get("pod", ""))
        ensure(pod.startswith(f"{backend}-"), f"answered by pod {pod!r}, want {backend}-*")
        if hostname:
            got = (payload.get("tls") or {}).get("serverName")
            ensure(got == hostname, f"backend saw SNI {got!r}, want {hostname!r}")
    consistently(check, f"a TCP exchange through {address} with {backend}")


def tcp_pod_once(address: str, timeout: float = 5.0) -> str:
    """Upstream's tcp.EchoSendOnce: the pod answering TEST on a fresh connection."""
    sock = _connect(address, None, None, timeout)
    try:
        reader = sock.makefile("rb")
        ensure(reader.readline() == TCP_WELCOME, "no echo-basic TCP welcome line")
        sock.sendall(b"TEST\n")
        pod = str(json.loads(reader.readline()).get("pod", ""))
        ensure(bool(pod), "TEST answer without a pod")
        return pod
    finally:
        sock.close()


def expect_tls_refused(address: str, sni: str) -> None:
    """Upstream's MakeTLSRequestAndExpectEventuallyConnectionReset: the TLS handshake
    (or the first exchange) fails, consistently."""
    def check() -> None:
        try:
            sock = _connect(address, None, sni, 3.0)
        except (OSError, ssl.SSLError):
            return
        sock.close()
        raise CaseFailure(f"a TLS handshake with SNI {sni} to {address} succeeded")
    consistently(check, f"TLS connections with SNI {sni} to {address} to be refused")


# --- UDP ----------------------------------------------------------------------------------


def udp_echo_once(address: str, payload: bytes = b"gateway-api-conformance-udp-echo",
                  timeout: float = 2.0) -> dict[str, Any]:
    """One datagram to echo-basic's UDP server through the Gateway, its JSON answer."""
    host, _, port = address.rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.connect((host, int(port)))
        sock.send(payload)
        answer: dict[str, Any] = json.loads(sock.recv(4096))
        return answer


def expect_udp(address: str, service: str = "", namespace: str = "") -> None:
    """Upstream's udp.ExpectEchoResponseFromBackend (service/namespace checked when set)."""
    def check() -> None:
        answer = udp_echo_once(address)
        ensure(not service or answer.get("service") == service,
               f"answered by service {answer.get('service')!r}, want {service!r}")
        ensure(not namespace or answer.get("namespace") == namespace,
               f"answered from namespace {answer.get('namespace')!r}, want {namespace!r}")
    eventually(check, f"a UDP echo through {address}", CONSISTENCY_TIMEOUT)


def dns_query(address: str, domain: str = "foo.bar.com.", timeout: float = 2.0) -> bytes:
    """An A query (like miekg/dns Exchange) through the Gateway; the raw answer."""
    host, _, port = address.rpartition(":")
    question = b"".join(bytes([len(p)]) + p.encode() for p in domain.strip(".").split(".")) + b"\x00"
    query = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + question + struct.pack("!HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.connect((host, int(port)))
        sock.send(query)
        answer = sock.recv(4096)
    ensure(answer[:2] == b"\x12\x34" and answer[2] & 0x80 != 0, "the answer is not a DNS response to the query")
    return answer
