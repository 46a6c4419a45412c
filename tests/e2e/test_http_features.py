"""HTTPRoute features of the Gateway API's extended conformance, through real Envoy.

Each test writes its own routes (own hostnames) into one running `lychgate run`
shared by the module, and checks what a client and the backends see: which
backend answered, mirrored copies arriving, retries counted by the backend,
CORS answers, redirect Locations, WebSocket and h2c upstreams.
"""

from __future__ import annotations

import asyncio
import collections
import textwrap
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import pytest

from tests.e2e.http_servers import Recorder, serve_h2c
from tests.harness import EchoBackends, Lychgate, free_port, service_yaml, wait_for

pytestmark = pytest.mark.e2e

GATEWAY = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: lychgate
  listeners:
    - {name: http, protocol: HTTP, port: 8080, allowedRoutes: {namespaces: {from: All}}}
    - {name: http-80, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
"""


class Stack:
    """One control plane and Envoy, recording backends v1, v2, v3 and an h2c one."""

    def __init__(self, lg: Lychgate, loop: EchoBackends) -> None:
        self.lg, self.loop = lg, loop
        self.backends = {name: self._start(Recorder(name)) for name in ("v1", "v2", "v3")}
        for name, rec in self.backends.items():
            lg.write(f"svc-{name}.yaml", service_yaml(name, 80, rec.port))
        h2c_port = free_port()
        asyncio.run_coroutine_threadsafe(serve_h2c("h2c", "127.0.0.1", h2c_port), loop.loop).result(10)
        lg.write("svc-h2c.yaml", service_yaml("h2c", 80, h2c_port, app_protocol="kubernetes.io/h2c"))
        ws = self.backends["v3"].port
        lg.write("svc-ws.yaml", service_yaml("ws", 80, ws, app_protocol="kubernetes.io/ws"))
        lg.write("gateway.yaml", GATEWAY)
        lg.start()
        self.addr = lg.address()

    def _start(self, rec: Recorder) -> Recorder:
        from aiohttp import web

        rec.port = free_port()

        async def go() -> None:
            runner = web.AppRunner(rec.app(), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", rec.port).start()
            self.loop.runners.append(runner)

        asyncio.run_coroutine_threadsafe(go(), self.loop.loop).result(10)
        return rec

    def route(self, name: str, host: str, rules: str, extra: str = "") -> None:
        self.lg.write(f"route-{name}.yaml", textwrap.dedent(f"""\
            apiVersion: gateway.networking.k8s.io/v1
            kind: HTTPRoute
            metadata: {{name: {name}}}
            spec:
              parentRefs: [{{name: gw}}]
              hostnames: [{host}]
              rules:
            """) + textwrap.indent(textwrap.dedent(rules).strip("\n"), "    ") + "\n" + textwrap.dedent(extra))

    def get(self, host: str, path: str = "/", port: int = 8080, **kwargs: Any) -> httpx.Response:
        return self.lg.get(self.addr, path, host=host, port=port, **kwargs)

    def wait(self, host: str, path: str, check: Any, what: str, port: int = 8080, **kwargs: Any) -> httpx.Response:
        last: list[httpx.Response] = []

        def attempt() -> httpx.Response | None:
            last[:] = [self.get(host, path, port=port, **kwargs)]
            return last[0] if check(last[0]) else None

        try:
            return wait_for(attempt, 10, what)
        except AssertionError as err:
            got = f"{last[0].status_code} {dict(last[0].headers)} {last[0].text[:300]!r}" if last else "nothing"
            raise AssertionError(f"{err}\nlast response: {got}\nlog tail:\n{self.lg.log()[-3000:]}") from None

    def conditions(self, route: str) -> dict[str, dict[str, Any]]:
        parents = self.lg.status("HTTPRoute", route).get("parents") or [{}]
        return {c["type"]: c for c in parents[0].get("conditions", [])}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    loop = EchoBackends()
    lg = Lychgate(tmp_path_factory.mktemp("http-features"))
    try:
        yield Stack(lg, loop)
    finally:
        lg.close()
        loop.close()


def answered_by(resp: httpx.Response) -> str | int:
    return str(resp.json()["pod"]) if resp.status_code == 200 else resp.status_code


# --- RequestMirror --------------------------------------------------------------------------


def test_mirror_sends_a_copy_with_the_rules_header_changes(stack: Stack) -> None:
    stack.route("mirror", "mirror.example.com", """
        - matches: [{path: {value: /mirror}}]
          filters:
            - type: RequestHeaderModifier
              requestHeaderModifier:
                set: [{name: X-Header-Set, value: set-overwrites-values}]
                add: [{name: X-Header-Add-Append, value: header-val-2}]
                remove: [X-Header-Remove]
            - {type: RequestMirror, requestMirror: {backendRef: {name: v2, port: 80}}}
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {value: /two-mirrors}}]
          filters:
            - {type: RequestMirror, requestMirror: {backendRef: {name: v2, port: 80}}}
            - {type: RequestMirror, requestMirror: {backendRef: {name: v3, port: 80}}}
          backendRefs: [{name: v1, port: 80}]
    """)
    headers = {"x-header-remove": "remove-val", "x-header-add-append": "append-val-1"}
    resp = stack.wait("mirror.example.com", "/mirror/one", lambda r: r.status_code == 200, "the mirror route",
                      headers=headers)
    assert answered_by(resp) == "v1"  # the mirror's answer is ignored
    primary = resp.json()["headers"]
    mirror = stack.backends["v2"]
    copy = wait_for(lambda: next((s for s in mirror.seen if s.path == "/mirror/one"), None), 5, "the mirrored copy")
    for seen in (primary, copy.headers):
        assert seen["x-header-set"] == ["set-overwrites-values"]
        assert seen["x-header-add-append"] == ["append-val-1,header-val-2"] or \
            seen["x-header-add-append"] == ["append-val-1", "header-val-2"]
        assert "x-header-remove" not in seen
    assert copy.headers["host"] == ["mirror.example.com-shadow"]  # Envoy's default, as kgateway expects

    stack.get("mirror.example.com", "/two-mirrors/x")
    for name in ("v2", "v3"):
        wait_for(lambda name=name: "/two-mirrors/x" in stack.backends[name].paths(), 5, f"the copy at {name}")
    assert "/two-mirrors/x" not in stack.backends["v1"].paths()[:-1]  # v1 got it once, as the primary


def test_traffic_policy_request_mirror_sets_the_copies_host(stack: Stack) -> None:
    """kgateway's requestMirror: disableShadowHostSuffixAppend keeps the Host as it came,
    hostRewriteLiteral replaces it; the route's own RequestMirror filter makes the copy."""
    for name, setting in (("keep-host", "disableShadowHostSuffixAppend: true"),
                          ("literal-host", "hostRewriteLiteral: shadow.internal:8080")):
        stack.route(name, f"{name}.example.com", f"""
            - matches: [{{path: {{value: /{name}}}}}]
              filters: [{{type: RequestMirror, requestMirror: {{backendRef: {{name: v2, port: 80}}}}}}]
              backendRefs: [{{name: v1, port: 80}}]
        """)
        stack.lg.write(f"policy-{name}.yaml", textwrap.dedent(f"""\
            apiVersion: gateway.lychgate.dev/v1alpha1
            kind: TrafficPolicy
            metadata: {{name: {name}}}
            spec:
              targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {name}}}]
              requestMirror: {{{setting}}}
        """))
    expected = {"keep-host": "keep-host.example.com", "literal-host": "shadow.internal:8080"}
    for name, host in expected.items():
        def copied(name: str = name, host: str = host) -> bool:
            stack.get(f"{name}.example.com", f"/{name}/x")
            return any(s.path == f"/{name}/x" and s.headers["host"] == [host] for s in stack.backends["v2"].seen)

        wait_for(copied, 10, f"a copy of /{name} with Host {host}")


