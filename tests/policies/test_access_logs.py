"""Access logs end to end: a ListenerPolicy, real Envoy, and the logs it writes or sends.

File logs are read back and parsed (text and JSON); Envoy's gRPC access log
service and an OpenTelemetry collector (OTLP/gRPC) are real gRPC servers
receiving what Envoy streams. Filters are tested both ways: requests that must
not be logged are sent between requests that must, and the test waits for the
logged ones (Envoy writes and streams in order, so an excluded request that
slipped through would be there too).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from envoy.config.core.v3 import base_pb2

from tests.harness import wait_for
from tests.policies.conftest import Stack, condition
from tests.policies.telemetry import AlsReceiver, OtlpReceiver, attributes, start_als, start_otlp

pytestmark = pytest.mark.e2e

HOST = "logs.example.com"


def listener_policy(stack: Stack, settings: str, name: str = "observe") -> None:
    """The Gateway's ListenerPolicy, replaced by every test (one file, one object)."""
    stack.write("listener-policy.yaml", f"""
        apiVersion: gateway.lychgate.dev/v1alpha1
        kind: ListenerPolicy
        metadata: {{name: {name}}}
        spec:
          targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}]
          default:
            httpSettings:\n""" + textwrap.indent(textwrap.dedent(settings).strip("\n"), " " * 14))


@pytest.fixture(scope="module", autouse=True)
def route(stack: Stack) -> None:
    stack.write("route-logs.yaml", stack.route("logs", HOST))
    stack.wait(HOST, lambda r: r.status_code == 200, what="the logs route")


@pytest.fixture(scope="module")
def als(stack: Stack) -> Iterator[AlsReceiver]:
    receiver, stop = start_als(stack.servers)
    stack.service("als", receiver.port)
    yield receiver
    stop()


@pytest.fixture(scope="module")
def otlp(stack: Stack) -> Iterator[OtlpReceiver]:
    receiver, stop = start_otlp(stack.servers)
    stack.service("otel-collector", receiver.port)
    yield receiver
    stop()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def first_logged(stack: Stack, path: Path, marker: str) -> None:
    """Send `marker` requests until one is in the file: the policy is live."""
    def attempt() -> bool:
        stack.get(HOST, marker)
        return any(marker in line for line in lines(path))

    try:
        wait_for(attempt, 15, f"{marker} in {path}")
    except AssertionError as err:
        raise AssertionError(f"{err}\npolicy status: {stack.status('ListenerPolicy', 'observe')}\n"
                             f"problems: {stack.lg.problems()}\nlychgate log tail:\n{stack.lg.log()[-3000:]}") from None


def test_file_logs_text_and_json_with_filters_both_ways(stack: Stack, tmp_path: Path) -> None:
    text, errors, blue = tmp_path / "access.log", tmp_path / "errors.json", tmp_path / "blue.log"
    listener_policy(stack, f"""
        accessLog:
          - fileSink:
              path: {text}
              stringFormat: "%REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE% %RESPONSE_FLAGS% tenant=%REQ(X-TENANT)%"
          - fileSink:
              path: {errors}
              jsonFormat:
                method: "%REQ(:METHOD)%"
                path: "%REQ(:PATH)%"
                status: "%RESPONSE_CODE%"
                flags: "%RESPONSE_FLAGS%"
                upstream: {{cluster: "%UPSTREAM_CLUSTER%"}}
            filter: {{statusCodeFilter: {{op: GE, value: 400}}}}
          - fileSink: {{path: {blue}, stringFormat: "%REQ(:PATH)%"}}
            filter: {{celFilter: {{match: "request.headers['x-tenant'] == 'blue'"}}}}
    """)
    first_logged(stack, text, "/first")

    assert stack.get(HOST, "/ok", headers={"x-tenant": "red"}).status_code == 200
    assert stack.get(HOST, "/blue", headers={"x-tenant": "blue"}).status_code == 200
    assert stack.get("nothing.example.com", "/missing").status_code == 404  # no route: Envoy answers
    # Each file is written in request order: once the last request is there, so are the others.
    wait_for(lambda: any("/missing" in line for line in lines(text)), 10, "the 404 in the text log")
    wait_for(lambda: any("/missing" in line for line in lines(errors)), 10, "the 404 in the JSON log")
    wait_for(lambda: any("/blue" in line for line in lines(blue)), 10, "the blue request in the CEL log")

    logged = lines(text)
    assert "GET /ok 200 - tenant=red" in logged
    assert "GET /missing 404 NR tenant=-" in logged
    records = [json.loads(line) for line in lines(errors)]
    assert {"method": "GET", "path": "/missing", "status": 404, "flags": "NR", "upstream": {"cluster": None}} in records
    assert all(r["status"] >= 400 for r in records)  # the 200s were filtered out
    assert lines(blue) == ["/blue"]  # only the request the CEL expression selects

    st = stack.status("ListenerPolicy", "observe")
    assert condition(st["conditions"], "Accepted")["status"] == "True"
    applied = condition(st["ancestors"][0]["conditions"], "Applied")
    assert (applied["status"], applied["message"]) == ("True", "applied: accessLog")


