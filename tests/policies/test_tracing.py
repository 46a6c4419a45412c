"""Tracing end to end: a ListenerPolicy's OpenTelemetry tracer, real Envoy, and an OTLP collector.

The collector is a real gRPC server (opentelemetry-proto's trace service) that
keeps every span Envoy exports. Sampling is tested both ways: with random
sampling at 0 only the requests a client asks to trace (x-client-trace-id,
client sampling 100) are traced.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from tests.harness import wait_for
from tests.policies.conftest import Stack, condition
from tests.policies.servers import body_of
from tests.policies.telemetry import OtlpReceiver, attributes, start_otlp

pytestmark = pytest.mark.e2e

HOST = "traced.example.com"


@pytest.fixture(scope="module")
def otlp(stack: Stack) -> Iterator[OtlpReceiver]:
    receiver, stop = start_otlp(stack.servers)
    stack.service("otel-collector", receiver.port)
    stack.write("route-traced.yaml", stack.route("traced", HOST))
    stack.wait(HOST, lambda r: r.status_code == 200, what="the traced route")
    yield receiver
    stop()


def tracing_policy(stack: Stack, otlp: OtlpReceiver, http_settings: str) -> None:
    """The Gateway's ListenerPolicy `tracing` with these httpSettings (PORT: the collector's)."""
    body = textwrap.indent(textwrap.dedent(http_settings).strip("\n"), " " * 6).replace("PORT", str(otlp.port))
    stack.lg.write("listener-policy.yaml", (
        "apiVersion: gateway.lychgate.dev/v1alpha1\nkind: ListenerPolicy\nmetadata: {name: tracing}\nspec:\n"
        "  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n"
        "  default:\n    httpSettings:\n") + body + "\n")


def test_spans_reach_the_collector_with_service_name_tags_and_sampling(stack: Stack, otlp: OtlpReceiver) -> None:
    tracing_policy(stack, otlp, """
        tracing:
          provider:
            openTelemetry:
              grpcService: {backendRef: {name: otel-collector, port: PORT}}
              serviceName: edge-gateway
          randomSampling: 0
          clientSampling: 100
          attributes:
            - {name: env, literal: {value: prod}}
            - {name: tenant, requestHeader: {name: x-tenant, defaultValue: none}}
    """)

    def urls() -> list[str]:
        return [str(attributes(s.attributes).get("http.url", "")) for _, s in otlp.spans]

    def traced(path: str, **headers: str) -> None:
        stack.get(HOST, path, headers={"x-client-trace-id": f"client-{path}", **headers})

    # Envoy exports spans in batches (5 spans, or every 5 s): send a few per round.
    def first_spans() -> bool:
        for i in range(5):
            traced(f"/warmup-{i}")
        return any("/warmup-" in u for u in urls())

    wait_for(first_spans, 20, "the first spans at the collector")
    for i in range(10):
        stack.get(HOST, f"/untraced-{i}")  # random sampling 0: not traced
        traced(f"/traced-{i}", **{"x-tenant": f"t{i}"})
    wait_for(lambda: all(any(f"/traced-{i}" in u for u in urls()) for i in range(10)), 20, "every traced request")
    assert not [u for u in urls() if "/untraced-" in u]

    resource, span = next((r, s) for r, s in otlp.spans if str(attributes(s.attributes).get("http.url", "")).endswith("/traced-4"))
    assert resource["service.name"] == "edge-gateway"
    tags = attributes(span.attributes)
    assert tags["env"] == "prod" and tags["tenant"] == "t4"
    assert tags["http.method"] == "GET" and tags["http.status_code"] == "200"
    assert len(span.trace_id) == 16 and span.end_time_unix_nano > span.start_time_unix_nano

    # Envoy propagates the trace to the backend (W3C trace context).
    seen = body_of(stack.get(HOST, "/propagated", headers={"x-client-trace-id": "c"}))["headers"]
    assert seen["traceparent"].startswith("00-") and len(seen["traceparent"].split("-")[1]) == 32

    applied = condition(stack.status("ListenerPolicy", "tracing")["ancestors"][0]["conditions"], "Applied")
    assert (applied["status"], applied["message"]) == ("True", "applied: tracing")


def test_request_id_carries_the_trace_decision_unless_asked_not_to(stack: Stack, otlp: OtlpReceiver) -> None:
    uuid = "f47ac10b-58cc-4372-a567-0e02b2c3d479"

    def policy(extra: str) -> None:  # `extra`: one more httpSettings field
        tracing_policy(stack, otlp, f"""
            preserveExternalRequestId: true
            tracing:
              provider: {{openTelemetry: {{grpcService: {{backendRef: {{name: otel-collector, port: PORT}}}}}}}}
            {extra}
        """)

    def seen_id() -> str:
        resp = stack.get(HOST, "/id", headers={"x-request-id": uuid, "x-client-trace-id": "c"})
        return str(body_of(resp)["headers"]["x-request-id"])

    policy("generateRequestId: true")
    # Envoy packs why a request is traced into the UUID (position 14: 'b' = asked by the client).
    wait_for(lambda: seen_id() == uuid[:14] + "b" + uuid[15:], 15, "the trace reason in the request id")
    policy("uuidRequestIdConfig: {packTraceReason: false}")
    wait_for(lambda: seen_id() == uuid, 15, "the request id to be left as it came")


def test_route_tracing_overrides_the_listener_and_stat_prefix_names_route_stats(stack: Stack, otlp: OtlpReceiver) -> None:
    """kgateway's route-level tracing: the listener samples nothing at random, a
    TrafficPolicy samples every request of one route (with an attribute of its own) and
    turns tracing off on another; statPrefix gives the route Envoy stats of its own."""
    tracing_policy(stack, otlp, """
        tracing:
          provider: {openTelemetry: {grpcService: {backendRef: {name: otel-collector, port: PORT}}}}
          randomSampling: 0
          clientSampling: 100
    """)
    stack.write("route-tracing.yaml",
                stack.route("sampled", "sampled.example.com", """
                    - name: all
                      backendRefs: [{name: app, port: 80}]"""),
                stack.route("silent", "silent.example.com"),
                """
                apiVersion: gateway.lychgate.dev/v1alpha1
                kind: TrafficPolicy
                metadata: {name: sample-everything}
                spec:
                  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: sampled}]
                  statPrefix: "{{ route_namespace }}.{{ route_name }}.{{ rule_name }}"
                  tracing:
                    randomSampling: 100
                    attributes: [{name: route-owner, literal: {value: team-a}}]
                """,
                """
                apiVersion: gateway.lychgate.dev/v1alpha1
                kind: TrafficPolicy
                metadata: {name: no-tracing}
                spec:
                  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: silent}]
                  tracing: {disable: {}}
                """)
    assert stack.applied("sample-everything")["status"] == "True"

    def spans_for(path: str) -> list[dict[str, object]]:
        return [attributes(s.attributes) for _, s in otlp.spans
                if str(attributes(s.attributes).get("http.url", "")).endswith(path)]

    def sampled_without_asking() -> bool:
        for i in range(5):  # Envoy exports in batches of 5
            stack.get("sampled.example.com", f"/random-{i}")
        return bool(spans_for("/random-4"))

    wait_for(sampled_without_asking, 20, "a span for a request nobody asked to trace")
    assert spans_for("/random-4")[0]["route-owner"] == "team-a"
    for i in range(10):  # asked to trace, on a route that turned tracing off: no span
        stack.get("silent.example.com", f"/asked-{i}", headers={"x-client-trace-id": f"c{i}"})
    for i in range(5):  # a batch that flushes whatever the silent route would have sent
        stack.get("sampled.example.com", f"/flush-{i}")
    wait_for(lambda: spans_for("/flush-4"), 20, "the flushing batch")
    assert not [a for _, s in otlp.spans if "/asked-" in str((a := attributes(s.attributes)).get("http.url", ""))]

    admin = stack.lg.proxies()["default/gw"]["admin"]
    stats = stack.lg.client.get(f"http://{admin}/stats?filter=default\\.sampled\\.all").text
    assert ".route.default.sampled.all.upstream_rq_total: " in stats, stats


def test_direct_response_policy_answers_for_the_route(stack: Stack) -> None:
    """A TrafficPolicy `directResponse`, here on one rule through an ExtensionRef filter:
    that rule answers itself, the route's other rule still reaches the backend."""
    stack.write("direct.yaml", stack.route("moved", "moved.example.com", """
        - matches: [{path: {value: /old}}]
          filters: [{type: ExtensionRef, extensionRef: {group: gateway.lychgate.dev, kind: TrafficPolicy, name: gone}}]
          backendRefs: [{name: app, port: 80}]
        - backendRefs: [{name: app, port: 80}]"""), """
        apiVersion: gateway.lychgate.dev/v1alpha1
        kind: TrafficPolicy
        metadata: {name: gone}
        spec:
          directResponse: {status: 410, body: "moved to /new\\n"}
        """)
    resp = stack.wait("moved.example.com", lambda r: r.status_code == 410, "/old/page", what="the direct response")
    assert resp.text == "moved to /new\n"
    assert stack.get("moved.example.com", "/new").status_code == 200