def test_mirror_percent_and_fraction_copy_that_share(stack: Stack) -> None:
    stack.route("mirror-share", "share.example.com", """
        - matches: [{path: {value: /percent}}]
          filters: [{type: RequestMirror, requestMirror: {backendRef: {name: v2, port: 80}, percent: 20}}]
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {value: /fraction}}]
          filters: [{type: RequestMirror, requestMirror: {backendRef: {name: v3, port: 80}, fraction: {numerator: 25, denominator: 50}}}]
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {value: /zero}}]
          filters: [{type: RequestMirror, requestMirror: {backendRef: {name: v3, port: 80}, percent: 0}}]
          backendRefs: [{name: v1, port: 80}]
    """)
    stack.wait("share.example.com", "/zero", lambda r: r.status_code == 200, "the share route")
    total = 400
    for i in range(total):
        for path in ("/percent", "/fraction", "/zero"):
            assert stack.get("share.example.com", f"{path}/{i}").status_code == 200
    wait_for(lambda: len([p for p in stack.backends["v3"].paths() if p.startswith("/fraction/")]) > 0, 5, "copies")
    copies = collections.Counter(p.split("/")[1] for name in ("v2", "v3") for p in stack.backends[name].paths()
                                 if p.split("/")[1] in ("percent", "fraction", "zero"))
    # Binomial: 20% of 400 is 80 (sd 8), 50% is 200 (sd 10); four sd either way.
    assert 48 <= copies["percent"] <= 112, copies
    assert 160 <= copies["fraction"] <= 240, copies
    assert copies["zero"] == 0, copies