def test_default_format_shown_by_logs_access_and_debug(stack: Stack) -> None:
    listener_policy(stack, "accessLog: [{fileSink: {path: /dev/stdout}}]")

    def shown() -> str | None:
        stack.get(HOST, "/shown-by-cli", headers={"user-agent": "probe/1"})
        out = stack.lg.cli("logs", "gw", "--access").stdout
        return out if "/shown-by-cli" in out else None

    out = wait_for(shown, 15, "lychgate logs --access to show a request")
    line = next(line for line in out.splitlines() if "/shown-by-cli" in line)
    # The documented default: method, path, protocol, status, flags, bytes, duration,
    # authority, user agent, request id, client, route and upstream.
    assert '"GET /shown-by-cli HTTP/1.1" 200 - ' in line
    assert f'"{HOST}" "probe/1"' in line
    assert "client=127.0.0.1 route=httproute/default/logs/rule/0/match/0 upstream=127.0.0.1:" in line
    assert not any(line.startswith("[20") and "][" in line[:40] for line in out.splitlines()), \
        "Envoy's own messages are left out"

    report = stack.lg.cli("debug", "gw", "-o", "json")
    requests = json.loads(report.stdout)["requests"]
    assert any("/shown-by-cli" in entry for entries in requests.values() for entry in entries)


def test_grpc_access_log_service_receives_filtered_entries(stack: Stack, als: AlsReceiver) -> None:
    listener_policy(stack, """
        accessLog:
          - grpcService:
              logName: edge-requests
              backendRef: {name: als, port: PORT}
              additionalRequestHeadersToLog: [x-tenant]
              additionalResponseHeadersToLog: [x-backend]
            filter: {headerFilter: {header: {name: x-log, value: "yes"}}}
    """.replace("PORT", str(als.port)))
    wait_for(lambda: stack.get(HOST, "/als-ready", headers={"x-log": "yes"}) and "/als-ready" in als.paths(),
             15, "the first entry at the access log service")
    for i in range(8):  # alternate, on new connections (spread over Envoy's workers)
        stack.get(HOST, f"/skip-{i}")
        stack.get(HOST, f"/keep-{i}", headers={"x-log": "yes", "x-tenant": f"t{i}"})
    wait_for(lambda: all(f"/keep-{i}" in als.paths() for i in range(8)), 15, "every logged request")

    assert not [p for p in als.paths() if p.startswith("/skip-")]
    name, entry = next((n, e) for n, e in als.entries if e.request.path == "/keep-3")
    assert name == "edge-requests"
    assert entry.request.authority == HOST
    assert base_pb2.RequestMethod.Name(entry.request.request_method) == "GET"
    assert entry.response.response_code.value == 200
    assert dict(entry.request.request_headers)["x-tenant"] == "t3"
    assert dict(entry.response.response_headers)["x-backend"] == "app"
    assert entry.common_properties.upstream_cluster == "kube_default_app_80"


