"""HTTPRoute rules → IR routes, with their references resolved.

Compilation does not depend on which Gateway a route attaches to, so one
compiled route serves every parent and hostname it is attached under.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from lychgate import envoy_limits, ir
from lychgate.api.base import ObjectKey, Resource
from lychgate.api.gateway import (
    BackendObjectReference,
    HeaderModifier,
    HTTPRoute,
    HTTPRouteFilter,
    HTTPRouteMatch,
    HTTPRouteRule,
    RequestMirror,
    SessionPersistence,
)
from lychgate.api.policy import is_policy_ref
from lychgate.store import Store
from lychgate.translate import backend_config, delegation, direct_response, gcp, rule_filters
from lychgate.translate.backends import ai_route_of, aws_lambda_of, gcp_of, mcp_of
from lychgate.translate.delegation_cache import Subtree, SubtreeCache
from lychgate.translate.quarantine import Entry
from lychgate.translate.references import Resolution, resolve_service
from lychgate.translate.rule_filters import (
    REPLACED_ROUTE_BODY,
    InvalidRule,
    backend_policy,
    duration_ms,
    policy_must_exist,
)
from lychgate.translate.session_persistence import compile_session

# Filter type -> the model attribute that carries its configuration.
SUPPORTED_FILTERS: dict[str, str] = {
    "RequestHeaderModifier": "request_header_modifier",
    "ResponseHeaderModifier": "response_header_modifier",
    "RequestRedirect": "request_redirect",
    "URLRewrite": "url_rewrite",
    "RequestMirror": "request_mirror",
    "CORS": "cors",
    "ExtensionRef": "extension_ref",  # a DirectResponse (translate/direct_response.py)
}
# The filters a backendRef may carry (the rest apply to a whole rule).
BACKEND_FILTERS = frozenset({"RequestHeaderModifier", "ResponseHeaderModifier"})


@dataclass
class CompiledRoute:
    routes: list[ir.Route] = field(default_factory=list)
    clusters: dict[str, ir.Cluster] = field(default_factory=dict)
    # ResolvedRefs=False reason and messages (first reason wins, all messages kept)
    unresolved_reason: str | None = None
    unresolved: list[str] = field(default_factory=list)
    # Rules replaced by a 500 (standard validation): "rule 1: why"
    replaced: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)  # replaced because Envoy refused them
    # Fields the rules keep but Envoy cannot honour: "rule 1: why" (the Accepted message says so)
    notes: list[str] = field(default_factory=list)
    rule_count: int = 0
    # What delegation to child HTTPRoutes took and refused (translate/delegation.py)
    delegation: delegation.Report = field(default_factory=delegation.Report)

    def replace_rule(self, label: str, why: str, matches: list[tuple[ir.RouteSource, ir.Match]],
                     quarantined: bool = False) -> None:
        """A rule that cannot be served answers 500 on its matches, and says why."""
        reason = f"rule {label}: {why}"
        self.replaced.append(reason)
        if quarantined:
            self.quarantined.append(reason)
        self.routes.extend(ir.Route(source, match, ir.DirectResponse(500, INVALID_RULE_BODY), replaced_because=reason)
                           for source, match in matches)


# Bodies say where to look, not what is wrong: clients must not learn the
# names of Services and namespaces behind the gateway. The status says why.
INVALID_RULE_BODY = f"{REPLACED_ROUTE_BODY}This route rule is invalid; see the HTTPRoute status.\n"
NO_BACKEND_BODY = "this route has no valid backend; see the HTTPRoute status\n"


def compile_route(store: Store, route: HTTPRoute, quarantined: Mapping[int, Entry] | None = None, *,
                  rules: list[tuple[int, HTTPRouteRule]] | None = None,
                  chain: frozenset[ObjectKey] = frozenset(), subtrees: SubtreeCache | None = None) -> CompiledRoute:
    """`rules`: only these (index, rule) of the route (a delegated child's, with the
    matches its parent admits); `chain`: the routes delegating to this one;
    `subtrees`: delegated children compiled in earlier passes (delegation_cache.py)."""
    out = CompiledRoute(rule_count=len(route.spec.rules))
    for rule_index, rule in rules if rules is not None else enumerate(route.spec.rules):
        entry = quarantined.get(rule_index) if quarantined else None
        try:
            if entry is not None:
                raise InvalidRule(entry.reason())
            if any(delegation.is_delegation(ref) for ref in rule.backend_refs):
                _delegate(store, route, rule_index, rule, out, chain | {route.key}, subtrees)
                continue
            _compile_rule(store, route, rule_index, rule, out)
        except InvalidRule as err:
            matches = [(_source(route, rule_index, m, rule), _safe_match(match, trusted=entry is None))
                       for m, match in enumerate(rule.matches)]
            out.replace_rule(rule.name or str(rule_index), str(err), matches, quarantined=entry is not None)
    if weight := delegation.route_weight(route):
        out.routes = [r if r.weight else dataclasses.replace(r, weight=weight) for r in out.routes]
    return out


def _delegate(store: Store, parent: HTTPRoute, rule_index: int, rule: HTTPRouteRule, out: CompiledRoute,
              chain: frozenset[ObjectKey], subtrees: SubtreeCache | None) -> None:
    """A rule handing its matches to child HTTPRoutes (translate/delegation.py):
    their rules, compiled under this route; none at all: 500 on the rule's matches."""
    label = rule.name or str(rule_index)
    if problem := delegation.delegating_rule_problem(rule):
        raise InvalidRule(problem)
    for i, f in enumerate(rule.filters):
        if f.type == "ExtensionRef" and f.extension_ref:  # a TrafficPolicy (the others are refused)
            policy_must_exist(store, parent.namespace, f.extension_ref.name, f"filters[{i}].extensionRef")
    _, _, annotation_problem = delegation.priority(parent)
    if annotation_problem and annotation_problem not in out.notes:
        out.notes.append(annotation_problem)
    served = 0
    for b, ref in enumerate(rule.backend_refs):
        valid = 0
        for child in delegation.children(store, parent, ref):
            if not delegation.can_attach(child, parent):
                continue  # its parentRefs name other parents
            if child.key in chain:
                why = (f"{delegation.CYCLE} while evaluating delegated routes for parent "
                       f"{parent.namespace}/{parent.name}: child route {child.namespace}/{child.name} is ignored")
                out.unresolved_reason = out.unresolved_reason or "RefNotPermitted"
                out.unresolved.append(f"rule {label} backendRefs[{b}]: {why}")
                continue
            key = (parent.key, rule_index, b, child.key, chain)
            sub = subtrees.get(key, parent, child) if subtrees is not None else None
            if sub is None:
                with store.tracking() as reads:
                    sub = _subtree(store, parent, rule_index, rule, child, chain, subtrees)
                sub.reads = frozenset(reads)
                if subtrees is not None:
                    subtrees.put(key, sub)
            else:
                store.replay(sub.reads)
            out.routes.extend(sub.routes)
            out.clusters.update(sub.clusters)
            out.delegation.update(sub.report)
            valid += sub.served
            served += len(sub.routes)
        if not valid:
            out.unresolved_reason = out.unresolved_reason or "BackendNotFound"
            out.unresolved.append(f"rule {label} backendRefs[{b}]: no valid child route among "
                                  f"{delegation.selector(ref, parent)}")
    if not served:
        weight = delegation.route_weight(parent)
        out.routes.extend(ir.Route(_source(parent, rule_index, m, rule), _safe_match(match),
                                   ir.DirectResponse(500, NO_CHILD_BODY), weight=weight)
                          for m, match in enumerate(rule.matches))