def test_mirror_to_a_missing_or_forbidden_backend_is_dropped_and_reported(stack: Stack) -> None:
    stack.lg.write("svc-elsewhere.yaml", service_yaml("elsewhere", 80, stack.backends["v3"].port, namespace="other"))
    stack.route("mirror-bad", "mirror-bad.example.com", """
        - name: missing
          matches: [{path: {value: /missing}}]
          filters: [{type: RequestMirror, requestMirror: {backendRef: {name: nope, port: 80}}}]
          backendRefs: [{name: v1, port: 80}]
        - name: forbidden
          matches: [{path: {value: /forbidden}}]
          filters: [{type: RequestMirror, requestMirror: {backendRef: {name: elsewhere, namespace: other, port: 80}}}]
          backendRefs: [{name: v1, port: 80}]
        - name: bad-percent
          matches: [{path: {value: /bad-percent}}]
          filters: [{type: RequestMirror, requestMirror: {backendRef: {name: v2, port: 80}, percent: 120}}]
          backendRefs: [{name: v1, port: 80}]
    """)
    # The rules keep serving their own backend; only the mirror is dropped.
    stack.wait("mirror-bad.example.com", "/missing", lambda r: r.status_code == 200, "the rule with a bad mirror")
    assert answered_by(stack.get("mirror-bad.example.com", "/forbidden")) == "v1"
    # A percent out of range makes its rule invalid: 500, and the status says why.
    assert stack.get("mirror-bad.example.com", "/bad-percent").status_code == 500
    conds = stack.conditions("mirror-bad")
    resolved = conds["ResolvedRefs"]
    assert (resolved["status"], resolved["reason"]) == ("False", "BackendNotFound")
    assert "rule missing filters[0].requestMirror.backendRef: Service default/nope not found" in resolved["message"]
    assert "Service other/elsewhere is in another namespace" in resolved["message"]
    assert conds["Accepted"]["status"] == "True"
    assert "rule bad-percent: filters[0].requestMirror.percent 120 must be between 0 and 100" in \
        conds["PartiallyInvalid"]["message"]

    stack.lg.write("grant.yaml", """
        apiVersion: gateway.networking.k8s.io/v1beta1
        kind: ReferenceGrant
        metadata: {name: mirror-to-other, namespace: other}
        spec:
          from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}]
          to: [{group: "", kind: Service, name: elsewhere}]
    """)

    def mirrored() -> bool:
        stack.get("mirror-bad.example.com", "/forbidden/granted")
        return "/forbidden/granted" in stack.backends["v3"].paths()

    wait_for(mirrored, 10, "the granted mirror to receive copies")
    assert "other/elsewhere" not in stack.conditions("mirror-bad")["ResolvedRefs"]["message"]


# --- CORS (the conformance test's cases) ---------------------------------------------------------


