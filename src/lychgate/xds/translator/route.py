"""IR routes and virtual hosts → Envoy RouteConfiguration."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.config.route.v3 import route_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from envoy.type.v3 import percent_pb2
from google.protobuf import duration_pb2

from lychgate import ir
from lychgate.xds.translator import chain_routes, route_matcher
from lychgate.xds.translator.features import FEATURES
from lychgate.xds.translator.retry_options import retry_options
from lychgate.xds.translator.wire import RawMessage, WireCache, repeated_field

_REDIRECT_CODES = {
    301: route_pb.RedirectAction.MOVED_PERMANENTLY,
    302: route_pb.RedirectAction.FOUND,
    303: route_pb.RedirectAction.SEE_OTHER,
    307: route_pb.RedirectAction.TEMPORARY_REDIRECT,
    308: route_pb.RedirectAction.PERMANENT_REDIRECT,
}


VIRTUAL_HOSTS_FIELD = route_pb2.RouteConfiguration.DESCRIPTOR.fields_by_name["virtual_hosts"].number


def _framed_host(vh: ir.VirtualHost, cache: WireCache | None = None, table: Hashable | None = None) -> bytes:
    """A virtual host as one entry of RouteConfiguration.virtual_hosts on the wire."""
    return repeated_field(VIRTUAL_HOSTS_FIELD,
                          [virtual_host(vh, cache, table).SerializeToString(deterministic=True)])


def route_configuration(
    listener: ir.HTTPListener, cache: WireCache | None = None, key: Hashable | None = None
) -> RawMessage:
    return route_table(chain_routes.routes_name(listener), listener.virtual_hosts, cache, key)


def route_table(
    name: str, vhosts: Sequence[ir.VirtualHost], cache: WireCache | None = None, key: Hashable | None = None,
    remove_headers: Sequence[str] = (),
) -> RawMessage:
    """A RouteConfiguration assembled from each virtual host's cached bytes: only
    changed hosts are serialized again, and the digest comes from the hosts'
    digests. With a `key` naming the table across passes (gateway and table),
    hosts that stayed the same objects are not even looked up one by one
    (WireCache.get_all). `remove_headers` never reach a backend."""
    head = route_pb2.RouteConfiguration(
        name=name,
        # Route entries naming unknown clusters answer 500, the Gateway API's
        # answer for a backend that cannot be resolved.
        validate_clusters={"value": False},
        # Host headers may carry a port ("example.com:8080"); Gateway API hostnames
        # don't. Matching ignores it, and the backend still sees the Host as sent.
        ignore_port_in_host_matching=True,
        request_headers_to_remove=list(remove_headers),
    ).SerializeToString(deterministic=True)
    cache = cache or WireCache()
    data, digests = cache.get_all(key, vhosts, lambda vh: _framed_host(vh, cache, key), prefix=head)
    digest = hashlib.blake2b(head + digests, digest_size=8).hexdigest()
    return RawMessage(route_pb2.RouteConfiguration, data, digest)


def virtual_host(vh: ir.VirtualHost, cache: WireCache | None = None, table: Hashable | None = None
                 ) -> route_pb.VirtualHost:
    """Routes in Gateway API precedence order: a list Envoy tries one by one, or,
    for a virtual host with many routes, a prefix map on :path (route_matcher.py)
    that gives the same answers without trying them all."""
    out = route_pb.VirtualHost(name=vh.name, domains=list(vh.domains))
    lists = route_matcher.use_matcher([r.match for r in vh.routes])
    if lists is None:
        out.routes.extend(envoy_route(r) for r in vh.routes)
    else:
        out.matcher.CopyFrom(route_matcher.path_matcher(_route_bytes(vh, cache, table), lists))
    return out


def _route_bytes(vh: ir.VirtualHost, cache: WireCache | None, table: Hashable | None) -> list[bytes]:
    """The routes of a big virtual host serialized, each route the same object as when
    the host was last built reusing its bytes: one route changed among thousands (a
    delegated child, a path route) costs one route, not the host. Kept per host of a
    table (`table`: the Gateway's route table, as WireCache.get_all's key), only its
    current routes, so nothing stale outlives the next build."""
    host = (table, vh.name)
    before = cache.route_bytes.get(host, {}) if cache is not None else {}
    now: dict[int, tuple[ir.Route, bytes]] = {}
    out = []
    for r in vh.routes:
        kept = before.get(id(r))
        if kept is None or kept[0] is not r:
            kept = (r, envoy_route(r).SerializeToString(deterministic=True))
        now[id(r)] = kept
        out.append(kept[1])
    if cache is not None:
        cache.route_bytes[host] = now
    return out


def _string_match(m: ir.StringMatch) -> string_pb2.StringMatcher:
    if m.type == "RegularExpression":
        return string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=m.value))
    return string_pb2.StringMatcher(exact=m.value)


def route_match(m: ir.Match) -> route_pb.RouteMatch:
    out = route_pb.RouteMatch()
    if m.path_type == "Exact":
        out.path = m.path
    elif m.path_type == "RegularExpression":
        out.safe_regex.regex = m.path
    elif m.path.rstrip("/") == "":
        out.prefix = "/"
    else:
        # Gateway API prefixes match whole path segments: /foo matches /foo and
        # /foo/bar, never /foobar. Envoy's path_separated_prefix does exactly that.
        out.path_separated_prefix = m.path.rstrip("/")
    for h in m.headers:
        out.headers.append(route_pb.HeaderMatcher(name=h.name, string_match=_string_match(h)))
    for q in m.query_params:
        out.query_parameters.append(
            route_pb.QueryParameterMatcher(name=q.name, string_match=_string_match(q))
        )
    if m.method:
        out.headers.append(
            route_pb.HeaderMatcher(name=":method", string_match=string_pb2.StringMatcher(exact=m.method))
        )
    return out


def _ms(value: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=value // 1000, nanos=(value % 1000) * 1_000_000)


def header_values(ops: ir.HeaderOps) -> list[base_pb2.HeaderValueOption]:
    out = [
        base_pb2.HeaderValueOption(
            header=base_pb2.HeaderValue(key=k, value=v),
            append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
        )
        for k, v in ops.set
    ]
    out += [
        base_pb2.HeaderValueOption(
            header=base_pb2.HeaderValue(key=k, value=v),
            append_action=base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD,
        )
        for k, v in ops.add
    ]
    return out


def _forward(r: ir.Route, action: ir.Forward) -> route_pb.RouteAction:
    out = route_pb.RouteAction(
        cluster_not_found_response_code=route_pb.RouteAction.INTERNAL_SERVER_ERROR
    )
    if len(action.backends) == 1 and not (
        action.backends[0].request_headers or action.backends[0].response_headers
    ):
        # cluster=None: a name no cluster has, so Envoy answers the 500 above.
        out.cluster = action.backends[0].cluster or INVALID_BACKEND
    else:
        for backend in action.backends:
            weight = route_pb.WeightedCluster.ClusterWeight(
                name=backend.cluster or INVALID_BACKEND, weight={"value": backend.weight}
            )
            weight.request_headers_to_add.extend(header_values(backend.request_headers))
            weight.request_headers_to_remove.extend(backend.request_headers.remove)
            weight.response_headers_to_add.extend(header_values(backend.response_headers))
            weight.response_headers_to_remove.extend(backend.response_headers.remove)
            for feature in FEATURES:
                feature.patch_weighted_cluster(backend, weight)
            out.weighted_clusters.clusters.append(weight)
    if action.timeout_ms is not None:
        out.timeout.CopyFrom(_ms(action.timeout_ms))
    if action.per_try_timeout_ms is not None:
        out.retry_policy.per_try_timeout.CopyFrom(_ms(action.per_try_timeout_ms))
    if action.retry is not None:
        retry_policy(action.retry, out.retry_policy)
    for mirror in action.mirrors:
        out.request_mirror_policies.append(_mirror(mirror))
    if action.websocket:
        out.upgrade_configs.append(route_pb.RouteAction.UpgradeConfig(upgrade_type="websocket", enabled={"value": True}))
    if r.url_rewrite_host:
        out.host_rewrite_literal = r.url_rewrite_host
    if r.url_rewrite_path_full is not None:
        out.regex_rewrite.pattern.regex = "^/.*$"
        out.regex_rewrite.substitution = _literal_substitution(r.url_rewrite_path_full)
    elif r.url_rewrite_path_prefix is not None:
        _prefix_rewrite(r.match.path, r.url_rewrite_path_prefix, out)
    return out


def retry_policy(retry: ir.Retry, out: route_pb.RetryPolicy) -> None:
    """An IR retry onto Envoy's policy; a per-try timeout already set stays."""
    retry_on = list(retry.retry_on)
    if retry.status_codes and "retriable-status-codes" not in retry_on:
        retry_on.append("retriable-status-codes")
    out.retry_on = ",".join(retry_on)
    out.num_retries.value = retry.attempts
    if retry.per_try_timeout_ms is not None and not out.HasField("per_try_timeout"):
        out.per_try_timeout.CopyFrom(_ms(retry.per_try_timeout_ms))
    out.retriable_status_codes.extend(retry.status_codes)
    if retry.backoff_base_ms is not None:
        out.retry_back_off.base_interval.CopyFrom(_ms(retry.backoff_base_ms))
    retry_options(retry, out)


