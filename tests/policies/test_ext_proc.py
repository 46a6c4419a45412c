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