CORS_ROUTES = """
    - matches: [{path: {value: /cors-1}}]
      filters:
        - type: CORS
          cors:
            allowOrigins: ["https://www.foo.com", "https://*.bar.com"]
            allowMethods: [GET, OPTIONS]
            allowHeaders: [x-header-1, x-header-2]
            exposeHeaders: [x-header-3, x-header-4]
            allowCredentials: true
            maxAge: 3600
      backendRefs: [{name: v1, port: 80}]
    - matches: [{path: {value: /cors-2}}]
      filters: [{type: CORS, cors: {allowOrigins: ["https://www.foo.com"], allowMethods: ["*"]}}]
      backendRefs: [{name: v1, port: 80}]
    - matches: [{path: {value: /cors-wildcard-origin}}]
      filters: [{type: CORS, cors: {allowOrigins: ["*"], allowMethods: [PUT], allowCredentials: false}}]
      backendRefs: [{name: v1, port: 80}]
    - matches: [{path: {value: /cors-wildcard-methods-headers}}]
      filters: [{type: CORS, cors: {allowOrigins: ["*"], allowMethods: ["*"], allowHeaders: ["*"], allowCredentials: true}}]
      backendRefs: [{name: v1, port: 80}]
    - matches: [{path: {value: /cors-wildcard-methods-headers-unauth}}]
      filters: [{type: CORS, cors: {allowOrigins: ["*"], allowMethods: ["*"], allowHeaders: ["*"], allowCredentials: false}}]
      backendRefs: [{name: v1, port: 80}]
"""


def _listed(value: str | None) -> set[str]:
    return {part.strip() for part in (value or "").split(",") if part.strip()}


def test_cors_preflights_and_simple_requests(stack: Stack) -> None:
    stack.route("cors", "cors.example.com", CORS_ROUTES)
    host = "cors.example.com"

    def preflight(path: str, origin: str, method: str, headers: str | None = None) -> httpx.Response:
        h = {"origin": origin, "access-control-request-method": method}
        if headers:
            h["access-control-request-headers"] = headers
        return stack.get(host, path, method="OPTIONS", headers=h)

    stack.wait(host, "/cors-1", lambda r: "access-control-allow-origin" in r.headers, "CORS answers",
               method="OPTIONS", headers={"origin": "https://www.foo.com", "access-control-request-method": "GET"})
    for origin in ("https://www.foo.com", "https://www.bar.com", "https://xpto.www.bar.com"):
        resp = preflight("/cors-1", origin, "GET", "x-header-1, x-header-2")
        assert resp.status_code in (200, 204)
        assert resp.headers["access-control-allow-origin"] == origin
        assert _listed(resp.headers["access-control-allow-methods"]) == {"GET", "OPTIONS"}
        assert _listed(resp.headers["access-control-allow-headers"]) == {"x-header-1", "x-header-2"}
        assert _listed(resp.headers["access-control-expose-headers"]) == {"x-header-3", "x-header-4"}
        assert resp.headers["access-control-max-age"] == "3600"
        assert resp.headers["access-control-allow-credentials"] == "true"
    stranger = preflight("/cors-1", "https://foobar.com", "GET")
    assert stranger.status_code in (200, 204, 403)
    assert "access-control-allow-origin" not in stranger.headers
    # Answered by the gateway itself: the backend never sees a preflight from a foreign origin.
    assert stranger.content == b"", stranger.text  # the echo backend always answers with JSON
    simple = stack.get(host, "/cors-1", headers={"origin": "https://www.bar.com"})
    assert (answered_by(simple), simple.headers["access-control-allow-origin"]) == ("v1", "https://www.bar.com")
    assert "access-control-allow-origin" not in stack.get(host, "/cors-1", headers={"origin": "https://foobar.com"}).headers

    # allowMethods "*" without credentials: the method (or "*"), no credentials header, default max age.
    resp = preflight("/cors-2", "https://www.foo.com", "POST")
    assert resp.headers["access-control-allow-methods"] in ("POST", "*")
    assert resp.headers["access-control-allow-origin"] == "https://www.foo.com"
    assert "access-control-allow-credentials" not in resp.headers
    assert resp.headers["access-control-max-age"] == "5"

    # allowOrigins "*": the request's origin (with its port) or "*".
    for origin in ("https://foobar.com", "https://foobar.com:12345"):
        resp = preflight("/cors-wildcard-origin", origin, "PUT")
        assert resp.headers["access-control-allow-origin"] in (origin, "*")
        assert resp.headers["access-control-allow-methods"] == "PUT"
        assert "access-control-allow-credentials" not in resp.headers
        actual = stack.get(host, "/cors-wildcard-origin", method="PUT", headers={"origin": origin})
        assert actual.status_code == 200 and actual.headers["access-control-allow-origin"] in (origin, "*")

    # Wildcards with credentials: never "*", always the request's own values.
    resp = preflight("/cors-wildcard-methods-headers", "https://other.foo.com", "PUT", "x-header-1, x-header-2")
    assert resp.status_code == 200
    assert resp.headers["access-control-allow-origin"] == "https://other.foo.com"
    assert resp.headers["access-control-allow-methods"] == "PUT"
    assert _listed(resp.headers["access-control-allow-headers"]) == {"x-header-1", "x-header-2"}
    assert resp.headers["access-control-allow-credentials"] == "true"
    resp = preflight("/cors-wildcard-methods-headers-unauth", "https://other.foo.com", "PUT", "x-header-1, x-header-2")
    assert resp.headers["access-control-allow-origin"] in ("https://other.foo.com", "*")
    assert resp.headers["access-control-allow-methods"] in ("PUT", "*")
    assert _listed(resp.headers["access-control-allow-headers"]) in ({"x-header-1", "x-header-2"}, {"*"})
    assert "access-control-allow-credentials" not in resp.headers
    auth = {"origin": "https://other.foo.com", "authorization": "Bearer test"}
    resp = stack.get(host, "/cors-wildcard-methods-headers", headers=auth)
    assert resp.headers["access-control-allow-origin"] == "https://other.foo.com"
    assert resp.headers["access-control-allow-credentials"] == "true"
    resp = stack.get(host, "/cors-wildcard-methods-headers-unauth", headers=auth)
    assert resp.headers["access-control-allow-origin"] == "https://other.foo.com"
    assert "access-control-allow-credentials" not in resp.headers