def test_opentelemetry_logs_with_body_attributes_and_filter(stack: Stack, otlp: OtlpReceiver) -> None:
    listener_policy(stack, """
        accessLog:
          - openTelemetry:
              grpcService: {logName: otel-requests, backendRef: {name: otel-collector, port: PORT}}
              body: "%REQ(:METHOD)% %REQ(:PATH)% -> %RESPONSE_CODE%"
              attributes:
                values:
                  - {key: tenant, value: {stringValue: "%REQ(X-TENANT)%"}}
                  - {key: tags, value: {arrayValue: [{stringValue: edge}, {stringValue: "%PROTOCOL%"}]}}
              resourceAttributes:
                values: [{key: deployment.environment, value: {stringValue: test}}]
            filter:
              orFilter:
                - responseFlagFilter: {flags: [NR]}
                - headerFilter: {header: {name: x-log, value: "yes"}}
    """.replace("PORT", str(otlp.port)))

    def bodies() -> list[str]:
        return [r.body.string_value for _, r in otlp.logs]

    wait_for(lambda: stack.get(HOST, "/otel-ready", headers={"x-log": "yes"}) and
             "GET /otel-ready -> 200" in bodies(), 15, "the first OTLP log record")
    for i in range(6):
        stack.get(HOST, f"/quiet-{i}")  # 200 without x-log: not logged
        stack.get("nothing.example.com", f"/lost-{i}", headers={"x-tenant": f"t{i}"})  # no route (NR): logged
    wait_for(lambda: all(f"GET /lost-{i} -> 404" in bodies() for i in range(6)), 15, "every 404")
    assert not [b for b in bodies() if "/quiet-" in b]

    resource, record = next((res, r) for res, r in otlp.logs if r.body.string_value == "GET /lost-2 -> 404")
    assert attributes(record.attributes)["tags"] == ["edge", "HTTP/1.1"]
    assert attributes(record.attributes)["tenant"] == "t2"
    assert resource["deployment.environment"] == "test"
    assert resource["log_name"] == "otel-requests"  # Envoy's built-in labels


def test_collector_missing_leaves_the_rest_applied(stack: Stack) -> None:
    listener_policy(stack, """
        accessLog:
          - grpcService: {logName: x, backendRef: {name: no-such-collector, port: 9}}
        serverHeaderTransformation: PassThrough
    """, name="observe")
    resp = stack.wait(HOST, lambda r: r.headers.get("server", "").startswith("Python"),
                      what="the backend's Server header to pass through")
    assert resp.status_code == 200

    def applied() -> dict[str, Any] | None:
        anc = stack.status("ListenerPolicy", "observe").get("ancestors", [])
        cond = condition(anc[0]["conditions"], "Applied") if anc else None
        return cond if cond and "no-such-collector" in cond["message"] else None

    cond = wait_for(applied, 10, "the status to name the missing collector")
    assert cond["reason"] == "PartiallyApplied"
    assert cond["message"].startswith("applied: serverHeaderTransformation; accessLog not applied: ")
    assert "Service default/no-such-collector not found" in cond["message"]