def _subtree(store: Store, parent: HTTPRoute, rule_index: int, rule: HTTPRouteRule, child: HTTPRoute,
             chain: frozenset[ObjectKey], subtrees: SubtreeCache | None) -> Subtree:
    """One child under one parent rule: its rules that fall inside the rule's matches,
    compiled, each route marked with the parent's hop (whose policies reach it) and,
    without a weight of its own, given the parent's."""
    report = delegation.Report()
    if child.spec.hostnames:
        report.refuse(child, parent, "UnsupportedValue", delegation.HOSTNAMES_SET)
        return Subtree(parent, child, [], {}, report, served=False)
    step = delegation.hop(parent, rule_index, rule)
    rules = delegation.selected_rules(rule, child, step.prefer_parent)
    if not rules:
        report.refuse(child, parent, "NoMatchingParent",
                      f"no match of the route falls inside rule {rule.name or rule_index}'s matches of HTTPRoute "
                      f"{parent.namespace}/{parent.name}")
        return Subtree(parent, child, [], {}, report, served=False)
    sub = compile_route(store, child, rules=rules, chain=chain, subtrees=subtrees)
    weight = delegation.route_weight(parent)
    routes = [dataclasses.replace(r, source=dataclasses.replace(r.source, delegated_by=(*r.source.delegated_by, step)),
                                  weight=r.weight or weight) for r in sub.routes]
    report.update(sub.delegation)
    report.take(child, parent, f"rule {rule.name or rule_index} serves rules {', '.join(str(i) for i, _ in rules)}")
    for why in sub.unresolved + sub.replaced:
        report.unresolve(child, parent, sub.unresolved_reason or "UnsupportedValue", why)
    return Subtree(parent, child, routes, sub.clusters, report, served=True)