# --- retry and timeouts ---------------------------------------------------------------------------


def test_retry_counts_codes_and_attempts_as_the_backend_sees_them(stack: Stack) -> None:
    stack.route("retry", "retry.example.com", """
        - matches: [{path: {value: /fail}}]
          retry: {codes: [500], attempts: 3}
          backendRefs: [{name: v2, port: 80}]
        - matches: [{path: {value: /reset}}]
          retry: {attempts: 2, backoff: 10ms}
          backendRefs: [{name: v2, port: 80}]
        - matches: [{path: {value: /no-retry}}]
          backendRefs: [{name: v2, port: 80}]
    """)
    host = "retry.example.com"
    stack.wait(host, "/no-retry", lambda r: r.status_code == 200, "the retry route")
    hits = stack.backends["v2"].hits

    def status(path: str) -> int:
        return stack.get(host, path).status_code

    assert status("/fail?fail=500&times=2") == 200 and hits["/fail?fail=500&times=2"] == 3  # 2 failures, a success
    assert status("/fail?fail=500&times=4") == 500 and hits["/fail?fail=500&times=4"] == 4  # 1 try + 3 retries
    assert status("/fail?fail=503&times=2") == 503 and hits["/fail?fail=503&times=2"] == 1  # 503 is not retried
    # Connection errors are retried whenever a rule has a retry stanza.
    assert status("/reset?reset=1") == 200 and hits["/reset?reset=1"] == 2
    assert status("/reset?reset=3") in (502, 503) and hits["/reset?reset=3"] == 3
    # Without a retry stanza nothing is retried.
    assert status("/no-retry?fail=500&times=1") == 500 and hits["/no-retry?fail=500&times=1"] == 1


def test_request_and_backend_request_timeouts(stack: Stack) -> None:
    stack.route("timeouts", "timeouts.example.com", """
        - matches: [{path: {value: /request-timeout}}]
          timeouts: {request: 500ms}
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {value: /backend-timeout}}]
          timeouts: {backendRequest: 500ms}
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {value: /disabled}}]
          timeouts: {request: 0s, backendRequest: 0s}
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {value: /retried}}]
          timeouts: {request: 5s, backendRequest: 300ms}
          retry: {attempts: 2}
          backendRefs: [{name: v1, port: 80}]
    """)
    host = "timeouts.example.com"
    stack.wait(host, "/disabled", lambda r: r.status_code == 200, "the timeout route")
    for path in ("/request-timeout", "/backend-timeout"):
        assert stack.get(host, f"{path}?delay=10").status_code == 200
        assert stack.get(host, f"{path}?delay=1000").status_code == 504
    assert stack.get(host, "/disabled?delay=1000").status_code == 200
    # A backend request that times out is retried like a connection error.
    assert stack.get(host, "/retried?delay=1000").status_code == 504
    assert stack.backends["v1"].hits["/retried?delay=1000"] == 3


