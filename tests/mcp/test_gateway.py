"""The MCP gateway end to end: a real `lychgate run` with its Envoy and its MCP relay, MCP
servers written with the official SDK behind one MCP Backend (a static target on each
transport and one found by a Service selector), and the SDK's clients at the Gateway.

What a user notices: one endpoint lists and calls every server's tools over either
transport; a TrafficPolicy over Envoy's MCP metadata denies one tool (as a JSON-RPC
error carrying the call's id); access logs and relay metrics name the tool; a server
that goes down leaves the others serving; a client cannot pick another Backend."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families

import mcp
from lychgate.mcp.config import BACKEND_HEADER
from tests.harness import Lychgate, gateway_yaml, wait_for
from tests.mcp.servers import TIMEOUT, Server, initializes, running, sdk_client, text

pytestmark = pytest.mark.e2e

MCP = "envoy.filters.http.mcp"


def manifests(one: Server, two: Server, three: Server, other: Server, log: Path) -> str:
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: tools, namespace: default}}
spec:
  type: MCP
  mcp:
    targets:
      - name: one
        static: {{host: 127.0.0.1, port: {one.port}, protocol: StreamableHTTP}}
      - name: two
        static: {{host: 127.0.0.1, port: {two.port}, protocol: SSE}}
      - name: found
        selector: {{service: {{matchLabels: {{mcp: "yes"}}}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: three, namespace: default, labels: {{mcp: "yes"}}}}
spec:
  ports: [{{name: mcp, port: 80, targetPort: {three.port}, appProtocol: kgateway.dev/mcp}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: three-1, namespace: default, labels: {{kubernetes.io/service-name: three}}}}
addressType: IPv4
ports: [{{name: mcp, port: {three.port}}}]
endpoints: [{{addresses: ["127.0.0.1"]}}]
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: Backend
metadata: {{name: other, namespace: default}}
spec:
  mcp:
    targets:
      - name: other
        static: {{host: 127.0.0.1, port: {other.port}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: mcp, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
    - name: tools
      matches: [{{path: {{type: PathPrefix, value: /mcp}}}}]
      backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: tools}}]
    - name: other
      matches: [{{path: {{type: PathPrefix, value: /other}}}}]
      backendRefs: [{{group: gateway.lychgate.dev, kind: Backend, name: other}}]
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: tool-access, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: mcp, sectionName: tools}}]
  rbac:
    action: Deny
    policy:
      matchExpressions:
        - >-
          metadata.filter_metadata['{MCP}']['method'] == 'tools/call'
          && metadata.filter_metadata['{MCP}']['params']['name'] == 'one_fail'
          && !('x-team' in request.headers && request.headers['x-team'] == 'ops')
---
apiVersion: v1
kind: Secret
metadata: {{name: mcp-keys, namespace: default, labels: {{api-keys: mcp}}}}
stringData: {{agent: key-agent-1234}}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: other-keys, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: mcp, sectionName: other}}]
  apiKeyAuth:
    secretSelector: {{matchLabels: {{api-keys: mcp}}}}
    keySources: [{{header: x-api-key}}]
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: ListenerPolicy
metadata: {{name: logs, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}]
  default:
    httpSettings:
      accessLog:
        - fileSink:
            path: {log}
            jsonFormat:
              path: "%REQ(:PATH)%"
              status: "%RESPONSE_CODE%"
              mcp_method: "%DYNAMIC_METADATA({MCP}:method)%"
              mcp_tool: "%DYNAMIC_METADATA({MCP}:params:name)%"
"""


class Stack:
    def __init__(self, lg: Lychgate, servers: list[Server], log: Path) -> None:
        self.lg, self.servers, self.log = lg, servers, log

    def url(self, path: str = "/mcp") -> str:
        return f"http://{self.lg.address('gw')}:8080{path}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("mcp-gateway")
    with running(("one", "http"), ("two", "sse"), ("three", "json"), ("other", "http")) as servers:
        lg = Lychgate(root)
        try:
            log = root / "access.json"
            lg.write("gateway.yaml", gateway_yaml())
            lg.write("mcp.yaml", manifests(*servers, log))
            lg.start()
            stack = Stack(lg, servers, log)
            wait_for(lambda: initializes(stack.url()), 30, "the MCP route to answer initialize")
            yield stack
        finally:
            lg.close()