NO_CHILD_BODY = "this route delegates to no valid child route; see the HTTPRoute status\n"


def _source(route: HTTPRoute, rule: int, match: int, spec: HTTPRouteRule) -> ir.RouteSource:
    return ir.RouteSource("HTTPRoute", route.namespace, route.name, rule, match, spec.name)


def _compile_rule(
    store: Store, route: HTTPRoute, rule_index: int, rule: HTTPRouteRule, out: CompiledRoute
) -> None:
    request_headers = ir.NO_HEADERS
    response_headers = ir.NO_HEADERS
    redirect: ir.Redirect | None = None
    direct: ir.DirectResponse | None = None
    rewrite_host = rewrite_full = rewrite_prefix = None
    cors: ir.Cors | None = None
    mirrors: list[tuple[str, RequestMirror]] = []
    for i, f in enumerate(rule.filters):
        _check_filter(f)
        if f.type == "RequestHeaderModifier" and f.request_header_modifier:
            request_headers = header_ops(f.request_header_modifier, f"filters[{i}].requestHeaderModifier")
        elif f.type == "ResponseHeaderModifier" and f.response_header_modifier:
            response_headers = header_ops(f.response_header_modifier, f"filters[{i}].responseHeaderModifier")
        elif f.type == "RequestRedirect" and f.request_redirect:
            r = f.request_redirect
            if r.path:
                check_path(r.path.replace_full_path or r.path.replace_prefix_match, f"filters[{i}].requestRedirect.path")
            redirect = ir.Redirect(
                scheme=r.scheme, hostname=r.hostname, port=r.port, status=r.status_code,
                full_path=r.path.replace_full_path if r.path and r.path.type == "ReplaceFullPath" else None,
                prefix_rewrite=r.path.replace_prefix_match if r.path and r.path.type == "ReplacePrefixMatch" else None,
            )
        elif f.type == "URLRewrite" and f.url_rewrite:
            rewrite_host = f.url_rewrite.hostname
            if f.url_rewrite.path:
                check_path(f.url_rewrite.path.replace_full_path or f.url_rewrite.path.replace_prefix_match,
                           f"filters[{i}].urlRewrite.path")
                rewrite_full = f.url_rewrite.path.replace_full_path
                rewrite_prefix = f.url_rewrite.path.replace_prefix_match
        elif f.type == "CORS" and f.cors:
            cors = rule_filters.cors(f.cors, f"filters[{i}].cors")
        elif f.type == "RequestMirror" and f.request_mirror:
            mirrors.append((f"filters[{i}].requestMirror", f.request_mirror))
        elif f.type == "ExtensionRef" and f.extension_ref:
            if is_policy_ref(f.extension_ref.group, f.extension_ref.kind):
                # The policy applies to this rule (translate/policies/attachment.py).
                policy_must_exist(store, route.namespace, f.extension_ref.name, f"filters[{i}].extensionRef")
            else:
                direct = direct_response.from_filter(
                    store, route.namespace, f.extension_ref, f"filters[{i}].extensionRef")
    if redirect and rule.backend_refs:
        raise InvalidRule("RequestRedirect cannot be combined with backendRefs")
    if direct is not None and (rule.backend_refs or redirect):
        raise InvalidRule("a DirectResponse cannot be combined with backendRefs or a RequestRedirect")

    action: ir.Action = (
        redirect if redirect is not None else direct if direct is not None
        else _forward(store, route, rule, rule.name or str(rule_index), mirrors, out)
    )

    for match_index, match in enumerate(rule.matches):
        m = _match(match, f"matches[{match_index}]")
        if (rewrite_prefix is not None or (redirect and redirect.prefix_rewrite is not None)) and m.path_type != "PathPrefix":
            raise InvalidRule("ReplacePrefixMatch needs a PathPrefix match")
        out.routes.append(
            ir.Route(
                source=_source(route, rule_index, match_index, rule),
                match=m,
                action=action,
                request_headers=request_headers,
                response_headers=response_headers,
                url_rewrite_host=rewrite_host,
                url_rewrite_path_full=rewrite_full,
                url_rewrite_path_prefix=rewrite_prefix,
                cors=cors,
            )
        )


