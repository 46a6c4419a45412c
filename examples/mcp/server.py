"""An MCP server for the MCP gateway example (docs/mcp.md), on the official SDK:
`pip install mcp==2.3.0`, then

    python examples/mcp/server.py --name time --port 3101
    python examples/mcp/server.py --name notes --port 3102 --transport sse

Each has the tools `whoami` (its name), `add` and `set_alarm`, a prompt `greet` and a
resource `note://<name>/readme`.
"""

from __future__ import annotations

import argparse

import uvicorn
from mcp.server.mcpserver import MCPServer


def app(name: str) -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    def whoami() -> str:
        """The name of this server."""
        return name

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool()
    def set_alarm(at: str) -> str:
        """Pretend to set an alarm."""
        return f"{name}: alarm set for {at}"

    @server.prompt()
    def greet(who: str) -> str:
        """A greeting from this server."""
        return f"Hello {who}, from {name}."

    @server.resource(f"note://{name}/readme")
    def readme() -> str:
        return f"The readme of {name}."

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--transport", choices=["streamable-http", "sse"], default="streamable-http")
    opts = parser.parse_args()
    server = app(opts.name)
    asgi = server.sse_app() if opts.transport == "sse" else server.streamable_http_app()
    uvicorn.run(asgi, host=opts.host, port=opts.port, log_level="warning")


if __name__ == "__main__":
    main()
