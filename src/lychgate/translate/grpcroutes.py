"""GRPCRoute rules → IR routes. gRPC is HTTP/2 with the method in the path
(`/package.Service/Method`), so a GRPCRoute compiles to the same IR routes an
HTTPRoute does and shares virtual hosts with them; only matching differs, and
backends are always spoken to over HTTP/2."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from lychgate import ir
from lychgate.api.gateway import (
    GRPCMethodMatch,
    GRPCRoute,
    GRPCRouteFilter,
    GRPCRouteMatch,
    GRPCRouteRule,
)
from lychgate.api.policy import is_policy_ref
from lychgate.store import Store
from lychgate.translate.backends import gcp_of
from lychgate.translate.quarantine import Entry
from lychgate.translate.routes import (
    NO_BACKEND_BODY,
    CompiledRoute,
    InvalidRule,
    check_regex,
    header_ops,
    resolve_backend,
    session_of,
)
from lychgate.translate.rule_filters import backend_policy, policy_must_exist

_FILTERS = ("RequestHeaderModifier", "ResponseHeaderModifier")
_NAME = "[^/]+"


def compile_grpc_route(
    store: Store, route: GRPCRoute, quarantined: Mapping[int, Entry] | None = None
) -> CompiledRoute:
    out = CompiledRoute(rule_count=len(route.spec.rules))
    for index, rule in enumerate(route.spec.rules):
        entry = quarantined.get(index) if quarantined else None
        try:
            if entry is not None:
                raise InvalidRule(entry.reason())
            _compile_rule(store, route, index, rule, out)
        except InvalidRule as err:
            matches = [(_source(route, index, m, rule), _safe_match(match, trusted=entry is None))
                       for m, match in enumerate(rule.matches or [GRPCRouteMatch()])]
            out.replace_rule(str(rule.name or index), str(err), matches, quarantined=entry is not None)
    return out


def _source(route: GRPCRoute, rule: int, match: int, spec: GRPCRouteRule) -> ir.RouteSource:
    return ir.RouteSource("GRPCRoute", route.namespace, route.name, rule, match, spec.name)


def _compile_rule(store: Store, route: GRPCRoute, index: int, rule: GRPCRouteRule, out: CompiledRoute) -> None:
    request, response = _filters(store, route, rule.filters, "filters")
    backends: list[ir.WeightedCluster] = []
    for b, ref in enumerate(rule.backend_refs):
        req, resp = _filters(store, route, ref.filters, f"backendRefs[{b}].filters", len(rule.backend_refs))
        cluster = resolve_backend(store, route, ref, out).cluster
        if cluster is not None and cluster.protocol != "h2c":
            # gRPC needs HTTP/2 whatever the Service port's appProtocol says.
            del out.clusters[cluster.name]
            cluster = replace(cluster, name=f"{cluster.name}/h2c", protocol="h2c")
            out.clusters[cluster.name] = cluster
        if ref.weight:
            backends.append(ir.WeightedCluster(cluster.name if cluster else None, ref.weight, req, resp))
    session = session_of(rule.session_persistence, str(rule.name or index), backends, out)
    gcp = gcp_of(out.clusters.get(b.cluster or "") for b in backends)
    action: ir.Action = (ir.shared_forward(ir.Forward(tuple(backends), session=session, gcp=gcp)) if any(b.cluster for b in backends)
                         else ir.DirectResponse(500, NO_BACKEND_BODY))
    for m, match in enumerate(rule.matches or [GRPCRouteMatch()]):
        out.routes.append(ir.Route(source=_source(route, index, m, rule), match=_match(match, f"matches[{m}]"), action=action,
                                   request_headers=request, response_headers=response))


def _filters(store: Store, route: GRPCRoute, filters: list[GRPCRouteFilter], where: str, backends: int = 0
             ) -> tuple[ir.HeaderOps, ir.HeaderOps]:
    """A rule's filters (`backends` 0) or a backendRef's (`backends`: how many the rule has)."""
    request = response = ir.NO_HEADERS
    for i, f in enumerate(filters):
        ref = f.extension_ref
        if f.type == "ExtensionRef" and ref is not None and is_policy_ref(ref.group, ref.kind):
            # The policy applies to this rule (translate/policies/attachment.py).
            if backends:
                backend_policy(store, route.namespace, ref.name, backends, f"{where}[{i}].extensionRef")
            else:
                policy_must_exist(store, route.namespace, ref.name, f"{where}[{i}].extensionRef")
            continue
        if f.type not in _FILTERS:
            raise InvalidRule(f"filter {f.type} is not supported on GRPCRoute yet")
        if f.type == "RequestHeaderModifier":
            request = header_ops(f.request_header_modifier, f"{where}[{i}].requestHeaderModifier")
        else:
            response = header_ops(f.response_header_modifier, f"{where}[{i}].responseHeaderModifier")
    return request, response


def _match(match: GRPCRouteMatch, where: str) -> ir.Match:
    headers = []
    for i, h in enumerate(match.headers):
        if h.type == "RegularExpression":
            check_regex(h.value, f"{where}.headers[{i}].value")
        headers.append(ir.StringMatch(h.name.lower(), h.type, h.value))
    path_type, path = _method_path(match.method)
    if path_type == "RegularExpression":
        # Service and method become one path regex: Envoy compiles (and limits) the whole.
        check_regex(path, f"{where}.method")
    return ir.Match(path_type=path_type, path=path, headers=tuple(headers))


def _method_path(method: GRPCMethodMatch | None) -> tuple[ir.PathType, str]:
    """The request path a gRPC method match stands for."""
    if method is None or (not method.service and not method.method):
        return "PathPrefix", "/"
    if method.type == "RegularExpression":
        service, name = method.service or _NAME, method.method or _NAME
        # Grouped, so an alternation in one part stays in that part.
        return "RegularExpression", f"/(?:{service})/(?:{name})"
    if method.service and method.method:
        return "Exact", f"/{method.service}/{method.method}"
    if method.service:
        return "PathPrefix", f"/{method.service}"
    return "RegularExpression", f"/{_NAME}/{re.escape(method.method or '')}"


def _safe_match(match: GRPCRouteMatch, trusted: bool = True) -> ir.Match:
    """See routes._safe_match: an untrusted rule (Envoy refused it) keeps no regex."""
    try:
        if not trusted:
            raise InvalidRule("")
        return _match(match, "")
    except InvalidRule:
        return ir.Match(path_type="Exact", path="/invalid-grpc-route-rule")