def resolve_backend(
    store: Store, route: Resource, ref: BackendObjectReference, out: CompiledRoute, where: str = ""
) -> Resolution:
    """Resolve a backendRef of any route kind (or a mirror's, `where` names it) into
    `out`: its clusters, or the problem for the route's ResolvedRefs condition."""
    res = resolve_service(
        store, from_kind=route.KIND, from_namespace=route.namespace, group=ref.group,
        kind=ref.kind, namespace=ref.namespace or route.namespace, name=ref.name, port=ref.port,
    )
    if where and gcp.is_gcp(res.cluster):
        # A mirror's copy gets no token of its own (gcp_authn asks for the rule's chosen
        # backend only), and the Backend's cluster answers 503 to it, unseen.
        res = Resolution(None, "InvalidKind", gcp.not_here(ref.namespace or route.namespace, ref.name,
                                                            "a mirror's backend"))
    if not res.ok:
        out.unresolved_reason = out.unresolved_reason or res.reason
        out.unresolved.append(f"{where}: {res.message}" if where else res.message)
    elif res.cluster is not None:
        out.clusters[res.cluster.name] = res.cluster
        out.clusters.update((c.name, c) for c in res.extra_clusters)
    return res


def _forward(
    store: Store, route: HTTPRoute, rule: HTTPRouteRule, label: str,
    mirror_specs: list[tuple[str, RequestMirror]], out: CompiledRoute,
) -> ir.Action:
    backends: list[ir.WeightedCluster] = []
    websocket = False
    for b, ref in enumerate(rule.backend_refs):
        for i, f in enumerate(ref.filters):
            _check_filter(f)
            if f.type == "ExtensionRef" and f.extension_ref and is_policy_ref(f.extension_ref.group, f.extension_ref.kind):
                backend_policy(store, route.namespace, f.extension_ref.name, len(rule.backend_refs),
                               f"backendRefs[{b}].filters[{i}].extensionRef")
            elif f.type not in BACKEND_FILTERS:
                raise InvalidRule(f"filter {f.type} is not supported on a backendRef; put it on the rule")
        res = resolve_backend(store, route, ref, out)
        if ref.weight == 0:
            continue
        websocket |= res.cluster is not None and res.cluster.protocol == "ws"
        req = next((header_ops(f.request_header_modifier, f"backendRefs[{b}].filters[{i}].requestHeaderModifier")
                    for i, f in enumerate(ref.filters)
                    if f.type == "RequestHeaderModifier" and f.request_header_modifier), ir.NO_HEADERS)
        resp = next((header_ops(f.response_header_modifier, f"backendRefs[{b}].filters[{i}].responseHeaderModifier")
                     for i, f in enumerate(ref.filters)
                     if f.type == "ResponseHeaderModifier" and f.response_header_modifier), ir.NO_HEADERS)
        # res.picker: an InferencePool's endpoint picker (translate/inference.py)
        backends.append(ir.WeightedCluster(res.cluster.name if res.cluster else None, ref.weight, req, resp,
                                           res.picker))
    mirrors = _mirrors(store, route, label, mirror_specs, out)
    if not backends or all(b.cluster is None for b in backends):
        # No usable backend: the Gateway API asks for a 500, not a 404 or 503.
        return ir.DirectResponse(500, NO_BACKEND_BODY)
    timeout = duration_ms(rule.timeouts.request, "timeouts.request") if rule.timeouts else None
    backend_timeout = (
        duration_ms(rule.timeouts.backend_request, "timeouts.backendRequest") if rule.timeouts else None
    )
    if timeout and backend_timeout and backend_timeout > timeout:
        raise InvalidRule(f"timeouts.backendRequest ({rule.timeouts.backend_request}) cannot be longer "  # type: ignore[union-attr]
                          f"than timeouts.request ({rule.timeouts.request})")  # type: ignore[union-attr]
    return ir.shared_forward(ir.Forward(
        tuple(backends), timeout_ms=timeout, per_try_timeout_ms=backend_timeout, mirrors=mirrors,
        retry=rule_filters.retry(rule.retry, "retry") if rule.retry is not None else None,
        websocket=websocket,
        hash_policies=backend_config.hash_policies(out.clusters.get(b.cluster or "") for b in backends),
        aws_lambda=aws_lambda_of(out.clusters.get(b.cluster or "") for b in backends),
        ai=ai_route_of(out.clusters.get(b.cluster or "") for b in backends),
        mcp=mcp_of(out.clusters.get(b.cluster or "") for b in backends),
        gcp=gcp_of(out.clusters.get(b.cluster or "") for b in backends),
        session=session_of(rule.session_persistence, label, backends, out),
    ))


