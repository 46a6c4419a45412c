"""The MCP gateway: kgateway's MCP Backend served by a relay beside Envoy.

Envoy's own `envoy.filters.http.mcp` filter parses every MCP request on an MCP
route into dynamic metadata (policies, access logs); the relay (relay.py) is the
upstream of those routes and aggregates the Backend's targets behind one endpoint.
Why not Envoy's `mcp_router`: docs/mcp.md "Why a relay".
"""
