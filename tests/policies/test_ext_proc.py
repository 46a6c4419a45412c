"""extProc end to end: real Envoy streaming requests through a real ext_proc server."""

from __future__ import annotations

import pytest

from tests.policies.conftest import Stack, condition
from tests.policies.servers import body_of

pytestmark = pytest.mark.e2e


def ext(name: str, port: int, extra: str = "") -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: {name}}}
spec:
  type: ExtProc
  extProc:
    grpcService:
      backendRef: {{name: proc-{name}, port: {port}}}
{extra}"""


def policy(name: str, target: str, body: str, section: str | None = None) -> str:
    sec = f", sectionName: {section}" if section else ""
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {name}}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {target}{sec}}}]
{body}"""


def test_ext_proc_changes_headers_and_bodies_per_route(stack: Stack) -> None:
    proc = stack.servers.proc("beta")
    stack.service("proc-beta", proc.port)
    stack.write(
        "proc.yaml",
        # The extension sends request headers only; routes ask for more.
        ext("beta", proc.port, "    processingMode: {requestHeaderMode: SEND, responseHeaderMode: SKIP}\n"),
        stack.route("proc", "proc.example.com", """
            - name: headers
              matches: [{path: {value: /headers}}]
              backendRefs: [{name: app, port: 80}]
            - name: both-ways
              matches: [{path: {value: /both}}]
              backendRefs: [{name: app, port: 80}]
            - name: body
              matches: [{path: {value: /body}}]
              backendRefs: [{name: app, port: 80}]
            - name: untouched
              matches: [{path: {value: /untouched}}]
              backendRefs: [{name: app, port: 80}]
        """),
        policy("proc", "proc", "  extProc:\n    extensionRef: {name: beta}\n"),
        policy("proc-both", "proc", "  extProc:\n    extensionRef: {name: beta}\n"
                                    "    processingMode: {responseHeaderMode: SEND}\n", section="both-ways"),
        policy("proc-body", "proc", "  extProc:\n    extensionRef: {name: beta}\n"
                                    "    processingMode: {requestBodyMode: BUFFERED}\n", section="body"),
        policy("proc-off", "proc", "  extProc:\n    disable: {}\n", section="untouched"),
    )
    resp = stack.wait("proc.example.com", lambda r: "x-proc-beta" in body_of(r)["headers"], "/headers",
                      "ext proc to add a request header")
    assert body_of(resp)["headers"]["x-proc-beta"] == "request"
    assert "x-proc-beta" not in resp.headers  # response headers are skipped by the extension's mode

    both = stack.get("proc.example.com", "/both")
    assert body_of(both)["headers"]["x-proc-beta"] == "request"
    assert both.headers["x-proc-beta"] == "response"  # the route's processingMode sends them

    body = stack.get("proc.example.com", "/body", method="POST", content=b"make me loud")
    assert body_of(body)["body"] == "MAKE ME LOUD"

    untouched = stack.get("proc.example.com", "/untouched")
    assert "x-proc-beta" not in body_of(untouched)["headers"]

    blocked = stack.get("proc.example.com", "/headers", headers={"x-proc-block": "1"})
    assert blocked.status_code == 418 and blocked.text == "blocked by beta\n"

    anc = stack.ancestors("proc")[0]
    applied = condition(anc["conditions"], "Applied")
    assert applied["reason"] == "Applied"
    assert applied["message"] == (
        "applied: extProc; on some routes extProc overridden by "
        "policy default/proc-body on the more specific HTTPRoute default/proc rule body, "
        "policy default/proc-both on the more specific HTTPRoute default/proc rule both-ways, "
        "policy default/proc-off on the more specific HTTPRoute default/proc rule untouched")


def test_ext_proc_failure_mode(stack: Stack) -> None:
    # Nothing listens behind these extensions.
    from tests.harness import free_port

    dead = free_port()
    stack.write(
        "proc-dead.yaml",
        f"""
apiVersion: v1
kind: Service
metadata: {{name: proc-open}}
spec: {{ports: [{{port: {dead}}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: proc-closed}}
spec: {{ports: [{{port: {dead}}}]}}
""",
        ext("open", dead),  # failOpen defaults to true, as in kgateway
        ext("closed", dead, "    failOpen: false\n"),
        stack.route("proc-open", "proc-open.example.com"),
        stack.route("proc-closed", "proc-closed.example.com"),
        policy("proc-open", "proc-open", "  extProc:\n    extensionRef: {name: open}\n"),
        policy("proc-closed", "proc-closed", "  extProc:\n    extensionRef: {name: closed}\n"),
    )
    stack.wait("proc-closed.example.com", lambda r: r.status_code >= 500, what="fail-closed ext proc to refuse")
    stack.wait("proc-open.example.com", lambda r: r.status_code == 200, what="fail-open ext proc to pass requests")