# --- backend protocols ---------------------------------------------------------------------------


def test_h2c_backend_is_reached_over_http2_cleartext(stack: Stack) -> None:
    stack.route("h2c", "h2c.example.com", "- backendRefs: [{name: h2c, port: 80}]")
    resp = stack.wait("h2c.example.com", "/h2c", lambda r: r.status_code == 200, "the h2c backend")
    assert resp.json() == {"pod": "h2c", "proto": "HTTP/2.0", "path": "/h2c", "host": "h2c.example.com"}


def test_websocket_backend_gets_the_upgrade(stack: Stack) -> None:
    stack.route("ws", "ws.example.com", """
        - matches: [{path: {value: /ws}}]
          backendRefs: [{name: ws, port: 80}]
        - matches: [{path: {value: /plain}}]
          backendRefs: [{name: v3, port: 80}]
    """)
    stack.wait("ws.example.com", "/ws", lambda r: r.status_code == 200, "the ws route")

    async def talk(path: str) -> tuple[str, bytes]:
        async with aiohttp.ClientSession() as session, session.ws_connect(
            f"http://{stack.addr}:8080{path}", headers={"host": "ws.example.com"}, timeout=aiohttp.ClientWSTimeout(ws_close=5)
        ) as ws:
            await ws.send_str("Websocket Support!")
            text = await ws.receive_str(timeout=5)
            await ws.send_bytes(bytes([1, 2, 3, 4, 5, 6, 7]))
            return text, await ws.receive_bytes(timeout=5)

    assert asyncio.run(talk("/ws")) == ("Websocket Support!", bytes([1, 2, 3, 4, 5, 6, 7]))
    # The same server behind a Service port without appProtocol kubernetes.io/ws: no upgrade.
    with pytest.raises(aiohttp.WSServerHandshakeError):
        asyncio.run(talk("/plain/ws"))


# --- redirects and rewrites ----------------------------------------------------------------------


def test_redirect_locations_follow_the_port_and_scheme_rules(stack: Stack) -> None:
    stack.route("redirect", "redirect.example.com", """
        - matches: [{path: {value: /scheme-nil-and-port-nil}}]
          filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org}}]
        - matches: [{path: {value: /scheme-nil-and-port-80}}]
          filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org, port: 80}}]
        - matches: [{path: {value: /scheme-nil-and-port-8443}}]
          filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org, port: 8443}}]
        - matches: [{path: {value: /scheme-https-and-port-nil}}]
          filters: [{type: RequestRedirect, requestRedirect: {scheme: https, hostname: example.org}}]
        - matches: [{path: {value: /scheme-https-and-port-443}}]
          filters: [{type: RequestRedirect, requestRedirect: {scheme: https, port: 443, hostname: example.org}}]
        - matches: [{path: {value: /scheme-https-and-port-8443}}]
          filters: [{type: RequestRedirect, requestRedirect: {scheme: https, port: 8443}}]
        - matches: [{path: {value: /original-prefix}}]
          filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /replacement-prefix}}}]
        - matches: [{path: {value: /strip}}]
          filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}, statusCode: 301}}]
        - matches: [{path: {value: /full}}]
          filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: /full-path-replacement}}}]
        - matches: [{path: {value: /see-other}}]
          filters: [{type: RequestRedirect, requestRedirect: {statusCode: 303}}]
        - matches: [{path: {value: /temporary}}]
          filters: [{type: RequestRedirect, requestRedirect: {statusCode: 307}}]
        - matches: [{path: {value: /permanent}}]
          filters: [{type: RequestRedirect, requestRedirect: {statusCode: 308}}]
    """)
    host = "redirect.example.com"
    stack.wait(host, "/see-other", lambda r: r.status_code == 303, "the redirect route")

    def location(path: str, port: int = 8080) -> tuple[int, str]:
        resp = stack.get(host, path, port=port)
        return resp.status_code, resp.headers.get("location", "")

    # On the 8080 listener: with neither scheme nor port, the listener's port.
    assert location("/scheme-nil-and-port-nil/x") == (302, "http://example.org:8080/scheme-nil-and-port-nil/x")
    assert location("/scheme-nil-and-port-80") == (302, "http://example.org/scheme-nil-and-port-80")
    assert location("/scheme-nil-and-port-8443") == (302, "http://example.org:8443/scheme-nil-and-port-8443")
    assert location("/scheme-https-and-port-nil") == (302, "https://example.org/scheme-https-and-port-nil")
    assert location("/scheme-https-and-port-443") == (302, "https://example.org/scheme-https-and-port-443")
    assert location("/scheme-https-and-port-8443") == (302, f"https://{host}:8443/scheme-https-and-port-8443")
    # On the port 80 listener the port is the scheme's default: left out.
    assert location("/scheme-nil-and-port-nil", port=80) == (302, "http://example.org/scheme-nil-and-port-nil")
    assert location("/see-other/a?q=1", port=80) == (303, f"http://{host}/see-other/a?q=1")
    assert location("/original-prefix/lemon", port=80) == (302, f"http://{host}/replacement-prefix/lemon")
    assert location("/strip/lemon", port=80) == (301, f"http://{host}/lemon")
    assert location("/full/path/original", port=80) == (302, f"http://{host}/full-path-replacement")
    assert location("/temporary", port=80) == (307, f"http://{host}/temporary")
    assert location("/permanent", port=80) == (308, f"http://{host}/permanent")


