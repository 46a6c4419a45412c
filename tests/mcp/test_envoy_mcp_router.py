"""Why lychgate serves MCP Backends through its own relay and not Envoy's `mcp_router`.

Envoy 1.40 (the one lychgate ships) has an MCP router filter that aggregates servers
(envoy.extensions.filters.http.mcp_router.v3.McpRouter: `servers` with a cluster and a
path, `session_identity`, `lazy_initialization`; no name separator, no transport). This
runs it as documented, in a static Envoy in front of two SDK servers, and records what
kgateway's MCP Backend promises and the filter does not do (its proto has no setting for
either): kgateway's `<target>_<tool>` names, and servers answering with event streams.
It has no HTTP+SSE transport for targets at all. When a test here fails, Envoy
has caught up: docs/mcp.md "Why a relay" and the design are to be revisited.
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from lychgate.deploy.local import envoy_binary
from tests.harness import free_port, wait_for
from tests.mcp.servers import Server, running, sdk_client

pytestmark = pytest.mark.e2e


def config(listen: int, admin: int, servers: list[Server]) -> str:
    backends = "".join(f"""
              - name: {s.name}
                mcp_cluster: {{cluster: {s.name}, path: /mcp}}""" for s in servers)
    clusters = "".join(f"""
  - name: {s.name}
    type: STATIC
    load_assignment:
      cluster_name: {s.name}
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {s.port}}}}}}}}}]}}]""" for s in servers)
    return textwrap.dedent(f"""
admin: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}}}
static_resources:
  listeners:
  - name: mcp
    address: {{socket_address: {{address: 127.0.0.1, port_value: {listen}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: mcp
          route_config:
            virtual_hosts: [{{name: all, domains: ["*"], routes: [{{match: {{prefix: /mcp}}, route: {{cluster: {servers[0].name}}}}}]}}]
          http_filters:
          - name: envoy.filters.http.mcp
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.mcp.v3.Mcp}}
          - name: envoy.filters.http.mcp_router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.mcp_router.v3.McpRouter
              servers:{backends}
  clusters:{clusters}
""")


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Servers answering with event streams (the SDK's default), as most MCP servers do.
    with running(("one", "http"), ("two", "http")) as servers:
        listen, admin = free_port(), free_port()
        path = tmp_path_factory.mktemp("mcp-router") / "envoy.yaml"
        path.write_text(config(listen, admin, servers))
        envoy = subprocess.Popen([envoy_binary(), "-c", str(path), "--base-id", str(listen), "-l", "error"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: httpx.get(f"http://127.0.0.1:{admin}/ready", timeout=2).status_code == 200, 20,
                     "Envoy with the MCP router")
            yield f"http://127.0.0.1:{listen}/mcp"
        finally:
            envoy.kill()
            envoy.wait(10)




async def test_tools_are_named_with_two_underscores_not_kgateways_one(router: str) -> None:
    async with sdk_client(router) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert "one__whoami" in names and "one_whoami" not in names


async def test_prompts_get_breaks_on_a_server_answering_an_event_stream(router: str) -> None:
    async with sdk_client(router) as client:
        assert {p.name for p in (await client.list_prompts()).prompts} >= {"one__greet", "two__greet"}
        # The server's text/event-stream answer is passed on labelled application/json.
        with pytest.raises(MCPError):
            await client.get_prompt("one__greet", {"who": "ada"})

