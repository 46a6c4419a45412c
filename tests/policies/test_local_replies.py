"""ListenerPolicy `localReplies` and `grpcStats` end to end, through real Envoy.

localReplies: the replies Envoy makes itself (404 when no route matches, 503
when the backend refuses connections) rewritten by the first mapper whose filter
matches (status, JSON body, headers, one from a Secret), left alone when no
mapper matches, formatted by `defaultBodyFormat` when one is set; a mapper with
only a filter keeps the replies it matches from the later mappers.

grpcStats: real gRPC calls through Envoy, and Envoy's admin /stats: per-method
counters on the backend's cluster for the allowlisted methods only, then for
every method; nothing before the policy asks for it.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from tests.harness import free_port, service_yaml, wait_for
from tests.policies.conftest import Stack

pytestmark = pytest.mark.e2e

HOST = "replies.example.com"
DEAD = "dead.example.com"  # a route to a backend nothing listens on: Envoy answers 503
GRPC_HOST = "grpc-stats.example.com"


def listener_policy(stack: Stack, http: str) -> None:
    stack.write("listener-policy.yaml", """
        apiVersion: gateway.lychgate.dev/v1alpha1
        kind: ListenerPolicy
        metadata: {name: replies}
        spec:
          targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]
          default:
            httpSettings:\n""" + textwrap.indent(textwrap.dedent(http).strip("\n"), " " * 14))


MAPPERS = """
localReplies:
  mappers:
    - filter: {headerFilter: {header: {type: Exact, name: x-shield, value: "1"}}}
    - filter: {statusCodeFilter: {op: EQ, value: 404}}
      statusCode: 410
      bodyFormatOverride:
        contentType: application/json
        json: {error: gone, path: "%REQ(:PATH)%", details: "%RESPONSE_CODE_DETAILS%"}
      headers:
        set:
          - {name: x-reply, value: "was %RESPONSE_CODE%"}
          - {name: x-support, secretRef: {name: reply-headers}}
"""


@pytest.fixture(scope="module", autouse=True)
def routes(stack: Stack) -> None:
    stack.write("replies.yaml", stack.route("replies", HOST), stack.route("dead", DEAD).replace(
        "{name: app, port: 80}", "{name: dead, port: 80}"), """
        apiVersion: v1
        kind: Secret
        metadata: {name: reply-headers}
        stringData: {x-support: "100% of errors to ops@example.com"}
        """)
    stack.lg.write("svc-dead.yaml", service_yaml("dead", 80, free_port()))
    stack.wait(HOST, lambda r: r.status_code == 200, what="the replies route")
    stack.wait(DEAD, lambda r: r.status_code == 503, what="the route to a dead backend")


def test_mappers_rewrite_the_replies_they_match(stack: Stack) -> None:
    before = stack.get("nowhere.example.com", "/missing")
    assert before.status_code == 404 and before.text == ""  # Envoy's own: no body

    listener_policy(stack, MAPPERS)
    gone = stack.wait("nowhere.example.com", lambda r: r.status_code == 410, "/missing", what="the 404 mapper")
    assert gone.headers["content-type"] == "application/json"
    assert json.loads(gone.text) == {"error": "gone", "path": "/missing", "details": "route_not_found"}
    assert gone.headers["x-reply"] == "was 404"  # header values are format strings
    assert gone.headers["x-support"] == "100% of errors to ops@example.com"  # a Secret's '%' is data

    # A mapper with only a filter matched first: the 404 is left as Envoy made it.
    shielded = stack.get("nowhere.example.com", "/missing", headers={"x-shield": "1"})
    assert (shielded.status_code, shielded.text) == (404, "")
    assert "x-reply" not in shielded.headers

    # No mapper matches a 503: Envoy's reply as it was, and the backend's answers are not replies.
    dead = stack.get(DEAD)
    assert dead.status_code == 503 and dead.text.startswith("upstream connect error")
    assert stack.get(HOST, "/fine").status_code == 200


def test_default_body_format_applies_to_replies_no_mapper_rewrites(stack: Stack) -> None:
    listener_policy(stack, MAPPERS + """
  defaultBodyFormat:
    text: "error %RESPONSE_CODE%: %LOCAL_REPLY_BODY%\\n"
""")
    dead = stack.wait(DEAD, lambda r: r.text.startswith("error 503: "), what="the default body format")
    assert dead.status_code == 503 and dead.text.startswith("error 503: upstream connect error")
    assert dead.headers["content-type"].startswith("text/plain")
    shielded = stack.get("nowhere.example.com", headers={"x-shield": "1"})
    assert (shielded.status_code, shielded.text) == (404, "error 404: \n")  # matched, so default format
    gone = stack.get("nowhere.example.com", "/missing")
    assert gone.status_code == 410 and json.loads(gone.text)["error"] == "gone"  # its own format wins

    # `body` replaces the text %LOCAL_REPLY_BODY% stands for; the default format still frames it.
    listener_policy(stack, MAPPERS + """
    - filter: {statusCodeFilter: {op: EQ, value: 503}}
      body: "the backend is down"
  defaultBodyFormat:
    text: "error %RESPONSE_CODE%: %LOCAL_REPLY_BODY%\\n"