def session(url: str, transport: str = "http",
            headers: dict[str, str] | None = None) -> contextlib.AbstractAsyncContextManager[mcp.ClientSession]:
    return sdk_client(url, transport, headers)


@pytest.mark.parametrize("transport, path", [("http", "/mcp"), ("sse", "/mcp/sse")])
async def test_one_endpoint_serves_every_server_on_both_transports(stack: Stack, transport: str, path: str) -> None:
    async with session(stack.url(path), transport) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"one_whoami", "two_whoami", "three-80_whoami", "one_add", "two_add"} <= tools
        for name, owner in (("one_whoami", "one"), ("two_whoami", "two"), ("three-80_whoami", "three")):
            assert text(await client.call_tool(name, {})) == owner
        assert text(await client.call_tool("two_add", {"a": 2, "b": 3})) == "5"
        prompt = await client.get_prompt("two_greet", {"who": "ada"})
        assert "two greets ada" in json.dumps(prompt.model_dump(mode="json"))
        readme = await client.read_resource("res://three/readme")
        assert "readme of three" in json.dumps(readme.model_dump(mode="json"))


@pytest.mark.parametrize("transport, path", [("http", "/mcp"), ("sse", "/mcp/sse")])
async def test_progress_and_logs_stream_through_envoy_before_the_answer(stack: Stack, transport: str,
                                                                        path: str) -> None:
    """A target's notifications during a call (an event stream through Envoy) reach the client."""
    progress: list[tuple[float, str | None]] = []
    logs: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    async def on_log(params: mcp.types.LoggingMessageNotificationParams) -> None:
        logs.append(str(params.data))

    async with sdk_client(stack.url(path), transport, logging_callback=on_log) as client:
        result = await client.call_tool("two_add", {"a": 20, "b": 22}, progress_callback=on_progress)
    assert text(result) == "42"
    assert progress == [(1.0, "two half way")] and logs == ["two adds 20 and 22"]


async def test_sessions_are_kept_per_client_and_per_target(stack: Stack) -> None:
    async with session(stack.url()) as first, session(stack.url()) as second:
        await first.call_tool("one_remember", {"value": "first"})
        await second.call_tool("one_remember", {"value": "second"})
        assert text(await first.call_tool("one_recall", {})) == "first"
        assert text(await second.call_tool("one_recall", {})) == "second"


async def test_a_policy_over_the_mcp_metadata_denies_one_tool(stack: Stack) -> None:
    async with session(stack.url()) as client:
        assert text(await client.call_tool("one_whoami", {})) == "one"  # the route serves
        with pytest.raises(MCPError) as denied:  # Envoy's 403, as the JSON-RPC error the SDK reads
            await client.call_tool("one_fail", {})
        assert denied.value.error.code == -32001 and "access denied" in denied.value.error.message
    # The same call as a raw request: the error is JSON-RPC's, with the call's id.
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        r = await http.post(stack.url(), headers={"accept": "application/json, text/event-stream"},
                            json={"jsonrpc": "2.0", "id": 41, "method": "tools/call",
                                  "params": {"name": "one_fail", "arguments": {}}})
        assert r.status_code == 403
        assert r.headers["content-type"].startswith("application/json")
        body = r.json()
        assert body["jsonrpc"] == "2.0" and body["id"] == 41 and body["error"]["code"] == -32001
    # The team the policy lets through reaches the tool (which fails as a tool error, not a 403).
    async with session(stack.url(), headers={"x-team": "ops"}) as ops:
        result = await ops.call_tool("one_fail", {})
        assert result.is_error and "fail" in text(result)