def session_of(spec: SessionPersistence | None, label: str, backends: list[ir.WeightedCluster],
               out: CompiledRoute) -> ir.SessionPersistence | None:
    """A rule's sessionPersistence (HTTPRoute and GRPCRoute), its notes in `out`."""
    if spec is None:
        return None
    notes: list[str] = []
    session = compile_session(spec, len(backends), notes)
    out.notes.extend(f"rule {label}: {n}" for n in notes)
    return session


def _mirrors(
    store: Store, route: HTTPRoute, label: str, specs: list[tuple[str, RequestMirror]], out: CompiledRoute
) -> tuple[ir.Mirror, ...]:
    """A mirror whose backend cannot be resolved is dropped (and reported);
    the rule still forwards to its own backends."""
    mirrors: list[ir.Mirror] = []
    for where, spec in specs:
        numerator, denominator = rule_filters.mirror_fraction(spec, where)
        res = resolve_backend(store, route, spec.backend_ref, out, f"rule {label} {where}.backendRef")
        if res.cluster is not None and numerator > 0:
            mirrors.append(ir.Mirror(res.cluster.name, numerator, denominator))
    return tuple(mirrors)


def _check_filter(f: HTTPRouteFilter) -> None:
    attr = SUPPORTED_FILTERS.get(f.type)
    if attr is None:
        hint = "; a TrafficPolicy extAuth does this" if f.type == "ExternalAuth" else ""
        raise InvalidRule(f"filter {f.type} is not supported yet{hint}")
    if getattr(f, attr) is None:
        raise InvalidRule(f"filter {f.type} needs its {f.type[0].lower() + f.type[1:]} field")


def header_ops(mod: HeaderModifier | None, where: str) -> ir.HeaderOps:
    """A header modifier's operations, refused as Envoy would refuse them."""
    if mod is None:
        return ir.NO_HEADERS
    for op, headers in (("set", mod.set), ("add", mod.add)):
        for i, h in enumerate(headers):
            _limit(envoy_limits.modifiable_header, h.name, f"{where}.{op}[{i}].name")
            _limit(envoy_limits.header_value, h.value, f"{where}.{op}[{i}].value")
    for i, name in enumerate(mod.remove):
        _limit(envoy_limits.removable_header, name, f"{where}.remove[{i}]")
    return ir.HeaderOps(
        set=tuple((h.name, h.value) for h in mod.set),
        add=tuple((h.name, h.value) for h in mod.add),
        remove=tuple(mod.remove),
    )