def _mirror(mirror: ir.Mirror) -> route_pb.RouteAction.RequestMirrorPolicy:
    # Envoy's default Host for the copy, "<host>-shadow", is kept (kgateway's suite expects
    # it); a TrafficPolicy's requestMirror changes it (xds/translator/request_mirror.py).
    out = route_pb.RouteAction.RequestMirrorPolicy(cluster=mirror.cluster)
    if mirror.numerator < mirror.denominator:
        # Per million: exact for percents and close for any fraction.
        out.runtime_fraction.default_value.numerator = round(mirror.numerator * 1_000_000 / mirror.denominator)
        out.runtime_fraction.default_value.denominator = percent_pb2.FractionalPercent.MILLION
    return out


def _prefix_rewrite(prefix: str, replacement: str, out: route_pb.RouteAction | route_pb.RedirectAction) -> None:
    """Replace a matched path prefix, by whole segments as the prefix matched."""
    prefix = prefix.rstrip("/")
    if replacement.rstrip("/") == "":
        # "/foo" -> "/" must turn /foo/bar into /bar, not //bar.
        out.regex_rewrite.pattern.regex = f"^{_re_escape(prefix)}/*"
        out.regex_rewrite.substitution = "/"
    elif not prefix:
        # "/" -> "/v2" must turn /foo into /v2/foo, not /v2foo.
        out.regex_rewrite.pattern.regex = "^/"
        out.regex_rewrite.substitution = _literal_substitution(replacement.rstrip("/") + "/")
    else:
        out.prefix_rewrite = replacement.rstrip("/")


