"""What a transformation costs Envoy per request, in instructions.

`python -m tests.bench.transformation_cost [--requests N]` (~2 min; needs valgrind).
Not one of the reported benchmarks: the figure of docs/benchmarks/history.md
("What a transformation costs per request") comes from it.

One Envoy per case, under callgrind, one route answering a 200 with a small
JSON body (a direct response, so no backend is measured), the listener's Lua
filter (lua_runtime.RUNTIME, off by default) as lychgate configures it:

- `none`: the route without a transformation (the filter stays off);
- `headers`: a typical header transformation: two request headers from
  header()/request_header() and a condition, one response header from a request
  header (stashed in dynamic metadata by the request half);
- `json`: the request body parsed as JSON, a header from a field, the body
  rebuilt by a loop over an array, and the response header;
- `response-body`: the response body rewritten from itself with body().

The templates are compiled by the real compiler and reach Envoy as
transformation.per_route() builds them. After a warm-up the counters are
zeroed, N POSTs of a 200-byte JSON body go over one keep-alive connection and
the counters are dumped: instructions / N, and the difference from `none`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import tempfile
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from lychgate import ir
from lychgate.translate.policies.templates import compile_template
from lychgate.xds.translator import transformation
from lychgate.xds.translator.lua_runtime import RUNTIME
from tests.bench.callgrind import instructions_per_request

BODY = json.dumps({"user": {"name": "ada", "id": 7}, "items": [{"sku": f"s{i}", "qty": i} for i in range(5)],
                   "note": "x" * 40}).encode()
ANSWER = json.dumps({"status": "ok", "order": 42, "lines": [1, 2, 3]})


def _t(text: str) -> ir.Template:
    return compile_template(text, "bench")


RESPONSE_HEADER = ir.MessageTransform(set=(("x-asked-by", _t('{{ request_header("x-user") }}')),))
CASES: dict[str, ir.Transformation | None] = {
    "none": None,
    "headers": ir.Transformation(
        request=ir.MessageTransform(set=(
            ("x-route", _t('{{ header(":method") }} {{ request_header(":path") }}')),
            ("x-tier", _t('{% if header("x-user") == "ada" %}gold{% else %}basic{% endif %}')),
        ), remove=("x-debug",)),
        response=RESPONSE_HEADER),
    "json": ir.Transformation(
        request=ir.MessageTransform(
            set=(("x-user-id", _t("{{ user.id }}")),),
            body=_t('{"who": {{ user.name | tojson }}, "skus": [{% for i in items %}"{{ i.sku }}"'
                    '{% if not loop.last %},{% endif %}{% endfor %}]}'),
            parse_as="AsJson"),
        response=RESPONSE_HEADER),
    "response-body": ir.Transformation(
        response=ir.MessageTransform(body=_t('{"wrapped": {{ body() }}}'))),
}
FILTER = transformation.FILTER


def _bootstrap(case: ir.Transformation | None, port: int) -> dict[str, Any]:
    route: dict[str, Any] = {"match": {"prefix": "/"}, "direct_response": {"status": 200, "body": {"inline_string": ANSWER}}}
    if case is not None:
        per_route = json_format.MessageToDict(transformation.per_route(case), preserving_proto_field_name=True)
        route["typed_per_filter_config"] = {FILTER: {
            "@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig",
            "config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute", **per_route}}}
    lua = {"@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
           "default_source_code": {"inline_string": RUNTIME}}
    hcm = {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
                    "HttpConnectionManager",
           "stat_prefix": "x",
           "http_filters": [{"name": FILTER, "typed_config": lua, "disabled": True},
                            {"name": "envoy.filters.http.router", "typed_config": {
                                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
           "route_config": {"name": "r", "virtual_hosts": [{"name": "h", "domains": ["*"], "routes": [route]}]}}
    return {"static_resources": {"listeners": [{
        "name": "l", "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [{"filters": [{"name": "hcm", "typed_config": hcm}]}]}]}}


def _send_one(conn: http.client.HTTPConnection) -> int:
    conn.request("POST", "/orders?page=2", body=BODY, headers={
        "Host": "bench.example.com", "x-user": "ada", "x-debug": "1", "content-type": "application/json"})
    answer = conn.getresponse()
    answer.read()
    return answer.status


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.transformation_cost", description=__doc__)
    parser.add_argument("--requests", type=int, default=1000)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lychgate-transformation-cost-") as tmp:
        base = 0.0
        for n, name in enumerate(CASES):
            cost = instructions_per_request(Path(tmp), name, _bootstrap(CASES[name], 18400 + n), 18400 + n,
                                            opts.requests, _send_one)
            base = base or cost
            print(f"{name:14s} {cost / 1000:7.1f}k instructions/request  (+{(cost - base) / 1000:.1f}k)", flush=True)


if __name__ == "__main__":
    main()
