"""The conformance suite's machinery: one `lychgate run`, echo pods, and the checks
upstream's Go helpers make (conditions, route parents, eventually-consistent requests).

Waits poll the control plane's /api/v1/objects every 50 ms and are bounded by the
timeouts below (upstream's defaults are minutes; a local control plane settles in
well under a second, so shorter bounds keep a failing run short).
"""

from __future__ import annotations

import copy
import http.client
import json
import socket
import ssl
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from tests.conformance import manifests as mf
from tests.conformance.echo import EchoPods
from tests.harness import Lychgate

T = TypeVar("T")

GROUP = "gateway.networking.k8s.io"
INFRA = "gateway-conformance-infra"
APP = "gateway-conformance-app-backend"
WEB = "gateway-conformance-web-backend"

STATUS_TIMEOUT = 20.0  # a condition the control plane must reach
CONSISTENCY_TIMEOUT = 15.0  # traffic that must follow the status (upstream: 30 s)
CONSECUTIVE_SUCCESSES = 3  # as upstream's RequiredConsecutiveSuccesses
POLL = 0.05


class CaseFailure(AssertionError):
    """A conformance expectation that did not hold."""


def consistently(request: Callable[[], Answer], check: Callable[[Answer], None], what: str,
                 timeout: float = CONSISTENCY_TIMEOUT) -> None:
    """Upstream's MakeRequestAndExpectEventuallyConsistentResponse: `check` must hold for
    CONSECUTIVE_SUCCESSES answers in a row before `timeout`."""
    streak, last = 0, "no request sent"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            check(request())
            streak += 1
            if streak >= CONSECUTIVE_SUCCESSES:
                return
            continue
        except (CaseFailure, OSError, http.client.HTTPException) as err:
            streak, last = 0, str(err) or type(err).__name__
        time.sleep(POLL)
    raise CaseFailure(f"{what}: {last}")


def eventually(check: Callable[[], T], what: str, timeout: float = STATUS_TIMEOUT) -> T:
    """Retry check() until it returns without raising; fail with its last complaint."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, OSError, httpx.HTTPError, KeyError, ValueError) as err:
            if time.monotonic() >= deadline:
                raise CaseFailure(f"timed out after {timeout:.0f}s waiting for {what}: {err}") from None
        time.sleep(POLL)


def ensure(ok: bool, message: str) -> None:
    if not ok:
        raise CaseFailure(message)


# --- status helpers ------------------------------------------------------------------


def find_condition(conditions: Iterable[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def check_conditions(what: str, conditions: list[dict[str, Any]], expected: Iterable[Cond],
                     generation: int | None = None) -> None:
    for want in expected:
        got = find_condition(conditions, want.type)
        ensure(got is not None, f"{what}: no {want.type} condition (has {[c.get('type') for c in conditions]})")
        assert got is not None
        ensure(got.get("status") == want.status,
               f"{what}: {want.type} is {got.get('status')} ({got.get('reason')}: {got.get('message')}), "
               f"want {want.status}")
        ensure(not want.reason or got.get("reason") == want.reason,
               f"{what}: {want.type} reason is {got.get('reason')!r}, want {want.reason!r}")
        ensure(generation is None or got.get("observedGeneration") == generation,
               f"{what}: {want.type} observedGeneration {got.get('observedGeneration')} is not {generation}")


@dataclass(frozen=True)
class Cond:
    type: str
    status: str = "True"
    reason: str = ""  # "" = any reason


ACCEPTED = Cond("Accepted", "True", "Accepted")
RESOLVED = Cond("ResolvedRefs", "True", "ResolvedRefs")
LISTENER_READY = (Cond("ResolvedRefs"), Cond("Accepted"), Cond("Programmed"))


@dataclass(frozen=True)
class Ref:
    """A Gateway (optionally some of its listeners) as a route parent, like upstream's GatewayRef."""

    name: str
    namespace: str = INFRA
    sections: tuple[str, ...] = ()
    kind: str = "Gateway"
    port: int | None = None


@dataclass(frozen=True)
class Parent:
    """An expected entry of a route's status.parents."""

    ref: Ref
    conditions: tuple[Cond, ...] = (ACCEPTED,)
    section: str | None = None


