"""kgateway's e2e suites, scenario by scenario, against lychgate and a real Envoy.

Each test re-enacts one test of kgateway's suite (test/e2e/features/<feature>/suite.go):
our own manifests in the same shapes (group gateway.lychgate.dev), the same requests, and
the status codes, headers, bodies and policy conditions that suite asserts. The backend is
an httpbin like kgateway's, the ext-authz service answers as theirs does.

Policies on a whole Gateway go to a second Gateway ("edge"), one test at a time, and are
removed when the test ends: they would reach every other test's routes on "gw".
"""

from __future__ import annotations

import gzip
import http.client
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.harness import service_yaml, wait_for
from tests.policies.conftest import Stack
from tests.policies.servers import HeaderAuthServer, Httpbin

pytestmark = pytest.mark.e2e

EDGE = "edge"
GROUP = "gateway.lychgate.dev"


class Suites:
    """The shared stack, an httpbin, the kgateway-style ext-authz and the "edge" Gateway."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.httpbin = Httpbin()
        stack.servers.http(self.httpbin)
        self.authz = HeaderAuthServer("authz")
        stack.servers.grpc(self.authz)
        edge_address = f"127.0.{stack.addr.split('.')[2]}.{int(stack.addr.split('.')[3]) % 250 + 1}"
        stack.write("00-suites.yaml", service_yaml("httpbin", 8000, self.httpbin.port),
                    service_yaml("ext-authz", 4444, self.authz.port), f"""
            apiVersion: gateway.networking.k8s.io/v1
            kind: Gateway
            metadata: {{name: {EDGE}}}
            spec:
              gatewayClassName: lychgate
              addresses: [{{type: IPAddress, value: {edge_address}}}]
              allowedListeners: {{namespaces: {{from: Same}}}}
              listeners:
                - {{name: http, protocol: HTTP, port: 8080, allowedRoutes: {{namespaces: {{from: All}}}}}}
                - {{name: http-2, protocol: HTTP, port: 8082, allowedRoutes: {{namespaces: {{from: All}}}}}}
            """, f"""
            apiVersion: {GROUP}/v1alpha1
            kind: GatewayExtension
            metadata: {{name: basic-extauth}}
            spec:
              extAuth:
                grpcService: {{backendRef: {{name: ext-authz, port: 4444}}}}
            """)
        self.edge = stack.lg.address(EDGE)

    def send(self, host: str, path: str = "/", port: int = 8080, edge: bool = False, **kwargs: Any) -> httpx.Response:
        kwargs["headers"] = {"connection": "close", **kwargs.get("headers", {})}
        return self.stack.lg.get(self.edge if edge else self.stack.addr, path, host=host, port=port, **kwargs)

    def until(self, host: str, check: Any, path: str = "/", what: str = "", **kwargs: Any) -> httpx.Response:
        """Send until check(response) holds (the config has landed); return that response."""
        last: list[httpx.Response] = []

        def attempt() -> httpx.Response | None:
            try:
                resp = self.send(host, path, **kwargs)
            except httpx.TransportError:
                return None
            last[:] = [resp]
            return resp if check(resp) else None

        try:
            return wait_for(attempt, 10, what or f"{host}{path}")
        except AssertionError as err:
            got = f"{last[0].status_code} {dict(last[0].headers)} {last[0].text[:300]!r}" if last else "nothing"
            raise AssertionError(f"{err}\nlast response: {got}\n{self.stack.lg.log()[-2000:]}") from None

    def envoy_stat(self, suffix: str, gateway: str = "default/gw") -> int:
        admin = self.stack.lg.proxies()[gateway]["admin"]
        text = self.stack.lg.client.get(f"http://{admin}/stats").text
        return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.split(":", 1)[0].endswith(suffix) and line.rsplit(" ", 1)[1].isdigit())


@pytest.fixture(scope="module")
def s(stack: Stack) -> Suites:
    return Suites(stack)


@pytest.fixture
def edge_policy(s: Suites) -> Iterator[list[str]]:
    """Files of policies on the edge Gateway, removed after the test (and awaited)."""
    files: list[str] = []
    yield files
    for name in files:
        s.stack.lg.delete(name)


def route(name: str, hosts: list[str], rules: str, gateway: str = "gw", section: str | None = None,
          parent_kind: str | None = None) -> str:
    parent = f"name: {gateway}" + (f", sectionName: {section}" if section else "") + \
        (f", kind: {parent_kind}, group: gateway.networking.k8s.io" if parent_kind else "")
    return (f"apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}}}\nspec:\n"
            f"  parentRefs: [{{{parent}}}]\n  hostnames: {hosts}\n  rules:\n{rules}")


def httpbin_rule(prefix: str | None = None, name: str | None = None, extra: str = "") -> str:
    lines = ["    - backendRefs: [{name: httpbin, port: 8000}]"]
    if name:
        lines.append(f"      name: {name}")
    if prefix:
        lines.append(f"      matches: [{{path: {{type: PathPrefix, value: {prefix}}}}}]")
    return "\n".join(lines) + ("\n" + extra if extra else "") + "\n"


def tp(name: str, targets: str, body: str) -> str:
    """A TrafficPolicy; `targets` is the targetRefs list in flow style ("" for none)."""
    spec = f"  targetRefs: {targets}\n" if targets else ""
    return f"apiVersion: {GROUP}/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: {name}}}\nspec:\n{spec}{body}"


def on_route(name: str, section: str | None = None) -> str:
    return (f"[{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {name}"
            + (f", sectionName: {section}" if section else "") + "}]")


def on_gateway(name: str = EDGE, section: str | None = None, kind: str = "Gateway") -> str:
    return (f"[{{group: gateway.networking.k8s.io, kind: {kind}, name: {name}"
            + (f", sectionName: {section}" if section else "") + "}]")


def ancestor_conditions(s: Suites, policy: str, match: Any) -> list[dict[str, Any]] | None:
    for a in s.stack.ancestors(policy):
        if match(a["ancestorRef"]):
            return list(a["conditions"])
    return None


def raw(addr: str, host: str, path: str = "/", headers: dict[str, str] | None = None, method: str = "GET",
        body: bytes | None = None, port: int = 8080) -> tuple[int, dict[str, str], bytes]:
    """One request with exactly these headers (httpx would add Accept-Encoding)."""
    conn = http.client.HTTPConnection(addr, port, timeout=5)
    try:
        conn.request(method, path, body=body, headers={"host": host, "connection": "close", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


# --- extauth (features/extauth) --------------------------------------------------------------

def test_extauth_gateway_policy_with_insecure_route(s: Suites, edge_policy: list[str]) -> None:
    """TestExtAuthPolicy: auth on the Gateway, one route opts out with disable."""
    s.stack.write("authz-routes.yaml",
                  route("authz-secure", ["authz.example.com"], httpbin_rule(), gateway=EDGE),
                  route("authz-insecure", ["insecureroute.com"], httpbin_rule(), gateway=EDGE),
                  tp("insecure-route-policy", on_route("authz-insecure"), "  extAuth: {disable: {}}\n"))
    edge_policy.append("authz-gw.yaml")
    s.stack.write("authz-gw.yaml", tp("gw-policy", on_gateway(), "  extAuth: {extensionRef: {name: basic-extauth}}\n"))
    s.until("authz.example.com", lambda r: r.status_code == 403, edge=True, what="the Gateway's ext auth")
    allowed = s.send("authz.example.com", edge=True, headers={"x-ext-authz": "allow"})
    assert allowed.status_code == 200 and "X-Ext-Authz-Check-Result" in allowed.text
    assert s.send("authz.example.com", edge=True, headers={"x-ext-authz": "deny"}).status_code == 403
    assert s.send("insecureroute.com", edge=True).status_code == 200


def test_extauth_on_one_route(s: Suites) -> None:
    """TestRouteTargetedExtAuthPolicy: only the targeted route asks the service."""
    s.stack.write("authz-route.yaml",
                  route("route-example-secure", ["secureroute.com"], httpbin_rule()),
                  route("route-example-open", ["openroute.com"], httpbin_rule()),
                  tp("secure-route-policy", on_route("route-example-secure"),
                     "  extAuth: {extensionRef: {name: basic-extauth}}\n"))
    s.until("secureroute.com", lambda r: r.status_code == 403, what="the route's ext auth")
    allowed = s.send("secureroute.com", headers={"x-ext-authz": "allow"})
    assert allowed.status_code == 200 and "X-Ext-Authz-Check-Result" in allowed.text
    assert s.send("openroute.com").status_code == 200


def test_extauth_percentage_enabled(s: Suites) -> None:
    """TestPercentageEnabledExtAuthPolicy: 0% never asks the service, 100% always does."""
    ext = "apiVersion: " + GROUP + "/v1alpha1\nkind: GatewayExtension\nmetadata: {{name: {0}}}\nspec:\n" \
          "  type: ExtAuth\n  extAuth:\n    grpcService: {{backendRef: {{name: ext-authz, port: 4444}}}}\n" \
          "    percentageEnabled: {1}\n"
    s.stack.write("authz-pct-ext.yaml", ext.format("never-extauth", 0), ext.format("always-extauth", 100))
    s.stack.write("authz-pct.yaml",
                  route("route-example-never-authed", ["neverauthed.com"], httpbin_rule()),
                  route("route-example-always-authed", ["alwaysauthed.com"], httpbin_rule()),
                  tp("never-authed-route-policy", on_route("route-example-never-authed"),
                     "  extAuth: {extensionRef: {name: never-extauth}}\n"),
                  tp("always-authed-route-policy", on_route("route-example-always-authed"),
                     "  extAuth: {extensionRef: {name: always-extauth}}\n"))
    s.until("alwaysauthed.com", lambda r: r.status_code == 403, headers={"x-ext-authz": "deny"})
    allowed = s.send("alwaysauthed.com", headers={"x-ext-authz": "allow"})
    assert allowed.status_code == 200 and "X-Ext-Authz-Check-Result" in allowed.text
    never = s.until("neverauthed.com", lambda r: r.status_code == 200, headers={"x-ext-authz": "deny"})
    assert "X-Ext-Authz-Check-Result" not in never.text


# --- compression (features/compression) ------------------------------------------------------

def encoding(s: Suites, host: str, path: str, accept: str | None) -> str | None:
    status, headers, _ = raw(s.stack.addr, host, path, {"accept-encoding": accept} if accept else {})
    assert status == 200
    return headers.get("content-encoding")


def test_compression_for_one_route_negotiated_by_the_client(s: Suites) -> None:
    """TestTrafficPolicyResponseCompressionForRoute, TestNoCompressionWithoutAcceptEncoding,
    TestResponseCompressionNegotiation (libraries Brotli, Gzip, Zstd)."""
    s.stack.write("cmp.yaml",
                  route("cmp-html", ["cmp.example.com"], httpbin_rule("/html")),
                  route("cmp-json", ["cmp.example.com"], httpbin_rule("/json")),
                  tp("cmp", on_route("cmp-html"),
                     "  compression:\n    responseCompression: {libraries: [Brotli, Gzip, Zstd]}\n"))
    wait_for(lambda: encoding(s, "cmp.example.com", "/html", "gzip") == "gzip", 10, "compression")
    assert encoding(s, "cmp.example.com", "/json", "gzip") is None
    assert encoding(s, "cmp.example.com", "/html", None) is None
    assert encoding(s, "cmp.example.com", "/html", "br, gzip, zstd") == "br"
    assert encoding(s, "cmp.example.com", "/html", "zstd, gzip, br") == "zstd"
    assert encoding(s, "cmp.example.com", "/html", "zstd") == "zstd"
    assert encoding(s, "cmp.example.com", "/html", "br") == "br"
    assert encoding(s, "cmp.example.com", "/html", "deflate") is None


def test_compression_content_types_and_min_length(s: Suites) -> None:
    """TestContentTypeAllowlist and TestMinContentLength."""
    s.stack.write("cmp-limits.yaml",
                  route("httpbin-route-content-types", ["content-types.example.com"], httpbin_rule()),
                  route("httpbin-route-min-length", ["min-length.example.com"], httpbin_rule()),
                  tp("route-content-types", on_route("httpbin-route-content-types"),
                     "  compression:\n    responseCompression: {libraries: [Gzip], contentTypes: [application/json]}\n"),
                  tp("route-min-length", on_route("httpbin-route-min-length"),
                     "  compression:\n    responseCompression: {libraries: [Gzip], minContentLengthBytes: 100000}\n"))
    wait_for(lambda: encoding(s, "content-types.example.com", "/json", "gzip") == "gzip", 10, "compression")
    assert encoding(s, "content-types.example.com", "/html", "gzip") is None
    assert encoding(s, "min-length.example.com", "/json", "gzip") is None


@pytest.mark.parametrize("codec,library", [("gzip", "Gzip"), ("br", "Brotli"), ("zstd", "Zstd")])
def test_request_decompression(s: Suites, codec: str, library: str) -> None:
    """TestRequestDecompression, TestBrotliRequestDecompression, TestZstdRequestDecompression:
    a body compressed by the gateway itself, posted back, reaches the backend decompressed."""
    host = f"req-decompress-{codec}.example.com"
    s.stack.write(f"cmp-req-{codec}.yaml", route(f"req-decompress-{codec}", [host], httpbin_rule()),
                  tp(f"req-decompress-{codec}", on_route(f"req-decompress-{codec}"),
                     f"  compression:\n    responseCompression: {{libraries: [{library}]}}\n"
                     f"    requestDecompression: {{libraries: [{library}]}}\n"))

    def compressed() -> bytes | None:
        status, headers, body = raw(s.stack.addr, host, "/html", {"accept-encoding": codec})
        return body if status == 200 and headers.get("content-encoding") == codec else None

    body = wait_for(compressed, 10, f"{codec} responses")
    status, _, answer = raw(s.stack.addr, host, "/post", {"content-encoding": codec, "content-type": "text/plain"},
                            "POST", body)
    assert status == 200
    assert s.httpbin.html in answer.decode()
    stat = {"gzip": "gzip", "br": "brotli", "zstd": "zstd"}[codec]
    assert s.envoy_stat(f".decompressor.{stat}.request.decompressed") >= 1


def test_buffer_limit_measures_the_decompressed_body(s: Suites) -> None:
    """tp-route-buffer-decompression: 1Ki limit, a gzip body small compressed and large decompressed."""
    host = "buffer-decompress.example.com"
    s.stack.write("cmp-buffer.yaml", route("httpbin-route-buffer-decompress", [host], httpbin_rule()),
                  tp("route-buffer-decompress", on_route("httpbin-route-buffer-decompress"),
                     "  buffer: {maxRequestSize: 1Ki}\n  compression:\n    requestDecompression: {libraries: [Gzip]}\n"))
    big = gzip.compress(b"a" * 8192)
    assert len(big) < 1024
    s.until(host, lambda r: r.status_code == 413, "/post", method="POST", content=big,
            headers={"content-encoding": "gzip"}, what="the limit on the decompressed body")
    small = s.send(host, "/post", method="POST", content=gzip.compress(b"b" * 512), headers={"content-encoding": "gzip"})
    assert small.status_code == 200 and small.json()["data"] == "b" * 512


# --- buffer (features/buffer) ----------------------------------------------------------------

def test_buffer_limit_exactly(s: Suites) -> None:
    """TestBufferLimit: 1024 bytes pass, 1025 are 413; an untargeted route takes 2048."""
    s.stack.write("buffer.yaml", route("buffered-route", ["buffer.example.com"], httpbin_rule()),
                  route("unbuffered-route", ["no-buffer.example.com"], httpbin_rule()),
                  tp("buffer-policy", on_route("buffered-route"), "  buffer: {maxRequestSize: 1024}\n"))
    s.until("buffer.example.com", lambda r: r.status_code == 413, method="POST", content=b"a" * 1025)
    for size in (0, 1023, 1024):
        assert s.send("buffer.example.com", method="POST", content=b"a" * size).status_code == 200, size
    assert s.send("no-buffer.example.com", method="POST", content=b"a" * 2048).status_code == 200


# --- header_modifiers and listenerset policies (features/header_modifiers, features/listenerset)

def modifiers(suffix: str) -> str:
    return f"""  headerModifiers:
    request:
      add: [{{name: X-Custom-Request-Header, value: custom-request-value-{suffix}}}]
      set: [{{name: X-Custom-Request-Header-Set, value: custom-request-value-{suffix}}}]
      remove: [X-Request-Id]
    response:
      add: [{{name: X-Custom-Response-Header, value: custom-response-value-{suffix}}}]
      set: [{{name: X-Custom-Response-Header-Set, value: custom-response-value-{suffix}}}]
      remove: [X-Envoy-Upstream-Service-Time]