def test_rewrites_change_what_the_backend_sees(stack: Stack) -> None:
    stack.route("rewrite", "rewrite.example.com", """
        - matches: [{path: {value: /prefix/one}}]
          filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /one}}}]
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {value: /strip-prefix}}]
          filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {value: /full/one}}]
          filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /one}}}]
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {value: /host}}]
          filters: [{type: URLRewrite, urlRewrite: {hostname: one.example.org}}]
          backendRefs: [{name: v1, port: 80}]
    """)
    host = "rewrite.example.com"
    stack.wait(host, "/host", lambda r: r.status_code == 200, "the rewrite route")

    def seen(path: str) -> tuple[str, str]:
        body = stack.get(host, path).json()
        return body["path"], body["host"]

    assert seen("/prefix/one/two") == ("/one/two", host)
    assert seen("/strip-prefix/three") == ("/three", host)
    assert seen("/strip-prefix") == ("/", host)
    assert seen("/full/one/two") == ("/one", host)
    assert seen("/host/x") == ("/host/x", "one.example.org")


# --- matching and backends (the conformance tests' cases) ------------------------------------------


def test_query_param_matching_and_precedence(stack: Stack) -> None:
    stack.route("query", "query.example.com", """
        - matches: [{queryParams: [{name: animal, value: whale}]}]
          backendRefs: [{name: v1, port: 80}]
        - matches: [{queryParams: [{name: animal, value: dolphin}]}]
          backendRefs: [{name: v2, port: 80}]
        - matches:
            - queryParams: [{name: animal, value: dolphin}, {name: color, value: blue}]
            - queryParams: [{name: ANIMAL, value: Whale}]
          backendRefs: [{name: v3, port: 80}]
        - matches: [{path: {value: /path1}, queryParams: [{name: animal, value: whale}]}]
          backendRefs: [{name: v1, port: 80}]
        - matches: [{headers: [{name: version, value: one}], queryParams: [{name: animal, value: whale}]}]
          backendRefs: [{name: v2, port: 80}]
        - matches: [{path: {value: /path2}, headers: [{name: version, value: two}], queryParams: [{name: animal, value: whale}]}]
          backendRefs: [{name: v3, port: 80}]
        - matches:
            - {path: {value: /path3}, queryParams: [{name: animal, value: shark}]}
            - {path: {value: /path4}, headers: [{name: version, value: three}], queryParams: [{name: animal, value: kraken}]}
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {value: /path5}}]
          backendRefs: [{name: v1, port: 80}]
        - matches: [{queryParams: [{name: animal, value: hydra}]}]
          backendRefs: [{name: v2, port: 80}]
        - matches: [{headers: [{name: version, value: four}]}]
          backendRefs: [{name: v3, port: 80}]
    """)
    host = "query.example.com"
    stack.wait(host, "/?animal=whale", lambda r: r.status_code == 200, "the query route")
    cases: list[tuple[str, dict[str, str], str | int]] = [
        ("/?animal=whale", {}, "v1"), ("/?animal=dolphin", {}, "v2"), ("/?animal=dolphin&color=blue", {}, "v3"),
        ("/?ANIMAL=Whale", {}, "v3"), ("/?animal=whale&otherparam=irrelevant", {}, "v1"),
        ("/?animal=dolphin&color=yellow", {}, "v2"), ("/?color=blue", {}, 404), ("/?animal=dog", {}, 404),
        ("/?animal=whaledolphin", {}, 404), ("/", {}, 404),
        ("/path1?animal=whale", {}, "v1"), ("/?animal=whale", {"version": "one"}, "v2"),
        ("/path2?animal=whale", {"version": "two"}, "v3"), ("/path3?animal=shark", {}, "v1"),
        ("/path4?animal=kraken", {"version": "three"}, "v1"), ("/?animal=shark", {}, 404),
        ("/path4?animal=kraken", {}, 404), ("/path5?animal=hydra", {}, "v1"),
        ("/?animal=hydra", {"version": "four"}, "v3"),
    ]
    got = [(path, headers, answered_by(stack.get(host, path, headers=headers))) for path, headers, _ in cases]
    assert got == cases


