"""Many routes in one virtual host: the prefix map on :path answers as the route list would.

Here a small model of Envoy's matching (longest key that is a string prefix of
:path, no fallback to a shorter key, each list checked in order with the
routes' full matches; see route_matcher.py for how that was measured) runs
against the translator's output; tests/e2e/test_routing.py sends requests
through the real Envoy."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

import pytest
from envoy.config.route.v3 import route_components_pb2 as route_pb
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from lychgate import debug, ir
from lychgate.xds.cache import route_hash
from lychgate.xds.translator import route_matcher
from lychgate.xds.translator.route import virtual_host

CLUSTER = "kube/default/svc/80"


def _route(i: int, path_type: ir.PathType, path: str, **match: object) -> ir.Route:
    return ir.Route(ir.RouteSource("HTTPRoute", "default", f"r{i}", 0, 0),
                    ir.Match(path_type=path_type, path=path, **match),  # type: ignore[arg-type]
                    ir.Forward((ir.WeightedCluster(CLUSTER, 1),)))


def _routes(*specs: tuple[ir.PathType, str] | tuple[ir.PathType, str, dict[str, object]]) -> list[ir.Route]:
    return [_route(i, s[0], s[1], **(s[2] if len(s) > 2 else {})) for i, s in enumerate(specs)]  # type: ignore[misc]


def _names(routes: list[ir.Route], lists: dict[str, list[int]]) -> dict[str, list[str]]:
    return {key: [routes[i].source.name for i in idx] for key, idx in sorted(lists.items())}


# --- keys and lists ------------------------------------------------------------------


def test_keys_are_prefixes_of_every_path_a_route_can_match() -> None:
    assert route_matcher.path_key(ir.Match("Exact", "/p1")) == "/p1"
    assert route_matcher.path_key(ir.Match("Exact", "/p1/")) == "/p1/"
    assert route_matcher.path_key(ir.Match("PathPrefix", "/p1/")) == "/p1"
    assert route_matcher.path_key(ir.Match("PathPrefix", "/")) == "/"
    assert route_matcher.path_key(ir.Match("RegularExpression", "/p[0-9]+")) == ""


def test_a_list_holds_the_routes_of_every_key_that_is_a_string_prefix_of_its_own() -> None:
    routes = _routes(("Exact", "/p100"), ("PathPrefix", "/p10"), ("PathPrefix", "/p1"), ("PathPrefix", "/"))
    lists = route_matcher.route_lists([route_matcher.path_key(r.match) for r in routes])
    assert _names(routes, lists) == {
        "/": ["r3"],
        "/p1": ["r2", "r3"],
        # /p1 is in the lists of /p10 and /p100 although it never matches /p10...
        # paths: a prefix of the key as a string is enough to be kept, the
        # route's own segment-wise match rejects the request in Envoy.
        "/p10": ["r1", "r2", "r3"],
        "/p100": ["r0", "r1", "r2", "r3"],
    }


def test_lists_keep_the_precedence_order_of_the_virtual_host() -> None:
    # Whatever the order, each list keeps it: ancestors may come first.
    routes = _routes(("PathPrefix", "/"), ("PathPrefix", "/a"), ("Exact", "/a/b"))
    lists = route_matcher.route_lists([route_matcher.path_key(r.match) for r in routes])
    assert _names(routes, lists)["/a/b"] == ["r0", "r1", "r2"]


def test_exact_and_prefix_of_the_same_path_share_a_key_in_order() -> None:
    routes = _routes(("Exact", "/a"), ("PathPrefix", "/a/"), ("PathPrefix", "/"))
    lists = route_matcher.route_lists([route_matcher.path_key(r.match) for r in routes])
    assert _names(routes, lists) == {"/": ["r2"], "/a": ["r0", "r1", "r2"]}


def test_method_and_header_conditioned_routes_share_the_key_of_their_path() -> None:
    routes = _routes(
        ("PathPrefix", "/api", {"method": "POST"}),
        ("PathPrefix", "/api", {"headers": (ir.StringMatch("x-canary", "Exact", "yes"),)}),
        ("PathPrefix", "/api"),
    )
    lists = route_matcher.route_lists([route_matcher.path_key(r.match) for r in routes])
    assert _names(routes, lists) == {"/api": ["r0", "r1", "r2"]}


def test_regex_routes_are_in_every_list() -> None:
    routes = _routes(("Exact", "/x"), ("RegularExpression", "/v[0-9]+"), ("PathPrefix", "/v1"))
    lists = route_matcher.route_lists([route_matcher.path_key(r.match) for r in routes])
    assert _names(routes, lists) == {"": ["r1"], "/x": ["r0", "r1"], "/v1": ["r1", "r2"]}


def test_small_virtual_hosts_keep_their_route_list() -> None:
    small = _routes(*[("PathPrefix", f"/p{i}") for i in range(route_matcher.MATCHER_MIN_ROUTES - 1)])
    vh = virtual_host(ir.VirtualHost("80/h", ("h",), tuple(small)))
    assert len(vh.routes) == len(small) and not vh.HasField("matcher")
    big = _routes(*[("PathPrefix", f"/p{i}") for i in range(route_matcher.MATCHER_MIN_ROUTES)])
    vh = virtual_host(ir.VirtualHost("80/h", ("h",), tuple(big)))
    assert not vh.routes and len(vh.matcher.matcher_tree.prefix_match_map.map) == len(big)


def test_too_many_copies_keep_the_route_list() -> None:
    # Each regex route would be copied into every list: with many of them the
    # tree would hold several times the routes, and linear matching stays.
    n = route_matcher.MATCHER_MIN_ROUTES
    few = _routes(*[("PathPrefix", f"/p{i}") for i in range(n)], ("RegularExpression", "/re/.*"))
    assert route_matcher.use_matcher([r.match for r in few]) is not None
    many = _routes(*[("PathPrefix", f"/p{i}") for i in range(n)],
                   *[("RegularExpression", f"/re{i}/.*") for i in range(route_matcher.MAX_COPIES_PER_ROUTE + 1)])
    assert route_matcher.use_matcher([r.match for r in many]) is None
    vh = virtual_host(ir.VirtualHost("80/h", ("h",), tuple(many)))
    assert len(vh.routes) == len(many) and not vh.HasField("matcher")


# --- the tree answers as the list: a model of Envoy's matching --------------------------


def _string_ok(m: route_pb.HeaderMatcher | route_pb.QueryParameterMatcher, value: str | None) -> bool:
    if value is None:
        return False
    s = m.string_match
    return re.fullmatch(s.safe_regex.regex, value) is not None if s.HasField("safe_regex") else value == s.exact


def _matches(r: route_pb.Route, path: str, method: str, headers: dict[str, str]) -> bool:
    bare, _, query = path.partition("?")
    m = r.match
    kind = m.WhichOneof("path_specifier")
    if kind == "path":
        ok = bare == m.path
    elif kind == "prefix":
        ok = bare.startswith(m.prefix)
    elif kind == "path_separated_prefix":
        ok = bare == m.path_separated_prefix or bare.startswith(m.path_separated_prefix + "/")
    else:
        ok = re.fullmatch(m.safe_regex.regex, bare) is not None
    params = dict(parse_qsl(query, keep_blank_values=True))
    return ok and all(_string_ok(h, method if h.name == ":method" else headers.get(h.name)) for h in m.headers) \
        and all(_string_ok(q, params.get(q.name)) for q in m.query_parameters)


def _linear(vh: route_pb.VirtualHost, *request: object) -> str | None:
    return next((r.name for r in vh.routes if _matches(r, *request)), None)  # type: ignore[arg-type]


def _tree(vh: route_pb.VirtualHost, path: str, *rest: object) -> str | None:
    """Longest key that is a string prefix of :path (query included); its routes
    in order; no match there is no match at all."""
    table = vh.matcher.matcher_tree.prefix_match_map.map
    keys = [k for k in table if path.startswith(k)]
    if not keys:
        return None
    action = table[max(keys, key=len)].action.typed_config
    if action.type_url.endswith(".RouteList"):
        routes = list(route_pb.RouteList.FromString(action.value).routes)
    else:
        routes = [route_pb.Route.FromString(action.value)]
    return next((r.name for r in routes if _matches(r, path, *rest)), None)  # type: ignore[arg-type]


def _both(routes: list[ir.Route], monkeypatch: pytest.MonkeyPatch) -> tuple[route_pb.VirtualHost, route_pb.VirtualHost]:
    vh = ir.VirtualHost("80/h", ("h",), tuple(routes))
    monkeypatch.setattr(route_matcher, "MATCHER_MIN_ROUTES", 10**9)
    linear = virtual_host(vh)
    monkeypatch.setattr(route_matcher, "MATCHER_MIN_ROUTES", 1)
    monkeypatch.setattr(route_matcher, "MAX_COPIES_PER_ROUTE", 10**9)
    tree = virtual_host(vh)
    assert linear.routes and tree.HasField("matcher")
    return linear, tree


PRECEDENCE = _routes(
    ("Exact", "/p1"),
    ("RegularExpression", "/re/[0-9]+"),
    ("PathPrefix", "/p100"),
    ("PathPrefix", "/p10/"),
    ("PathPrefix", "/api", {"headers": (ir.StringMatch("x-canary", "Exact", "yes"),)}),
    ("PathPrefix", "/api", {"method": "POST"}),
    ("PathPrefix", "/api", {"query_params": (ir.StringMatch("v", "Exact", "2"),)}),
    ("PathPrefix", "/api"),
    ("PathPrefix", "/p1"),
    ("PathPrefix", "/"),
)


@pytest.mark.parametrize(("path", "method", "headers", "expected"), [
    ("/p1", "GET", {}, "r0"),  # Exact beats the prefix /p1
    ("/p1?x=1", "GET", {}, "r0"),  # the query string is not part of the path
    ("/p1/", "GET", {}, "r8"),
    ("/p1/x", "GET", {}, "r8"),
    ("/p10", "GET", {}, "r3"),
    ("/p10/x", "GET", {}, "r3"),
    ("/p100", "GET", {}, "r2"),
    ("/p1000", "GET", {}, "r9"),  # /p100 is a whole-segment prefix: falls to "/"
    ("/p11", "GET", {}, "r9"),
    ("/re/12", "GET", {}, "r1"),
    ("/re/12/x", "GET", {}, "r9"),
    ("/api/x", "GET", {"x-canary": "yes"}, "r4"),
    ("/api/x", "POST", {}, "r5"),
    ("/api/x?v=2", "GET", {}, "r6"),
    ("/api/x?v=3", "GET", {}, "r7"),
    ("/apix", "GET", {"x-canary": "yes"}, "r9"),
    ("/", "GET", {}, "r9"),
])
def test_tree_answers_as_the_list(path: str, method: str, headers: dict[str, str], expected: str,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    linear, tree = _both(PRECEDENCE, monkeypatch)
    want = f"httproute/default/{expected}/rule/0/match/0"
    assert _linear(linear, path, method, headers) == want
    assert _tree(tree, path, method, headers) == want


def test_no_route_is_no_route_in_both(monkeypatch: pytest.MonkeyPatch) -> None:
    linear, tree = _both(_routes(("Exact", "/p1"), ("PathPrefix", "/p10")), monkeypatch)
    for path in ("/p100", "/p1/", "/", "/p"):
        assert _linear(linear, path, "GET", {}) is None
        assert _tree(tree, path, "GET", {}) is None


_SEGMENTS = st.sampled_from(["a", "ab", "b", "a1", "1"])
_PATHS = st.lists(_SEGMENTS, max_size=3).map(lambda s: "/" + "/".join(s))


@st.composite
def _route_sets(draw: st.DrawFn) -> list[ir.Route]:
    out = []
    for i in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["Exact", "PathPrefix", "PathPrefix", "RegularExpression"]))
        path = draw(_PATHS) + draw(st.sampled_from(["", "/"])) if kind != "RegularExpression" else \
            draw(st.sampled_from(["/a.*", "/[ab]+", "/a/b1?"]))
        extra: dict[str, object] = draw(st.sampled_from(
            [{}, {}, {"method": "POST"}, {"headers": (ir.StringMatch("x", "Exact", "1"),)}]))
        out.append(_route(i, kind, path.replace("//", "/"), **extra))
    return out


@settings(max_examples=300, deadline=None)
@given(routes=_route_sets(), paths=st.lists(
    st.tuples(_PATHS, st.sampled_from(["", "/", "?q=1", "/?a"]), st.sampled_from(["GET", "POST"]),
              st.sampled_from([{}, {"x": "1"}])), min_size=1, max_size=8))
def test_tree_answers_as_the_list_for_any_routes(
        routes: list[ir.Route], paths: list[tuple[str, str, str, dict[str, str]]]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        linear, tree = _both(routes, mp)
    for path, tail, method, headers in paths:
        request = (path + tail).replace("//", "/")
        assert _tree(tree, request, method, headers) == _linear(linear, request, method, headers), request


# --- the routes are still there for debugging and blame ---------------------------------


def test_routes_of_a_tree_are_the_translated_routes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    linear, tree = _both(PRECEDENCE, monkeypatch)
    want = {r.name: route_hash(r) for r in linear.routes}
    assert {r.name: route_hash(r) for r in route_matcher.routes_of(tree)} == want
    assert len(route_matcher.routes_of(tree)) == len(PRECEDENCE)
    assert route_matcher.routes_of(linear) == list(linear.routes)


def test_debug_reads_the_routes_of_a_tree_from_a_config_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    linear, tree = _both(PRECEDENCE, monkeypatch)
    dump = {"configs": [{"route_config": {"virtual_hosts": [
        json_format.MessageToDict(vh, preserving_proto_field_name=True) for vh in (tree,)]}}]}
    assert debug.proxy_routes(dump) == {r.name: route_hash(r) for r in linear.routes}