"""


LISTENER_SET = f"""
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: ls}}
spec:
  parentRef: {{name: {EDGE}}}
  listeners:
    - {{name: http, protocol: HTTP, port: 8081, allowedRoutes: {{namespaces: {{from: All}}}}}}
    - {{name: http-3, protocol: HTTP, port: 8083, allowedRoutes: {{namespaces: {{from: All}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: ls-2}}
spec:
  parentRef: {{name: {EDGE}}}
  listeners:
    - {{name: http, protocol: HTTP, port: 8084, allowedRoutes: {{namespaces: {{from: All}}}}}}
"""


def listener_set_routes(s: Suites) -> None:
    rule = httpbin_rule()
    s.stack.write("ls.yaml", LISTENER_SET,
                  route("hm-gw", ["hm.example.com"], rule, gateway=EDGE),
                  route("hm-ls", ["hm.example.com"], rule, gateway="ls", parent_kind="ListenerSet"),
                  route("hm-ls-2", ["hm.example.com"], rule, gateway="ls-2", parent_kind="ListenerSet"))


def headers_seen(s: Suites, port: int, check: Any) -> tuple[dict[str, list[str]], httpx.Response]:
    resp = s.until("hm.example.com", lambda r: r.status_code == 200 and check(r), "/headers", port=port, edge=True)
    return resp.json()["headers"], resp


def test_header_modifiers_on_every_level(s: Suites, edge_policy: list[str]) -> None:
    """TestMultiLevelHeaderModifiersWithListenerSet and TestListenerSetLevelHeaderModifiers:
    every level's add is kept (route, ListenerSet, Gateway); the Gateway's set wins."""
    listener_set_routes(s)
    edge_policy.append("hm-policies.yaml")
    s.stack.write("hm-policies.yaml",
                  tp("hm-gw", on_gateway(), modifiers("gw")),
                  tp("hm-route", on_route("hm-gw"), modifiers("route")),
                  tp("hm-route-ls", on_route("hm-ls"), modifiers("route")),
                  tp("hm-ls", on_gateway("ls", kind="ListenerSet"), modifiers("ls")))
    seen, resp = headers_seen(s, 8080, lambda r: "X-Custom-Response-Header-Set" in r.headers
                              and len(r.json()["headers"].get("X-Custom-Request-Header", [])) == 2)
    assert seen["X-Custom-Request-Header"] == ["custom-request-value-route", "custom-request-value-gw"]
    assert seen["X-Custom-Request-Header-Set"] == ["custom-request-value-gw"]
    assert "X-Request-Id" not in seen
    assert "x-envoy-upstream-service-time" not in resp.headers and "x-request-id" not in resp.headers
    seen, resp = headers_seen(s, 8081, lambda r: len(r.json()["headers"].get("X-Custom-Request-Header", [])) == 3)
    assert seen["X-Custom-Request-Header"] == ["custom-request-value-route", "custom-request-value-ls",
                                               "custom-request-value-gw"]
    assert seen["X-Custom-Request-Header-Set"] == ["custom-request-value-gw"]
    # The ListenerSet's own listeners without a route policy: the ListenerSet level, then the Gateway.
    seen, resp = headers_seen(s, 8084, lambda r: "X-Custom-Request-Header" in r.json()["headers"])
    assert seen["X-Custom-Request-Header"] == ["custom-request-value-gw"]


def test_listener_set_level_header_modifiers_alone(s: Suites, edge_policy: list[str]) -> None:
    """TestListenerSetLevelHeaderModifiers: only a ListenerSet policy; its response headers too."""
    listener_set_routes(s)
    edge_policy.append("hm-ls-only.yaml")
    s.stack.write("hm-ls-only.yaml", tp("hm-ls-only", on_gateway("ls", kind="ListenerSet"), modifiers("ls")))
    seen, resp = headers_seen(s, 8081, lambda r: r.json()["headers"].get("X-Custom-Request-Header")
                              == ["custom-request-value-ls"])
    assert seen["X-Custom-Request-Header-Set"] == ["custom-request-value-ls"]
    assert resp.headers["X-Custom-Response-Header"] == "custom-response-value-ls"
    assert resp.headers["X-Custom-Response-Header-Set"] == "custom-response-value-ls"
    assert "x-envoy-upstream-service-time" not in resp.headers


def test_header_modifiers_from_secret(s: Suites) -> None:
    """TestHeaderModifiersFromSecret."""
    s.stack.write("hm-secret.yaml", """
        apiVersion: v1
        kind: Secret
        metadata: {name: backend-creds}
        type: Opaque
        stringData: {api-key: my-secret-api-key, tenant-id: tenant-abc}
        """, route("svc-route-1", ["hm-secret.example.com"], httpbin_rule()),
        tp("header-modifiers-from-secret-policy", on_route("svc-route-1"), """  headerModifiers:
    request: {remove: [X-Request-Id]}
    response: {remove: [X-Envoy-Upstream-Service-Time]}
    requestHeadersFromSecret:
    - {secretRef: {name: backend-creds}, header: X-Api-Key, key: api-key}
    - {secretRef: {name: backend-creds}, header: X-Tenant-Id, key: tenant-id}
"""))
    resp = s.until("hm-secret.example.com", lambda r: "X-Api-Key" in r.json().get("headers", {}), "/headers")
    assert resp.json()["headers"]["X-Api-Key"] == ["my-secret-api-key"]
    assert resp.json()["headers"]["X-Tenant-Id"] == ["tenant-abc"]
    assert "x-envoy-upstream-service-time" not in resp.headers


def test_listener_set_policies(s: Suites, edge_policy: list[str]) -> None:
    """listenerset TestPolicies: Gateway, Gateway section, ListenerSet, ListenerSet section;
    a ListenerSet without a policy of its own inherits the Gateway's."""
    listener_set_routes(s)
    s.stack.write("ls-route-2.yaml", route("hm-gw-2", ["hm.example.com"], httpbin_rule(), gateway=EDGE,
                                           section="http-2"),
                  route("hm-ls-3", ["hm.example.com"], httpbin_rule(), gateway="ls", parent_kind="ListenerSet",
                        section="http-3"))

    def header(value: str) -> str:
        return f"  transformation:\n    response:\n      set: [{{name: policy, value: {value}}}]\n"

    edge_policy.append("ls-policies.yaml")
    s.stack.write("ls-policies.yaml",
                  tp("ls-gateway", on_gateway(), header("gateway")),
                  tp("ls-gateway-section", on_gateway(section="http-2"), header("gateway-section")),
                  tp("ls-listener-set", on_gateway("ls", kind="ListenerSet"), header("listener-set")),
                  tp("ls-listener-set-section", on_gateway("ls", section="http-3", kind="ListenerSet"),
                     header("listener-set-section")))
    for port, want in ((8080, "gateway"), (8082, "gateway-section"), (8081, "listener-set"),
                       (8083, "listener-set-section"), (8084, "gateway")):
        s.until("hm.example.com", lambda r, w=want: r.headers.get("policy") == w, port=port, edge=True,
                what=f"port {port}: policy {want}")