@dataclass
class Listener:
    """An expected entry of a Gateway's status.listeners."""

    name: str
    kinds: tuple[str, ...] | None = None  # supportedKinds (group gateway.networking.k8s.io)
    conditions: tuple[Cond, ...] = ()
    attached: int | None = None


# --- requests ---------------------------------------------------------------------


@dataclass
class Exp:
    """One request and what must come back (upstream's http.ExpectedResponse)."""

    path: str = "/"
    host: str = ""
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    status: int | tuple[int, ...] = 200
    backend: str = ""
    namespace: str = INFRA
    # The request the backend must see; fields left None are those of the request sent.
    seen_path: str | None = None
    seen_host: str | None = None
    seen_method: str | None = None
    seen_headers: dict[str, str] | None = None
    seen_absent: tuple[str, ...] = ()
    response_headers: dict[str, str] | None = None  # exact values
    response_valid: dict[str, tuple[str, ...]] | None = None  # upstream's ValidHeaderValues: one of
    ignore_whitespace: bool = False  # for response_valid, as upstream's IgnoreWhitespace
    response_absent: tuple[str, ...] = ()
    redirect_scheme: str = ""
    redirect_host: str = ""
    redirect_port: str = ""
    redirect_path: str = ""
    expects_redirect: bool = False
    scheme: str = "http"
    sni: str | None = None  # for https; default: the Host
    body: bytes | None = None

    def describe(self) -> str:
        host = f" Host {self.host}" if self.host else ""
        return f"{self.method} {self.path}{host}" + (f" {self.headers}" if self.headers else "")