""")
    dead = stack.wait(DEAD, lambda r: "down" in r.text, what="the 503 mapper's body")
    assert (dead.status_code, dead.text) == (503, "error 503: the backend is down\n")


# --- grpcStats ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grpc_backend(stack: Stack) -> Iterator[int]:
    """A gRPC server answering /demo.Echo/* with the method's name; Missing fails NOT_FOUND."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))

    class Echo(grpc.GenericRpcHandler):
        def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
            method = details.method  # type: ignore[attr-defined]

            def answer(request: bytes, context: grpc.ServicerContext) -> bytes:
                if method.endswith("/Missing"):
                    context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
                return method.encode()

            return grpc.unary_unary_rpc_method_handler(answer)

    server.add_generic_rpc_handlers((Echo(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stack.lg.write("svc-grpc-echo.yaml", service_yaml("grpc-echo", 9000, port))
    stack.write("grpc-route.yaml", f"""
        apiVersion: gateway.networking.k8s.io/v1
        kind: GRPCRoute
        metadata: {{name: grpc-stats}}
        spec:
          parentRefs: [{{name: gw}}]
          hostnames: [{GRPC_HOST}]
          rules:
            - backendRefs: [{{name: grpc-echo, port: 9000}}]
        """)
    yield port
    server.stop(None)


def _call(stack: Stack, method: str) -> str | None:
    with grpc.insecure_channel(f"{stack.addr}:8080", options=[("grpc.default_authority", GRPC_HOST)]) as ch:
        try:
            return str(ch.unary_unary(method)(b"", timeout=2).decode())
        except grpc.RpcError as err:
            return str(err.code())  # type: ignore[attr-defined]


def _stats_text(stack: Stack) -> str:
    """Envoy's stats of the backend's cluster: `cluster.kube_default_grpc-echo_9000/h2c.grpc.<...>`."""
    admin = stack.lg.proxies()["default/gw"]["admin"]
    return str(stack.lg.client.get(f"http://{admin}/stats", params={"filter": r"grpc-echo.*\.grpc\."}).text)


def _grpc_stats(stack: Stack) -> dict[str, int]:
    """The backend cluster's `grpc.` counters, by the name after its prefix."""
    out = {}
    for line in _stats_text(stack).splitlines():
        m = re.match(r"^cluster\.[^ ]*grpc-echo[^ ]*?\.grpc\.(.+): (\d+)$", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def test_grpc_stats_count_each_allowed_method(stack: Stack, grpc_backend: int) -> None:
    assert wait_for(lambda: _call(stack, "/demo.Echo/One") == "/demo.Echo/One", 20, "the GRPCRoute")
    assert _grpc_stats(stack) == {}  # no policy asks for it: no grpc_stats filter, no counters

    listener_policy(stack, "grpcStats: {methodAllowlist: [/demo.Echo/One, /demo.Echo/Missing]}")

    def counted() -> dict[str, int] | None:
        _call(stack, "/demo.Echo/One")
        stats = _grpc_stats(stack)
        return stats if stats.get("demo.Echo.One.success") else None

    wait_for(counted, 15, "per-method counters for /demo.Echo/One")
    before = _grpc_stats(stack)
    assert _call(stack, "/demo.Echo/One") == "/demo.Echo/One"
    assert _call(stack, "/demo.Echo/Two") == "/demo.Echo/Two"
    assert _call(stack, "/demo.Echo/Missing") == "StatusCode.NOT_FOUND"
    stats = _grpc_stats(stack)
    assert stats["demo.Echo.One.success"] == before["demo.Echo.One.success"] + 1
    assert stats["demo.Echo.One.total"] == before["demo.Echo.One.total"] + 1
    assert stats["demo.Echo.One.0"] == before["demo.Echo.One.0"] + 1  # by gRPC status code
    assert stats["demo.Echo.Missing.failure"] == 1 and stats["demo.Echo.Missing.5"] == 1  # NOT_FOUND is 5
    assert not any(k.startswith("demo.Echo.Two.") for k in stats)  # not in the allowlist: no series of its own
    assert stats["success"] == before.get("success", 0) + 1  # ...counted with the cluster's other calls
    assert "upstream_rq_time" not in _stats_text(stack)  # enableUpstreamStats is not set

    listener_policy(stack, "grpcStats: {statsForAllMethods: true, enableUpstreamStats: true}")

    def every_method() -> dict[str, int] | None:
        _call(stack, "/demo.Echo/Two")
        stats = _grpc_stats(stack)
        return stats if stats.get("demo.Echo.Two.success") else None

    wait_for(every_method, 15, "per-method counters for every method")
    assert "grpc.demo.Echo.Two.upstream_rq_time" in _stats_text(stack)  # the upstream latency histogram