def test_path_match_order(stack: Stack) -> None:
    stack.route("path-order", "path-order.example.com", """
        - matches: [{path: {type: Exact, value: /match}}]
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {type: Exact, value: /match/exact}}]
          backendRefs: [{name: v2, port: 80}]
        - matches: [{path: {type: Exact, value: /match/exact/one}}]
          backendRefs: [{name: v3, port: 80}]
        - matches: [{path: {type: PathPrefix, value: /match/}}]
          backendRefs: [{name: v3, port: 80}]
        - matches: [{path: {type: PathPrefix, value: /match/prefix/}}]
          backendRefs: [{name: v1, port: 80}]
        - matches: [{path: {type: PathPrefix, value: /match/prefix/one}}]
          backendRefs: [{name: v2, port: 80}]
    """)
    host = "path-order.example.com"
    stack.wait(host, "/match", lambda r: r.status_code == 200, "the path order route")
    cases = [("/match/exact/one", "v3"), ("/match/exact", "v2"), ("/match", "v1"),
             ("/match/prefix/one/any", "v2"), ("/match/prefix/any", "v1"), ("/match/any", "v3")]
    assert [(path, answered_by(stack.get(host, path))) for path, _ in cases] == cases


def test_headless_service_with_several_endpoint_slices(stack: Stack) -> None:
    """Service types: a headless Service whose endpoints come from hand-written
    EndpointSlices, one per address family (the IPv6 one empty here)."""
    port = stack.backends["v2"].port
    stack.lg.write("svc-headless.yaml", f"""
        apiVersion: v1
        kind: Service
        metadata: {{name: headless}}
        spec:
          clusterIP: None
          ports: [{{name: first-port, protocol: TCP, port: 8080, targetPort: 3000}}]
        ---
        apiVersion: discovery.k8s.io/v1
        kind: EndpointSlice
        metadata: {{name: headless-ip4, labels: {{kubernetes.io/service-name: headless}}}}
        addressType: IPv4
        ports: [{{name: first-port, port: {port}, protocol: TCP}}]
        endpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true, serving: true, terminating: false}}}}]
        ---
        apiVersion: discovery.k8s.io/v1
        kind: EndpointSlice
        metadata: {{name: headless-ip6, labels: {{kubernetes.io/service-name: headless}}}}
        addressType: IPv6
        ports: [{{name: first-port, port: {port}, protocol: TCP}}]
    """)
    stack.route("service-types", "service-types.example.com", """
        - matches: [{path: {type: Exact, value: /headless}}]
          backendRefs: [{name: headless, port: 8080}]
    """)
    resp = stack.wait("service-types.example.com", "/headless", lambda r: r.status_code == 200, "the headless Service")
    assert answered_by(resp) == "v2"
    assert stack.conditions("service-types")["ResolvedRefs"]["status"] == "True"
