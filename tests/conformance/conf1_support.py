"""Checks of Gateway and ListenerSet status, and TLS requests with client certificates,
for the gateway and listenerset cases (upstream's GatewayStatusMustHaveListeners,
GatewayMustHaveAttachedListeners, ListenerSetMustHaveCondition,
ListenerSetStatusMustHaveListeners, RoutesAndParentMustBeAccepted, tls.MakeTLSRequest...).

Listener status is compared as upstream does: the expected supported kinds must be
among the reported ones (an implementation may support more), and an empty
expectation means none may be reported.
"""

from __future__ import annotations

import dataclasses
import http.client
from typing import Any

from tests.certs import CA
from tests.conformance import manifests as mf
from tests.conformance.suite import (
    ACCEPTED,
    CONSISTENCY_TIMEOUT,
    GROUP,
    INFRA,
    LISTENER_READY,
    WEB,
    Answer,
    CaseFailure,
    Cond,
    Exp,
    Listener,
    Ref,
    Suite,
    check_conditions,
    compare,
    consistently,
    ensure,
    eventually,
    send,
)

LISTENER_SET = "ListenerSet"


def ls_ref(name: str, namespace: str = INFRA) -> Ref:
    return Ref(name, namespace, kind=LISTENER_SET)


def _latest(what: str, obj: dict[str, Any]) -> None:
    """Upstream's ConditionsHaveLatestObservedGeneration."""
    generation = obj["metadata"].get("generation")
    for c in (obj.get("status") or {}).get("conditions") or []:
        ensure(c.get("observedGeneration") == generation,
               f"{what} condition {c.get('type')} is of generation {c.get('observedGeneration')}, not {generation}")


def latest_conditions(s: Suite, ref: Ref) -> dict[str, Any]:
    """Upstream's GatewayMustHaveLatestConditions (also for a ListenerSet or GatewayClass ref)."""
    def check() -> dict[str, Any]:
        obj = s.get(ref.kind, ref.name, ref.namespace)
        conds = (obj.get("status") or {}).get("conditions") or []
        ensure(bool(conds), f"{ref.kind} {ref.namespace}/{ref.name} has no conditions yet")
        _latest(f"{ref.kind} {ref.namespace}/{ref.name}", obj)
        return obj
    return eventually(check, f"{ref.kind} {ref.namespace}/{ref.name} to have conditions of its latest generation")


def condition(s: Suite, ref: Ref, cond: Cond) -> None:
    """Upstream's GatewayMustHaveCondition / ListenerSetMustHaveCondition: latest conditions, this one among them."""
    def check() -> None:
        obj = s.get(ref.kind, ref.name, ref.namespace)
        _latest(f"{ref.kind} {ref.namespace}/{ref.name}", obj)
        check_conditions(f"{ref.kind} {ref.namespace}/{ref.name}",
                         (obj.get("status") or {}).get("conditions") or [], [cond])
    eventually(check, f"{ref.kind} {ref.namespace}/{ref.name} to have {cond}")


def attached_listener_sets(s: Suite, ref: Ref, count: int) -> None:
    """Upstream's GatewayMustHaveAttachedListeners (an absent count is 0)."""
    def check() -> None:
        gw = s.get("Gateway", ref.name, ref.namespace)
        _latest(f"Gateway {ref.name}", gw)
        got = (gw.get("status") or {}).get("attachedListenerSets") or 0
        ensure(got == count, f"Gateway {ref.name} attachedListenerSets {got}, want {count}")
    eventually(check, f"Gateway {ref.namespace}/{ref.name} to have {count} attached ListenerSets")


def _listener_status(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in (obj.get("status") or {}).get("listeners") or []}


def listeners_have(s: Suite, ref: Ref, conds: tuple[Cond, ...], *names: str) -> None:
    """Upstream's GatewayListenersMustHaveConditions / ListenerSetListenersMustHaveConditions:
    the named listeners (every listener when none is named) have these conditions."""
    def check() -> None:
        obj = s.get(ref.kind, ref.name, ref.namespace)
        _latest(f"{ref.kind} {ref.name}", obj)
        got = _listener_status(obj)
        for name in names or tuple(got):
            ensure(name in got, f"{ref.kind} {ref.name} has no status for listener {name} (has {sorted(got)})")
            check_conditions(f"{ref.kind} {ref.name} listener {name}", got[name].get("conditions") or [], conds)
    eventually(check, f"listeners {names or 'all'} of {ref.kind} {ref.namespace}/{ref.name} to have {conds}")


def listeners_are(s: Suite, ref: Ref, expected: list[Listener]) -> None:
    """Upstream's GatewayStatusMustHaveListeners / ListenerSetStatusMustHaveListeners:
    exactly these listeners, each supporting at least the expected kinds (none when the
    expectation is empty), with these attached route counts and conditions."""
    def check() -> None:
        got = _listener_status(s.get(ref.kind, ref.name, ref.namespace))
        ensure(set(got) == {e.name for e in expected},
               f"{ref.kind} {ref.name} listeners {sorted(got)}, want {sorted(e.name for e in expected)}")
        for want in expected:
            entry = got[want.name]
            kinds = {k.get("kind", "") for k in entry.get("supportedKinds") or []
                     if k.get("group", GROUP) == GROUP}
            if want.kinds is not None:
                ensure(set(want.kinds) <= kinds if want.kinds else not kinds,
                       f"listener {want.name} supportedKinds {sorted(kinds)}, want {sorted(want.kinds) or 'none'}")
            if want.attached is not None:
                ensure(entry.get("attachedRoutes") == want.attached,
                       f"listener {want.name} attachedRoutes {entry.get('attachedRoutes')}, want {want.attached}")
            check_conditions(f"{ref.kind} {ref.name} listener {want.name}", entry.get("conditions") or [],
                             want.conditions)
    eventually(check, f"{ref.kind} {ref.namespace}/{ref.name} listener status")