def _match(match: HTTPRouteMatch, where: str) -> ir.Match:
    path_type, path = "PathPrefix", "/"
    if match.path is not None:
        path_type, path = match.path.type, match.path.value
    if path_type == "RegularExpression":
        check_regex(path, f"{where}.path.value")
    elif not path.startswith("/"):
        raise InvalidRule(f"{where}.path.value {path!r} must start with '/'")
    for i, h in enumerate(match.headers):
        if h.type == "RegularExpression":
            check_regex(h.value, f"{where}.headers[{i}].value")
    for i, q in enumerate(match.query_params):
        if q.type == "RegularExpression":
            check_regex(q.value, f"{where}.queryParams[{i}].value")
    return ir.Match(
        path_type=path_type,  # type: ignore[arg-type]
        path=path,
        headers=tuple(ir.StringMatch(h.name.lower(), h.type, h.value) for h in match.headers),
        query_params=tuple(ir.StringMatch(q.name, q.type, q.value) for q in match.query_params),
        method=match.method,
    )


def _safe_match(match: HTTPRouteMatch, trusted: bool = True) -> ir.Match:
    """The match of a replaced rule, without the parts that made it invalid. An
    untrusted one (Envoy refused something in the rule, we do not know what)
    keeps only its path, never as a regex."""
    try:
        if not trusted:
            raise InvalidRule("")
        return _match(match, "")
    except InvalidRule:
        if match.path and match.path.type == "RegularExpression":
            # A broken regex cannot be served; answer 500 on its literal text
            # rather than widen it into a catch-all that would hide 404s.
            return ir.Match(path_type="Exact", path="/" + match.path.value.lstrip("/"))
        return ir.Match(path_type=match.path.type if match.path else "PathPrefix",
                        path=match.path.value if match.path else "/")


def check_regex(pattern: str, what: str) -> None:
    """A regex as Envoy compiles it (RE2 syntax, program size)."""
    _limit(envoy_limits.regex, pattern, what)


def check_path(path: str | None, where: str) -> None:
    """A path Envoy writes into the request or a Location header."""
    if path is not None:
        _limit(envoy_limits.header_value, path, where)


def _limit(check: Callable[[str], None], value: str, where: str) -> None:
    try:
        check(value)
    except envoy_limits.EnvoyRejects as err:
        raise InvalidRule(f"{where}: {err}") from None


_DEFAULT_PORTS = {"http": 80, "https": 443}


def for_listener(r: ir.Route, port: int, tls: bool) -> ir.Route:
    """A route as served on one listener: a redirect's Location takes the
    listener's port when it names neither scheme nor port, and leaves out a
    port that is the default of its scheme (http://host, not http://host:80)."""
    action = r.action
    if not isinstance(action, ir.Redirect):
        return r
    scheme = action.scheme or ("https" if tls else "http")
    target = action.port if action.port is not None or action.scheme is not None else port
    if target == _DEFAULT_PORTS[scheme]:
        target = None
    if target == action.port:
        return r
    return dataclasses.replace(r, action=dataclasses.replace(action, port=target))


def precedence_key(route: Resource, r: ir.Route) -> tuple[object, ...]:
    """Sort key giving the Gateway API's match precedence (first = wins)."""
    m = r.match
    path_rank = {"Exact": 0, "RegularExpression": 1, "PathPrefix": 2}[m.path_type]
    return (
        -r.weight,  # kgateway's route-weight annotation (translate/delegation.py)
        path_rank,
        -len(m.path),
        m.method is None,
        -len(m.headers),
        -len(m.query_params),
        route.created,
        route.namespace,
        route.name,
        r.source.rule,
        r.source.match,
    )
