"""What the scope key of a split route table costs Envoy per request, in instructions.

`python -m tests.bench.scope_key_cost [--requests N]` (~3 min; needs valgrind).
Not one of the reported benchmarks: the figures of xds/translator/scoped.py's
docstring and docs/gateway-api.md ("Large route tables") come from it.

One Envoy per case, under callgrind, 2,000 hosts of one direct-response route
each: the whole table; the table split in 4 scopes with a constant key (what
the scoped lookup and the key header cost); and the key lychgate emits
(scoped.scope_key_mutation) from its Envoy module and from CEL, at 2, 3 and 6
bits, and from the module at 8. After a warm-up the counters are zeroed, N requests go over one
keep-alive connection to the last host, in upper case, and the counters are
dumped: instructions / N. Deterministic up to a few hundred instructions, so it
tells apart what wrk on a shared machine cannot.
"""

from __future__ import annotations

import argparse
import http.client
import os
import tempfile
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from lychgate import native
from lychgate.xds.translator import scoped
from tests.bench.callgrind import instructions_per_request
from tests.bench.common import route_host, route_name

HOSTS = [route_host(route_name(i, "h")) for i in range(2000)]


def _vhost(host: str) -> dict[str, Any]:
    return {"name": host, "domains": [host], "routes": [
        {"match": {"prefix": "/"}, "direct_response": {"status": 200, "body": {"inline_string": "ok"}}}]}


def _manager(key: str, bits: int) -> dict[str, Any]:
    """The connection manager of a case: key "whole", "const", "native" or "cel"."""
    if key == "whole":
        return {"route_config": {"name": "w", "ignore_port_in_host_matching": True,
                                 "virtual_hosts": [_vhost(h) for h in HOSTS]}}
    scopes = [{"name": scoped.scope_name("t", i), "key": {"fragments": [{"string_key": scoped.scope_name("t", i)}]},
               "route_configuration": {"name": scoped.scope_name("t", i), "ignore_port_in_host_matching": True,
                                       "virtual_hosts": [_vhost(h) for h in HOSTS
                                                         if scoped.bucket(h, bits, key == "native") == i]}}
              for i in range(1 << bits)]
    if key == "const":  # one scope of every host (bits 0): the lookup without computing a key
        mutation = {"name": "const", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation",
            "mutations": [{"append": {"header": {"key": scoped.SCOPE_HEADER, "value": "t/0"},
                                      "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}}]}}
    else:
        mutation = json_format.MessageToDict(scoped.scope_key_mutation("t", bits, key == "native"),
                                             preserving_proto_field_name=True)
    return {"scoped_routes": {
        "name": "t", "scope_key_builder": {"fragments": [{"header_value_extractor": {"name": scoped.SCOPE_HEADER, "index": 0}}]},
        "scoped_route_configurations_list": {"scoped_route_configurations": scopes}},
        "early_header_mutation_extensions": [mutation]}


def _bootstrap(key: str, bits: int, port: int) -> dict[str, Any]:
    hcm = {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
                    "HttpConnectionManager",
           "stat_prefix": "x", "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
               "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
           **_manager(key, bits)}
    return {"static_resources": {"listeners": [{
        "name": "l", "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [{"filters": [{"name": "hcm", "typed_config": hcm}]}]}]}}


def _measure(directory: Path, key: str, bits: int, requests: int, port: int) -> float:
    """Envoy's instructions per request of one case (all its threads)."""
    module = native.scope_module()
    env = {**os.environ, "ENVOY_DYNAMIC_MODULES_SEARCH_PATH": str(module.parent)} if module else None
    host = HOSTS[-1].upper()

    def send_one(conn: http.client.HTTPConnection) -> int:
        conn.request("GET", "/", headers={"Host": host})
        answer = conn.getresponse()
        answer.read()
        return answer.status

    return instructions_per_request(directory, f"{key}{bits}", _bootstrap(key, bits, port), port, requests,
                                    send_one, env)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.scope_key_cost", description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    opts = parser.parse_args()
    cases = [("whole", 0), ("const", 0)] + [(key, bits) for bits in (2, 3, 6) for key in ("native", "cel")] \
        + [("native", scoped.NATIVE_MAX_BITS)]
    if native.scope_module() is None:
        raise SystemExit("src/lychgate/native/liblychgate_scope.so is not built: run `make native`")
    with tempfile.TemporaryDirectory(prefix="lychgate-scope-key-") as tmp:
        for n, (key, bits) in enumerate(cases):
            cost = _measure(Path(tmp), key, bits, opts.requests, 18300 + n)
            print(f"{key:6s} {bits} bits  {cost / 1000:6.1f}k instructions/request", flush=True)


if __name__ == "__main__":
    main()