def _literal_substitution(path: str) -> str:
    """A path as an RE2 rewrite string: a backslash there starts a group reference."""
    return path.replace("\\", "\\\\")


def _re_escape(text: str) -> str:
    return "".join("\\" + c if c in r".^$*+?()[]{}|\\" else c for c in text)


INVALID_BACKEND = "lychgate/invalid-backend"


def _redirect(r: ir.Route, action: ir.Redirect) -> route_pb.RedirectAction:
    out = route_pb.RedirectAction(response_code=_REDIRECT_CODES[action.status])
    if action.scheme:
        out.scheme_redirect = action.scheme
    if action.hostname:
        out.host_redirect = action.hostname
    if action.port:
        out.port_redirect = action.port
    if action.full_path is not None:
        out.path_redirect = action.full_path
    elif action.prefix_rewrite is not None:
        _prefix_rewrite(r.match.path, action.prefix_rewrite, out)
    return out


def action_of(r: ir.Route) -> ir.Action:
    """What the route does: a TrafficPolicy's `directResponse` answers instead of forwarding."""
    if isinstance(r.action, ir.Forward) and r.policy is not None and r.policy.direct_response is not None:
        return r.policy.direct_response
    return r.action


def envoy_route(r: ir.Route) -> route_pb.Route:
    out = route_pb.Route(name=r.source.ref, match=route_match(r.match))
    action = action_of(r)
    if isinstance(action, ir.Forward):
        out.route.CopyFrom(_forward(r, action))
    elif isinstance(action, ir.Redirect):
        out.redirect.CopyFrom(_redirect(r, action))
    else:
        out.direct_response.status = action.status
        if action.body:
            out.direct_response.body.inline_string = action.body
    out.request_headers_to_add.extend(header_values(r.request_headers))
    out.request_headers_to_remove.extend(r.request_headers.remove)
    out.response_headers_to_add.extend(header_values(r.response_headers))
    out.response_headers_to_remove.extend(r.response_headers.remove)
    for feature in FEATURES:
        feature.patch_route(r, out)
    return out