def test_a_log_file_envoy_cannot_open_is_reported_and_traffic_keeps_flowing(stack: Stack, tmp_path: Path) -> None:
    good = tmp_path / "good.log"
    listener_policy(stack, f"accessLog: [{{fileSink: {{path: {good}}}}}]")
    first_logged(stack, good, "/before")
    listener_policy(stack, f"accessLog: [{{fileSink: {{path: {tmp_path}/no/such/dir/access.log}}}}]")

    def rejected() -> dict[str, Any] | None:
        listener = stack.status("Gateway", "gw")["listeners"][0]
        programmed = condition(listener["conditions"], "Programmed")
        return programmed if programmed["status"] == "False" else None

    programmed = wait_for(rejected, 15, "the Gateway listener to report that Envoy refused it")
    assert "unable to open file" in programmed["message"] and "no/such/dir/access.log" in programmed["message"]
    applied = wait_for(lambda: (c := condition(stack.status("ListenerPolicy", "observe")["ancestors"][0]["conditions"],
                                               "Applied"))["status"] == "False" and c, 10, "the policy to say so")
    assert applied["reason"] == "Rejected" and "unable to open file" in applied["message"]
    # Envoy keeps serving with the listener it had: requests still pass and are still logged.
    assert stack.get(HOST, "/during").status_code == 200
    wait_for(lambda: any("/during" in line for line in lines(good)), 10, "the request in the old log")

    listener_policy(stack, f"accessLog: [{{fileSink: {{path: {good}}}}}]")
    wait_for(lambda: condition(stack.status("Gateway", "gw")["listeners"][0]["conditions"],
                               "Programmed")["status"] == "True", 15, "the listener to be programmed again")


def test_an_invalid_policy_changes_nothing_and_says_why(stack: Stack, tmp_path: Path) -> None:
    log = tmp_path / "kept.log"
    listener_policy(stack, f"accessLog: [{{fileSink: {{path: {log}}}}}]")
    first_logged(stack, log, "/valid")
    listener_policy(stack, f"""
        accessLog: [{{fileSink: {{path: {log}}}, filter: {{responseFlagFilter: {{flags: [NOPE]}}}}}}]
    """)

    def invalid() -> dict[str, Any] | None:
        accepted = condition(stack.status("ListenerPolicy", "observe").get("conditions", []), "Accepted")
        return accepted if accepted["status"] == "False" else None

    accepted = wait_for(invalid, 10, "the policy to be refused")
    assert "spec.default.httpSettings.accessLog[0].filter.responseFlagFilter.flags: unknown response flags NOPE" \
        in accepted["message"]
    # Not applied, so the proxy has lychgate's defaults again: no access log, traffic as before.
    assert stack.get(HOST, "/after-invalid").status_code == 200


def test_a_late_request_reaches_its_file_within_two_seconds(stack: Stack, otlp: OtlpReceiver, tmp_path: Path) -> None:
    """A quiet gateway: requests sent one by one, each after the last is in the files,
    are each there within 2 s. Envoy buffers file logs and flushed them every 10 s by
    default, so the second of two such requests waited up to 10 s (a warm-up seemed
    logged, the next request not). Tracing that samples nothing, a client's
    X-Forwarded-For and a JSON log, as the gateways that showed it."""
    text, records = tmp_path / "late.log", tmp_path / "late.json"
    listener_policy(stack, f"""
        tracing:
          provider: {{openTelemetry: {{grpcService: {{backendRef: {{name: otel-collector, port: {otlp.port}}}}}}}}}
          randomSampling: 0
        accessLog:
          - fileSink: {{path: {text}, stringFormat: "%REQ(:PATH)% xff=%REQ(X-FORWARDED-FOR)%"}}
          - fileSink:
              path: {records}
              jsonFormat: {{path: "%REQ(:PATH)%", xff: "%REQ(X-FORWARDED-FOR)%"}}
    """)
    first_logged(stack, text, "/warm-up")
    for i in range(3):
        path = f"/late-{i}"
        assert stack.get(HOST, path, headers={"x-forwarded-for": "203.0.113.9"}).status_code == 200
        wait_for(lambda p=path: f"{p} xff=203.0.113.9" in " ".join(lines(text)), 2, f"{path} in the text log")
        wait_for(lambda p=path: any(r["path"] == p and r["xff"].startswith("203.0.113.9")
                                    for r in map(json.loads, lines(records))), 2, f"{path} in the JSON log")