def parent_accepted(s: Suite, route: str, parent: Ref, kind: str = "HTTPRoute") -> None:
    """The route's status has an entry for this parent (whatever sectionName the route's
    parentRef names, as upstream's GatewayRef without listener names), Accepted, of the
    route's latest generation, written by our controller."""
    route_condition(s, route, parent, ACCEPTED, kind, controller=True)


def routes_accepted_by(s: Suite, parent: Ref, *routes: str, kind: str = "HTTPRoute") -> None:
    """Upstream's RoutesAndParentMustBeAccepted: each route (`ns/name` or a name in the
    parent's namespace) is Accepted by the parent, whose listeners are all ready."""
    for route in routes:
        parent_accepted(s, route if "/" in route else f"{parent.namespace}/{route}", parent, kind)
    listeners_have(s, parent, LISTENER_READY)


def gateway_routes_accepted(s: Suite, gateway: Ref, *routes: str) -> str:
    """Upstream's GatewayAndHTTPRoutesMustBeAccepted: the Gateway's address, each route
    Accepted by it, every listener of the Gateway ready."""
    address = s.gateway_address(gateway)
    routes_accepted_by(s, gateway, *routes)
    return address


def route_condition(s: Suite, route: str, parent: Ref, cond: Cond, kind: str = "HTTPRoute",
                    controller: bool = False) -> None:
    """Upstream's HTTPRouteMustHaveCondition, telling a ListenerSet parent from a Gateway one."""
    ns, _, name = route.rpartition("/")
    ns = ns or INFRA

    def check() -> None:
        obj = s.get(kind, name, ns)
        entries = [p for p in (obj.get("status") or {}).get("parents") or []
                   if (p.get("parentRef") or {}).get("name") == parent.name
                   and (p.get("parentRef") or {}).get("kind", "Gateway") == parent.kind
                   and (p.get("parentRef") or {}).get("namespace", ns) == parent.namespace]
        ensure(bool(entries), f"{kind} {ns}/{name} has no parent status for {parent.kind} {parent.name}")
        ensure(not controller or entries[0].get("controllerName") == s.controller,
               f"{kind} {ns}/{name} parent controllerName {entries[0].get('controllerName')!r}")
        check_conditions(f"{kind} {ns}/{name} parent {parent.kind} {parent.name}",
                         entries[0].get("conditions") or [], [cond], obj["metadata"].get("generation"))
    eventually(check, f"{kind} {ns}/{name} to have {cond} for {parent.kind} {parent.name}")


# --- TLS with client certificates -----------------------------------------------------------

ClientCert = tuple[bytes, bytes]  # (certificate PEM, key PEM)


def tls_send(address: str, exp: Exp, ca: bytes, client: ClientCert | None, timeout: float = 5.0) -> Answer:
    """One HTTPS request with SNI = Host, trusting `ca`, presenting `client` if given."""
    return send(address, dataclasses.replace(exp, scheme="https", sni=exp.host), ca, timeout, client=client)


def expect_tls(s: Suite, address: str, exp: Exp, client: ClientCert | None,
               timeout: float = CONSISTENCY_TIMEOUT) -> None:
    """Upstream's tls.MakeTLSRequestAndExpectEventuallyConsistentResponse."""
    consistently(lambda: tls_send(address, exp, s.certs.ca.pem, client), lambda answer: compare(exp, answer, address),
                 f"HTTPS {exp.describe()} to {address}", timeout)


def expect_tls_failure(s: Suite, address: str, exp: Exp, client: ClientCert | None) -> None:
    """Upstream's tls.MakeTLSRequestAndExpectFailureResponse: the handshake or request fails."""
    try:
        answer = tls_send(address, exp, s.certs.ca.pem, client)
    except (OSError, http.client.HTTPException):
        return
    raise CaseFailure(f"HTTPS {exp.describe()} to {address} succeeded with {answer.status}, want a TLS failure")


# --- Secrets and ConfigMaps the Go suite creates at setup -----------------------------------------


def client_validation_docs(s: Suite) -> list[dict[str, Any]]:
    """The CA ConfigMaps and client certificates of the frontend client validation tests:
    one CA for the default configuration, another for the per-port one (so a client
    certificate of one is refused by the other)."""
    docs: list[dict[str, Any]] = []
    for prefix in ("tls-validity-checks", "tls-validity-checks-per-port"):
        ca = CA(f"{prefix} client CA")
        pair = ca.issue("client.example.org", ["client.example.org"])
        s.certs.issued[(INFRA, f"{prefix}-client-certificate")] = pair
        docs.append(mf.tls_secret(INFRA, f"{prefix}-client-certificate", *pair))
        docs.append(mf.ca_configmap(INFRA, f"{prefix}-ca-certificate", ca.pem))
    docs.append(mf.ca_configmap(WEB, "web-backend-cm", s.certs.ca.pem))
    return docs