def test_filter_stage_request_attributes_and_buffer_stage(stack: Stack) -> None:
    import base64
    import hashlib

    early, late = stack.servers.proc("early"), stack.servers.proc("late")
    stack.service("proc-early", early.port)
    stack.service("proc-late", late.port)
    user = "ada:{SHA}" + base64.b64encode(hashlib.sha1(b"lovelace").digest()).decode()
    auth = f"  basicAuth:\n    users: ['{user}']\n"
    stack.write(
        "proc-stages.yaml",
        ext("early", early.port, "    filterStage: {stage: AuthN, predicate: Before}\n"
                                 "    requestAttributes: [request.path, request.method]\n"),
        ext("late", late.port),  # kgateway's default: After AuthZ
        stack.route("stage-early", "stage-early.example.com"),
        stack.route("stage-late", "stage-late.example.com"),
        policy("stage-early", "stage-early", "  extProc:\n    extensionRef: {name: early}\n" + auth),
        policy("stage-late", "stage-late", "  extProc:\n    extensionRef: {name: late}\n" + auth),
        stack.route("buffer-late", "buffer-late.example.com"),
        policy("buffer-late", "buffer-late", auth + "  buffer:\n    maxRequestSize: 1Ki\n"),
    )
    good = ("ada", "lovelace")
    stack.wait("stage-early.example.com", lambda r: r.status_code == 200, "/in", "the early ext proc", auth=good)
    stack.wait("stage-late.example.com", lambda r: r.status_code == 200, "/in", "the late ext proc", auth=good)

    # Before AuthN, the processor sees the request basic auth then refuses; after AuthZ it never does.
    assert stack.get("stage-early.example.com", "/refused").status_code == 401
    assert stack.get("stage-late.example.com", "/refused").status_code == 401
    assert "/refused" in early.paths and "/refused" not in late.paths
    # requestAttributes reach the server, evaluated by Envoy for the request.
    sent = early.attributes[-1]["envoy.filters.http.ext_proc"]
    assert sent == {"request.path": "/refused", "request.method": "GET"}
    assert late.attributes == []

    # The buffer filter sits after authentication by default: an anonymous large body is 401...
    big = b"x" * 4096
    assert stack.get("buffer-late.example.com", "/up", method="POST", content=big).status_code == 401
    assert stack.get("buffer-late.example.com", "/up", method="POST", content=big, auth=good).status_code == 413
    # ...until a route asks for it Before AuthN: the listener's one buffer filter moves to the
    # earliest place asked for, so the same request is now refused for its size.
    stack.write("proc-buffer-early.yaml", stack.route("buffer-early", "buffer-early.example.com"),
                policy("buffer-early", "buffer-early", "  buffer:\n    maxRequestSize: 1Ki\n"
                                                       "    filterStage: {stage: AuthN, predicate: Before}\n"))
    stack.wait("buffer-late.example.com", lambda r: r.status_code == 413, "/up", "the buffer filter to move",
               method="POST", content=big)


def test_route_cache_action_clear_reroutes_after_a_header_change(stack: Stack) -> None:
    other = stack.servers.echo("other")
    stack.service("other", other.port)
    rc = stack.servers.proc("rc")
    stack.service("proc-rc", rc.port)
    stack.service("proc-rc-keep", rc.port)
    rules = f"""
        - matches: [{{headers: [{{name: x-proc-rc, value: request}}]}}]
          backendRefs: [{{name: other, port: {other.port}}}]
        - backendRefs: [{{name: app, port: 80}}]
    """
    stack.write(
        "proc-route-cache.yaml",
        ext("rc", rc.port, "    routeCacheAction: Clear\n"),
        ext("rc-keep", rc.port),  # FromResponse: the server never asks for a clear
        stack.route("rc-clear", "rc-clear.example.com", rules),
        stack.route("rc-keep", "rc-keep.example.com", rules),
        policy("rc-clear", "rc-clear", "  extProc:\n    extensionRef: {name: rc}\n"),
        policy("rc-keep", "rc-keep", "  extProc:\n    extensionRef: {name: rc-keep}\n"),
    )
    kept = stack.wait("rc-keep.example.com", lambda r: "x-proc-rc" in body_of(r)["headers"], what="ext proc")
    assert body_of(kept)["pod"] == "app"  # the header came after routing: the first choice stands
    cleared = stack.get("rc-clear.example.com")
    assert body_of(cleared)["pod"] == "other"  # routed again with the header the processor set
