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