@dataclass
class Answer:
    status: int
    headers: dict[str, list[str]]  # lower-case names
    body: bytes

    def json(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.body)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def send(address: str, exp: Exp, ca: bytes | None = None, timeout: float = 5.0,
         client: tuple[bytes, bytes] | None = None) -> Answer:
    """One request to `address` (host:port) as Go's client would send it; redirects not
    followed. `client`: the (certificate, key) PEM an HTTPS client presents."""
    ip, _, port = address.rpartition(":")
    host_header = exp.host or (ip if int(port) == default_port(exp.scheme) else address)
    if exp.scheme == "https":
        ctx = ssl.create_default_context(cadata=ca.decode() if ca else None)
        ctx.check_hostname = False
        if ca is None:
            ctx.verify_mode = ssl.CERT_NONE
        if client is not None:
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp, "c.crt"), Path(tmp, "c.key")
                cert.write_bytes(client[0])
                key.write_bytes(client[1])
                ctx.load_cert_chain(cert, key)
        sni = exp.sni if exp.sni is not None else host_header.split(":")[0]
        conn: http.client.HTTPConnection = _SniHTTPSConnection(ip, int(port), sni, ctx, timeout)
    else:
        conn = http.client.HTTPConnection(ip, int(port), timeout=timeout)
    try:
        headers = {"Host": host_header, "User-Agent": "lychgate-conformance", **exp.headers}
        conn.request(exp.method, exp.path, body=exp.body, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        out: dict[str, list[str]] = {}
        for name, value in resp.getheaders():
            out.setdefault(name.lower(), []).append(value)
        return Answer(resp.status, out, body)
    finally:
        conn.close()


class _SniHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to an IP with a chosen SNI (http.client sends the connect host otherwise)."""

    def __init__(self, ip: str, port: int, sni: str, ctx: ssl.SSLContext, timeout: float) -> None:
        super().__init__(ip, port, timeout=timeout, context=ctx)
        self._sni = sni
        self._ctx = ctx

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._ctx.wrap_socket(sock, server_hostname=self._sni or None)


def captured(exp: Exp, answer: Answer) -> dict[str, Any]:
    """Upstream's CaptureRoundTrip: the request the echo backend describes, read only when
    the answer is `application/json`; an answer the gateway made itself (a CORS preflight,
    a direct response) captures nothing but the method that was sent."""
    if (answer.headers.get("content-type") or [""])[0] != "application/json":
        return {"method": exp.method}
    echo = answer.json()
    ensure(echo is not None, f"the answer says application/json but is not a JSON object: {answer.body[:200]!r}")
    assert echo is not None
    return echo


def _squash(value: str, ignore_whitespace: bool) -> str:
    return "".join(value.split()) if ignore_whitespace else value


def compare_response_headers(exp: Exp, answer: Answer) -> None:
    """Upstream's Response.Headers (exact), ValidHeaderValues (one of) and AbsentHeaders.
    Upstream judges them on a 200 only; here on every status, which is stricter."""
    for name, value in (exp.response_headers or {}).items():
        ensure(name.lower() in answer.headers, f"response has no header {name} ({sorted(answer.headers)})")
        got = ",".join(answer.headers[name.lower()])
        ensure(got == value, f"response header {name} is {got!r}, want {value!r}")
    for name, values in (exp.response_valid or {}).items():
        ensure(name.lower() in answer.headers, f"response has no header {name} ({sorted(answer.headers)})")
        got = ",".join(answer.headers[name.lower()])
        ensure(_squash(got, exp.ignore_whitespace) in {_squash(v, exp.ignore_whitespace) for v in values},
               f"response header {name} is {got!r}, want one of {list(values)}")
    for name in exp.response_absent:
        ensure(name.lower() not in answer.headers,
               f"response has header {name}: {answer.headers.get(name.lower())}, want none")


def compare(exp: Exp, answer: Answer, address: str) -> None:
    """Upstream's CompareRoundTrip: raise CaseFailure describing the first mismatch.

    On a 200 the request the backend saw must be the expected one, field by field and
    exactly (an empty expected path or namespace means the gateway itself answered: a
    200 from a backend then fails, as upstream)."""
    wanted = exp.status if isinstance(exp.status, tuple) else (exp.status,)
    ensure(answer.status in wanted, f"status {answer.status}, want {exp.status} "
                                    f"(body {answer.body[:200]!r})")
    compare_response_headers(exp, answer)
    if answer.status == 200:
        echo = captured(exp, answer)
        path = exp.seen_path if exp.seen_path is not None else exp.path
        method = exp.seen_method or exp.method
        host = exp.seen_host if exp.seen_host is not None else exp.host
        ensure(not host or echo.get("host") == host, f"backend saw host {echo.get('host')!r}, want {host!r}")
        ensure(echo.get("path", "") == path, f"backend saw path {echo.get('path')!r}, want {path!r}")
        ensure(echo.get("method") == method, f"backend saw method {echo.get('method')!r}, want {method!r}")
        ensure(echo.get("namespace", "") == exp.namespace,
               f"answered from namespace {echo.get('namespace')!r} (pod {echo.get('pod')}), want {exp.namespace!r}")
        seen = {k.lower(): v for k, v in (echo.get("headers") or {}).items()}
        for name, value in (exp.seen_headers if exp.seen_headers is not None else exp.headers).items():
            ensure(name.lower() in seen, f"backend did not see header {name} (saw {sorted(seen)})")
            ensure(",".join(seen[name.lower()]) == value,
                   f"backend saw {name}: {','.join(seen[name.lower()])!r}, want {value!r}")
        for name in exp.seen_absent:
            ensure(name.lower() not in seen, f"backend saw header {name}: {seen.get(name.lower())}, want none")
        pod = str(echo.get("pod", ""))
        ensure(pod.startswith(exp.backend), f"answered by pod {pod!r}, want {exp.backend}-*")
    elif 300 <= answer.status < 400 and exp.expects_redirect:
        location = (answer.headers.get("location") or [""])[0]
        ensure(bool(location), "redirect without a Location header")
        loc = urlsplit(location)
        got_host, got_port = loc.hostname or "", str(loc.port or "")
        want_host = exp.redirect_host or got_host
        ensure(got_host == want_host, f"redirect host {got_host!r}, want {want_host!r} ({location})")
        scheme = (loc.scheme or "").lower()
        if not exp.redirect_port:
            ensure(not (scheme == "http" and got_port not in ("", "80")),
                   f"redirect port {got_port!r} for http, want 80 or none ({location})")
            ensure(not (scheme == "https" and got_port not in ("", "443")),
                   f"redirect port {got_port!r} for https, want 443 or none ({location})")
        else:
            ensure(got_port == exp.redirect_port, f"redirect port {got_port!r}, want {exp.redirect_port!r} ({location})")
        want_scheme = exp.redirect_scheme or exp.scheme
        ensure(loc.scheme == want_scheme, f"redirect scheme {loc.scheme!r}, want {want_scheme!r} ({location})")
        want_path = exp.redirect_path or exp.path.split("?")[0]
        ensure(loc.path == want_path, f"redirect path {loc.path!r}, want {want_path!r} ({location})")


# --- the suite --------------------------------------------------------------------------



def known_objects(lg: Lychgate, kind: str, namespace: str | None = None,
                  name: str | None = None) -> list[dict[str, Any]]:
    """The objects lychgate holds, none for a kind it does not know (the suites ask for
    kinds a case may bring that lychgate does not serve)."""
    try:
        return lg.objects(kind, namespace, name)
    except httpx.HTTPStatusError as err:
        if err.response.status_code == 400:
            return []
        raise

class Suite:
    """One lychgate control plane with the base manifests applied, shared by all cases."""

    def __init__(self, root: Path) -> None:
        self.lg = Lychgate(root)
        self.pods = EchoPods()
        self.certs = mf.Certificates()
        self.backends = mf.Backends(self.pods, self.certs)
        self.controller = ""
        self.supported: frozenset[str] = frozenset()
        self._files: dict[str, list[tuple[str, str, str]]] = {}

    # --- lifecycle -----------------------------------------------------------------

    def start(self) -> Suite:
        self.lg.start()
        gc = eventually(lambda: self._accepted_class(), "GatewayClass lychgate to be accepted")
        self.controller = gc["spec"]["controllerName"]
        self.supported = frozenset(f["name"] for f in gc.get("status", {}).get("supportedFeatures") or [])
        self.apply("base", mf.load("base/manifests.yaml") + mf.base_secrets(self.certs))
        return self

    def _accepted_class(self) -> dict[str, Any]:
        gc = self.lg.objects("GatewayClass", name=mf.GATEWAY_CLASS)[0]
        check_conditions("GatewayClass lychgate", gc.get("status", {}).get("conditions") or [], [Cond("Accepted")])
        return gc

    def close(self) -> None:
        self.lg.close()
        self.pods.close()

    # --- manifests -----------------------------------------------------------------

    def apply(self, name: str, docs: list[dict[str, Any]]) -> None:
        """Write (or rewrite) one manifest file; Deployments become local echo pods."""
        docs = self.backends.localize(docs)
        self._files[name] = [mf.key(d) for d in docs]
        self.lg.write(f"{name}.yaml", mf.dump(docs))

    def case_files(self) -> list[str]:
        """The files applied since the base manifests (what a case must clean up)."""
        return [name for name in self._files if name != "base"]

    def delete(self, name: str, timeout: float = STATUS_TIMEOUT) -> None:
        """Remove a manifest file and wait until its objects are gone."""
        keys = self._files.pop(name, [])
        path = self.lg.manifests / f"{name}.yaml"
        if path.exists():
            self.lg.delete(f"{name}.yaml")

        def gone() -> None:
            for kind, ns, obj in keys:
                ensure(not self.objects(kind, ns, obj), f"{kind} {ns}/{obj} still exists")

        eventually(gone, f"the objects of {name} to be deleted", timeout)

    def objects(self, kind: str, namespace: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        return known_objects(self.lg, kind, namespace, name)

    def get(self, kind: str, name: str, namespace: str = INFRA) -> dict[str, Any]:
        items = self.objects(kind, namespace, name)
        ensure(bool(items), f"{kind} {namespace}/{name} not found")
        return items[0]

    def mutate(self, file: str, kind: str, name: str, namespace: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Edit one object of an applied file (like a kubectl edit) and rewrite the file."""
        docs = [d for d in (self._docs(file))]
        for doc in docs:
            if mf.key(doc) == (kind, namespace, name):
                change(doc)
                break
        else:
            raise CaseFailure(f"{kind} {namespace}/{name} is not in {file}")
        self.apply(file, docs)

    def _docs(self, file: str) -> list[dict[str, Any]]:
        import yaml

        text = (self.lg.manifests / f"{file}.yaml").read_text()
        return [copy.deepcopy(d) for d in yaml.safe_load_all(text) if d]

    # --- Gateways ----------------------------------------------------------------------

    def gateway_address(self, ref: Ref) -> str:
        """Upstream's WaitForGatewayAddress: latest conditions and an address; host:port of
        the first listener (or the first named section)."""
        def check() -> str:
            gw = self.get("Gateway", ref.name, ref.namespace)
            status = gw.get("status") or {}
            generation = gw["metadata"].get("generation")
            for c in status.get("conditions") or []:
                ensure(c.get("observedGeneration") == generation,
                       f"Gateway {ref.name} condition {c.get('type')} is not of generation {generation}")
            listeners = gw["spec"]["listeners"]
            port = listeners[0]["port"]
            for spec in listeners:
                if ref.sections and spec["name"] == ref.sections[0]:
                    port = spec["port"]
            address = next((a["value"] for a in status.get("addresses") or []
                            if a.get("type", "IPAddress") in ("IPAddress", "Hostname")), None)
            ensure(address is not None, f"Gateway {ref.namespace}/{ref.name} has no address yet")
            return f"{address}:{port}"

        return eventually(check, f"Gateway {ref.namespace}/{ref.name} to get an address")

    def gateway_conditions(self, ref: Ref, *conds: Cond) -> None:
        """Upstream's GatewayMustHaveLatestConditions / GatewayMustHaveCondition."""
        def check() -> None:
            gw = self.get("Gateway", ref.name, ref.namespace)
            check_conditions(f"Gateway {ref.namespace}/{ref.name}", (gw.get("status") or {}).get("conditions") or [],
                             conds, gw["metadata"].get("generation"))
        eventually(check, f"Gateway {ref.namespace}/{ref.name} conditions {conds}")

    def listeners_ready(self, ref: Ref, conds: tuple[Cond, ...] = LISTENER_READY) -> None:
        """Upstream's GatewayListenersMustHaveConditions: every listener has them."""
        def check() -> None:
            gw = self.get("Gateway", ref.name, ref.namespace)
            listeners = (gw.get("status") or {}).get("listeners") or []
            ensure(bool(listeners), f"Gateway {ref.name} has no listener status")
            for listener in listeners:
                check_conditions(f"Gateway {ref.name} listener {listener.get('name')}",
                                 listener.get("conditions") or [], conds)
        eventually(check, f"the listeners of Gateway {ref.namespace}/{ref.name} to be ready")

    def listeners_status(self, ref: Ref, expected: list[Listener]) -> None:
        """Upstream's GatewayStatusMustHaveListeners: the exact set of listeners, their
        supported kinds, conditions and attached route counts."""
        def check() -> None:
            gw = self.get("Gateway", ref.name, ref.namespace)
            got = {entry["name"]: entry for entry in (gw.get("status") or {}).get("listeners") or []}
            ensure(set(got) == {e.name for e in expected},
                   f"Gateway {ref.name} listeners {sorted(got)}, want {sorted(e.name for e in expected)}")
            for want in expected:
                entry = got[want.name]
                if want.kinds is not None:
                    # As upstream: the expected kinds must be listed (an implementation may
                    # support more), and an empty expectation means none.
                    kinds = sorted(k.get("kind", "") for k in entry.get("supportedKinds") or [])
                    ensure(set(want.kinds) <= set(kinds) and (bool(want.kinds) or not kinds),
                           f"listener {want.name} supportedKinds {kinds}, want {sorted(want.kinds)}")
                if want.attached is not None:
                    ensure(entry.get("attachedRoutes") == want.attached,
                           f"listener {want.name} attachedRoutes {entry.get('attachedRoutes')}, want {want.attached}")
                check_conditions(f"listener {want.name}", entry.get("conditions") or [], want.conditions)
        eventually(check, f"Gateway {ref.namespace}/{ref.name} listener status")

    def attached_routes(self, ref: Ref, listener: str, count: int) -> None:
        def check() -> None:
            gw = self.get("Gateway", ref.name, ref.namespace)
            got = {e["name"]: e.get("attachedRoutes") for e in (gw.get("status") or {}).get("listeners") or []}
            ensure(got.get(listener) == count, f"listener {listener} attachedRoutes {got.get(listener)}, want {count}")
        eventually(check, f"Gateway {ref.name} listener {listener} to have {count} attached routes")

    # --- routes --------------------------------------------------------------------------

    def route_parents(self, kind: str, name: str, namespace: str, parents: list[Parent],
                      namespace_required: bool = True, exact: bool = True) -> None:
        """Upstream's RouteMustHaveParents: these parents (exactly these unless `exact` is
        off, for a route that also has other Gateways), with these conditions (of the
        route's latest generation), set by our controller."""
        def check() -> None:
            route = self.get(kind, name, namespace)
            generation = route["metadata"].get("generation")
            got = (route.get("status") or {}).get("parents") or []
            ensure(not exact or len(got) == len(parents), f"{kind} {name} has {len(got)} parents, want {len(parents)}: "
                                             f"{[p.get('parentRef') for p in got]}")
            for want in parents:
                match = [p for p in got if self._parent_matches(p, want, namespace, namespace_required)]
                ensure(bool(match), f"{kind} {name}: no parent {want.ref.name}/{want.section} in "
                                    f"{[p.get('parentRef') for p in got]}")
                entry = match[0]
                ensure(entry.get("controllerName") == self.controller,
                       f"{kind} {name}: parent controllerName {entry.get('controllerName')!r}")
                check_conditions(f"{kind} {namespace}/{name} parent {want.ref.name}",
                                 entry.get("conditions") or [], want.conditions, generation)
        eventually(check, f"{kind} {namespace}/{name} parents")

    @staticmethod
    def _parent_matches(entry: dict[str, Any], want: Parent, route_ns: str, namespace_required: bool) -> bool:
        ref = entry.get("parentRef") or {}
        if ref.get("name") != want.ref.name or ref.get("kind", "Gateway") != want.ref.kind:
            return False
        if ref.get("group", GROUP) != GROUP:
            return False
        ns = ref.get("namespace")
        if namespace_required and ns != want.ref.namespace:
            return False
        if not namespace_required and ns not in (None, want.ref.namespace):
            return False
        if want.ref.port is not None and ref.get("port") != want.ref.port:
            return False
        # A parent expected without a section matches whatever section the route names.
        return want.section is None or ref.get("sectionName") == want.section

    def routes_accepted(self, ref: Ref, *routes: str, kind: str = "HTTPRoute", namespace: str = INFRA) -> str:
        """Upstream's GatewayAndRoutesMustBeAccepted: the Gateway's address, each route
        with exactly one parent entry per listed section (or one for the Gateway), each
        Accepted, every listener ready."""
        address = self.gateway_address(ref)
        for route in routes:
            route_ns, _, route_name = route.rpartition("/")
            route_ns = route_ns or namespace
            sections: tuple[str | None, ...] = ref.sections or (None,)
            self.route_parents(kind, route_name, route_ns, [Parent(ref, (ACCEPTED,), s) for s in sections],
                               namespace_required=route_ns != ref.namespace)
        self.listeners_ready(ref)
        return address

    def route_condition(self, kind: str, name: str, namespace: str, ref: Ref, cond: Cond) -> None:
        """Upstream's HTTPRouteMustHaveCondition: the parent entry for this Gateway has it."""
        def check() -> None:
            route = self.get(kind, name, namespace)
            parents = [p for p in (route.get("status") or {}).get("parents") or []
                       if (p.get("parentRef") or {}).get("name") == ref.name]
            ensure(bool(parents), f"{kind} {name} has no parent status for {ref.name}")
            check_conditions(f"{kind} {namespace}/{name}", parents[0].get("conditions") or [], [cond],
                             route["metadata"].get("generation"))
        eventually(check, f"{kind} {namespace}/{name} to have {cond}")

    def resolved_refs(self, name: str, namespace: str, ref: Ref, kind: str = "HTTPRoute") -> None:
        self.route_condition(kind, name, namespace, ref, RESOLVED)

    # --- traffic -------------------------------------------------------------------------------

    def expect(self, address: str, *cases: Exp, timeout: float = CONSISTENCY_TIMEOUT) -> None:
        """Upstream's MakeRequestAndExpectEventuallyConsistentResponse, for each case."""
        for exp in cases:
            self.expect_one(address, exp, timeout)

    def expect_one(self, address: str, exp: Exp, timeout: float = CONSISTENCY_TIMEOUT) -> None:
        consistently(lambda: send(address, exp, self.certs.ca.pem), lambda answer: compare(exp, answer, address),
                     f"{exp.describe()} to {address}", timeout)

    def backend_distribution(self, address: str, exp: Exp, count: int = 100) -> dict[str, int]:
        """How many of `count` requests each backend (pod name without the suffix) answered."""
        seen: dict[str, int] = {}
        for _ in range(count):
            answer = send(address, exp, self.certs.ca.pem)
            echo = answer.json() if answer.status == 200 else None
            pod = str((echo or {}).get("pod", answer.status)).removesuffix(f"-{mf.POD_SUFFIX}")
            seen[pod] = seen.get(pod, 0) + 1
        return seen