def test_access_logs_name_the_method_and_the_tool(stack: Stack) -> None:
    async def call() -> None:
        async with session(stack.url()) as client:
            await client.call_tool("two_whoami", {})

    def logged() -> dict[str, str] | None:
        asyncio.run(call())
        lines = stack.log.read_text().splitlines() if stack.log.exists() else []
        return next((e for e in map(json.loads, lines) if e.get("mcp_tool") == "two_whoami"), None)

    entry = wait_for(logged, 20, "a tools/call of two_whoami in the access log")
    assert entry["mcp_method"] == "tools/call" and entry["status"] == 200


async def test_relay_metrics_count_tool_calls(stack: Stack) -> None:
    async with session(stack.url()) as client:
        for _ in range(3):
            await client.call_tool("one_add", {"a": 1, "b": 1})
    where = json.loads((stack.lg.state / "mcp" / "relay.json").read_text())["metrics"]

    def calls() -> float:
        scraped = httpx.get(f"http://{where}/metrics", timeout=5).text
        return sum(s.value for f in text_string_to_metric_families(scraped) for s in f.samples
                   if s.name.endswith("tool_calls_total") and s.labels.get("tool") == "add"
                   and s.labels.get("target") == "one" and s.labels.get("backend") == "default/tools")

    assert calls() >= 3


async def test_a_client_cannot_choose_another_backend(stack: Stack) -> None:
    async with session(stack.url(), headers={BACKEND_HEADER: "default/other"}) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
    assert "one_whoami" in tools and "whoami" not in tools  # still Backend tools, never other's
    async with session(stack.url("/other"), headers={"x-api-key": "key-agent-1234"}) as client:
        assert text(await client.call_tool("whoami", {})) == "other"  # one target: names unchanged


async def test_an_api_key_policy_guards_the_mcp_route(stack: Stack) -> None:
    # No key: Envoy's 401, as the JSON-RPC error of initialize (the SDK's task group wraps it).
    with pytest.RaisesGroup(pytest.RaisesExc(MCPError, check=lambda e: e.error.data == {"status": 401}),
                            flatten_subgroups=True):
        async with session(stack.url("/other")):
            pass
    async with session(stack.url("/other"), headers={"x-api-key": "key-agent-1234"}) as client:
        assert text(await client.call_tool("whoami", {})) == "other"


async def test_a_server_down_leaves_the_others_serving(stack: Stack) -> None:
    two = next(s for s in stack.servers if s.name == "two")
    two.kill()  # last test of the module: the server stays down
    async with session(stack.url()) as client:
        listed = await client.list_tools()
        tools = {t.name for t in listed.tools}
        assert "one_whoami" in tools and "two_whoami" not in tools
        assert "two" in json.dumps(listed.model_dump(mode="json", by_alias=True).get("_meta") or {})
        assert text(await client.call_tool("one_whoami", {})) == "one"


@pytest.mark.parametrize("content_type, body, status", [
    # Envoy's MCP filter does not parse what is not JSON: the relay does not act on it either.
    ("text/plain", '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "one_fail"}}', {415}),
    # A key twice: a parser keeping the first and one keeping the last would disagree on the tool.
    # Envoy's keeps the last (so its policy denies, 403); the relay would refuse it (400).
    ("application/json",
     '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "one_whoami", "name": "one_fail"}}',
     {400, 403}),
    # A batch: no metadata for the policy to read.
    ("application/json", '[{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "one_fail"}}]', {400}),
])
async def test_a_body_the_policy_did_not_read_is_refused(stack: Stack, content_type: str, body: str,
                                                         status: set[int]) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        r = await http.post(stack.url(), content=body, headers={
            "accept": "application/json, text/event-stream", "content-type": content_type})
    assert r.status_code in status, r.text
    assert r.json()["error"]["code"] in (-32600, -32700, -32001)  # a JSON-RPC refusal: the relay's or the policy's
