"""Policy attachment as translation decides it: no Envoy, objects in, IR and status out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.api.registry import ManifestError, parse
from lychgate.controlplane import builtin_class
from lychgate.store import Store
from lychgate.translate.gateway import Translation, translate
from lychgate.translate.policies.merge import deep_merge_fields

BASE = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: lychgate
  listeners:
    - {name: web, protocol: HTTP, port: 80}
---
apiVersion: v1
kind: Service
metadata: {name: app}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: authz}
spec: {ports: [{port: 9000}]}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {name: auth}
spec:
  extAuth:
    grpcService: {backendRef: {name: authz, port: 9000}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, labels: {team: a}}
spec:
  parentRefs: [{name: gw}]
  rules:
    - {name: one, matches: [{path: {value: /one}}], backendRefs: [{name: app, port: 80}]}
    - {name: two, matches: [{path: {value: /two}}], backendRefs: [{name: app, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: other}
spec:
  parentRefs: [{name: gw}]
  hostnames: [other.example.com]
  rules: [{backendRefs: [{name: app, port: 80}]}]
"""


def run(policies: str, merge: dict[str, Any] | None = None, base: str = BASE) -> Translation:
    store = Store()
    store.upsert(builtin_class())
    for day, doc in enumerate(d for d in yaml.safe_load_all(base + "\n---\n" + policies) if d):
        obj = parse(doc)
        if obj.metadata.creation_timestamp is None:
            # Every object a day apart, in the order written: age decides, never the clock.
            stamp = datetime(2024, 1, 1 + day, tzinfo=UTC)
            obj = obj.model_copy(update={"metadata": obj.metadata.model_copy(update={"creation_timestamp": stamp})})
        store.upsert(obj)
    return translate(store, lambda gw: "127.0.1.1", policy_merge=merge)


def routes(t: Translation) -> dict[str, ir.Route]:
    out = {}
    for gw in t.gateways.values():
        for listener in gw.listeners:
            for vh in listener.virtual_hosts:
                for r in vh.routes:
                    out[f"{r.source.name}/{r.source.rule_name or r.source.rule}"] = r
    return out


def applied(t: Translation, name: str, index: int | None = None) -> dict[str, Any]:
    st = t.status[ObjectKey("TrafficPolicy", "default", name)]
    conds = st["conditions"] if index is None else st["ancestors"][index]["conditions"]
    return dict(next(c for c in conds if c["type"] == "Applied"))


def tp(name: str, body: str, targets: str = "targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]",
       created: str | None = None) -> str:
    stamp = f", creationTimestamp: '{created}'" if created else ""
    return f"""---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {name}{stamp}}}
spec:
  {targets}
{body}
"""


def headers(value: str) -> str:
    return f"  headerModifiers:\n    response: {{set: [{{name: x-v, value: {value}}}]}}"


def response_header(r: ir.Route) -> str | None:
    assert r.policy is not None
    return dict(r.policy.response_headers.set).get("x-v")


def test_no_policies_leaves_routes_untouched() -> None:
    t = run("")
    assert all(r.policy is None for r in routes(t).values())
    assert not any(k.kind == "TrafficPolicy" for k in t.status)


def test_more_specific_attachment_points_win() -> None:
    def timeout(seconds: int) -> str:
        return f"  timeouts: {{request: {seconds}s}}"

    t = run(
        tp("gateway", timeout(1), "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]")
        + tp("listener", timeout(2),
             "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: web}]")
        + tp("route", timeout(3) + "\n  retry: {retryOn: [5xx]}")
        + tp("rule", timeout(4),
             "targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: two}]")
    )
    rs = routes(t)
    timeouts = {name: r.policy.timeout_ms if r.policy else None for name, r in rs.items()}
    assert timeouts == {"r/one": 3000, "r/two": 4000, "other/0": 2000}
    assert rs["r/two"].policy is not None and rs["r/two"].policy.retry is not None  # other fields still inherited
    # The route says which policies shaped it, and how.
    affected = next(c for c in t.status[ObjectKey("HTTPRoute", "default", "r")]["parents"][0]["conditions"]
                    if c["type"] == "gateway.lychgate.dev/TrafficPolicyAffected")["message"]
    assert "TrafficPolicy default/route: applied: retry, timeouts" in affected
    assert "TrafficPolicy default/gateway: not applied (Overridden): timeouts overridden by" in affected
    gateway = applied(t, "gateway", 0)
    assert gateway["status"] == "False" and gateway["reason"] == "Overridden"
    assert "overridden by policy default/listener on the more specific Gateway default/gw listener web" in gateway["message"]


def test_header_modifiers_of_every_tier_apply() -> None:
    """kgateway applies headerModifiers of the route, its ListenerSet and its Gateway: every
    `add` stays (route's first), and on a header both `set`, the Gateway's is left (it is
    applied last, as a virtual host's after its route's). Within a tier the most specific wins."""
    def mods(value: str) -> str:
        return (f"  headerModifiers:\n    response:\n      set: [{{name: x-v, value: {value}}}]\n"
                f"      add: [{{name: x-trail, value: {value}}}]")

    t = run(
        tp("gateway", mods("gateway"), "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]")
        + tp("listener", mods("listener"),
             "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: web}]")
        + tp("route", mods("route"))
    )
    policy = routes(t)["r/one"].policy
    assert policy is not None
    assert policy.response_headers.set == (("x-v", "route"), ("x-v", "listener"))
    assert policy.response_headers.add == (("x-trail", "route"), ("x-trail", "listener"))
    assert applied(t, "route", 0)["message"] == "applied: headerModifiers"
    assert "headerModifiers overridden by policy default/listener" in applied(t, "gateway", 0)["message"]


def test_policies_on_one_target_merge_field_by_field_oldest_first() -> None:
    """As kgateway merges them: through targetRefs or selectors, every policy's fields
    apply unless an older one sets the same field; the loser's status says which
    fields it lost and to whom."""
    selector = "targetSelectors: [{group: gateway.networking.k8s.io, kind: HTTPRoute, matchLabels: {team: a}}]"
    t = run(
        tp("ref-old", headers("ref-old"))
        + tp("ref-new", headers("ref-new") + "\n  timeouts: {request: 3s}")
        + tp("sel", headers("sel") + "\n  retry: {retryOn: [5xx]}", selector)
    )
    policy = routes(t)["r/one"].policy
    assert policy is not None
    assert response_header(routes(t)["r/one"]) == "ref-old"
    assert policy.timeout_ms == 3000  # the newer policy's other field is not lost
    assert policy.retry == ir.Retry(retry_on=("5xx",))
    new = applied(t, "ref-new", 0)
    assert new["status"] == "True" and new["reason"] == "PartiallyApplied"
    assert new["message"] == "applied: timeouts; headerModifiers overridden by older policy default/ref-old"
    assert applied(t, "sel", 0)["message"] == "applied: retry; headerModifiers overridden by older policy default/ref-old"


@pytest.mark.parametrize("deep", [False, True])
def test_deep_merge_of_transformation_and_ext_auth(deep: bool) -> None:
    transform = """  transformation:
    request:
      set: [{{name: x-{n}, value: "{n}"}}, {{name: x-both, value: "{n}"}}]
      remove: [x-drop-{n}]
  extAuth:
    extensionRef: {{name: auth}}
    contextExtensions: {{{n}: "1", shared: "{n}"}}"""
    t = run(tp("a", transform.format(n="a")) + tp("b", transform.format(n="b")),
            merge={"trafficPolicy": {"transformation": "DeepMerge", "extAuth": "DeepMerge"}} if deep else None)
    policy = routes(t)["r/one"].policy
    assert policy is not None and policy.transformation is not None and policy.transformation.request is not None
    names = {name: tpl for name, tpl in policy.transformation.request.set}
    assert policy.ext_auth is not None
    ctx = dict(policy.ext_auth.context_extensions)
    if deep:
        assert set(names) == {"x-a", "x-b", "x-both"} and names["x-both"] == (("t", "a"),)  # older wins a leaf
        assert policy.transformation.request.remove == ("x-drop-a", "x-drop-b")
        assert ctx == {"a": "1", "b": "1", "shared": "a"}
        assert applied(t, "b", 0)["reason"] == "Merged"
    else:
        assert set(names) == {"x-a", "x-both"}
        assert ctx == {"a": "1", "shared": "a"}
        assert applied(t, "b", 0)["reason"] == "Overridden"


def test_deep_merge_respects_disable_of_the_winner() -> None:
    t = run(
        tp("auth-on", "  extAuth:\n    extensionRef: {name: auth}",
           "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]")
        + tp("auth-off", "  extAuth:\n    disable: {}",
             "targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: one}]"),
        merge={"trafficPolicy": {"extAuth": "DeepMerge"}},
    )
    rs = routes(t)
    assert rs["r/one"].policy is None or rs["r/one"].policy.ext_auth is None
    assert rs["r/two"].policy is not None and rs["r/two"].policy.ext_auth is not None


def test_invalid_policy_fails_only_its_targets_closed() -> None:
    t = run(tp("bad", "  timeouts: {request: later}"))
    rs = routes(t)
    for name in ("r/one", "r/two"):
        assert isinstance(rs[name].action, ir.DirectResponse) and rs[name].action.status == 500
        assert rs[name].replaced_because is not None and "TrafficPolicy default/bad is invalid" in rs[name].replaced_because
    assert isinstance(rs["other/0"].action, ir.Forward)
    st = t.status[ObjectKey("TrafficPolicy", "default", "bad")]
    accepted = next(c for c in st["conditions"] if c["type"] == "Accepted")
    assert accepted["message"] == "invalid field spec.timeouts.request: 'later' is not a duration like 10s or 500ms"


@pytest.mark.parametrize(("extension", "reason", "message"), [
    ("", "ExtensionNotFound", "GatewayExtension default/missing not found"),
    ("""---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {name: missing}
spec:
  extProc:
    grpcService: {backendRef: {name: authz, port: 9000}}
""", "InvalidExtension", "GatewayExtension default/missing is of type ExtProc, not ExtAuth"),
    ("""---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {name: missing}
spec:
  extAuth:
    grpcService: {backendRef: {name: nope, port: 9000}}
""", "BackendNotFound", "GatewayExtension default/missing: Service default/nope not found"),
    ("""---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {name: missing}
spec:
  extAuth:
    grpcService: {backendRef: {name: authz, port: 9000}, requestTimeout: forever}
""", "ExtensionNotAccepted", "GatewayExtension default/missing is not accepted: "
     "spec.extAuth.grpcService.requestTimeout: 'forever' is not a duration like 10s or 500ms"),
])
def test_unresolved_auth_fails_the_targeted_routes_closed(extension: str, reason: str, message: str) -> None:
    t = run(extension + tp("p", "  extAuth:\n    extensionRef: {name: missing}"))
    closed = f"{message}; the routes it targets answer 500 until it is resolved"
    assert applied(t, "p") == {**applied(t, "p"), "status": "False", "reason": reason,
                               "message": f"not applied: {closed}"}
    assert applied(t, "p", 0) == {**applied(t, "p", 0), "status": "False", "reason": reason, "message": closed}
    rs = routes(t)
    for name in ("r/one", "r/two"):  # authentication that cannot be applied: 500, never the backend
        action = rs[name].action
        assert isinstance(action, ir.DirectResponse) and action.status == 500
        assert rs[name].replaced_because == f"TrafficPolicy default/p cannot be applied: {message}"
    assert isinstance(rs["other/0"].action, ir.Forward)  # routes it does not target keep serving
    route = t.status[ObjectKey("HTTPRoute", "default", "r")]["parents"][0]["conditions"]
    affected = next(c for c in route if c["type"] == "gateway.lychgate.dev/TrafficPolicyAffected")
    assert affected["message"] == (f"TrafficPolicy default/p: not applied: {message}; "
                                   "the route rules it targets answer 500")


def test_unresolved_non_security_field_leaves_the_policy_unapplied() -> None:
    t = run(tp("p", "  extProc:\n    extensionRef: {name: missing}"))
    assert applied(t, "p")["reason"] == "ExtensionNotFound"
    assert all(r.policy is None and isinstance(r.action, ir.Forward) for r in routes(t).values())


def test_cross_namespace_service_needs_a_reference_grant() -> None:
    ext = """---
apiVersion: v1
kind: Service
metadata: {name: authz, namespace: security}
spec: {ports: [{port: 9000}]}
---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {name: remote}
spec:
  extAuth:
    grpcService: {backendRef: {name: authz, namespace: security, port: 9000}}
"""
    grant = """---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: security}
spec:
  from: [{group: gateway.lychgate.dev, kind: GatewayExtension, namespace: default}]
  to: [{group: "", kind: Service}]
"""
    policy = tp("p", "  extAuth:\n    extensionRef: {name: remote}")
    without = run(ext + policy)
    assert applied(without, "p")["reason"] == "RefNotPermitted"
    assert routes(without)["r/one"].policy is None
    assert isinstance(routes(without)["r/one"].action, ir.DirectResponse)
    with_grant = run(ext + grant + policy)
    route_policy = routes(with_grant)["r/one"].policy
    assert route_policy is not None and route_policy.ext_auth is not None
    assert route_policy.ext_auth.service.cluster == "extension/default/remote"
    gw = next(iter(with_grant.gateways.values()))
    cluster = next(c for c in gw.clusters if c.name == "extension/default/remote")
    assert cluster.protocol == "h2c"  # gRPC, whatever the Service's appProtocol says


def test_targets_that_cannot_be_used_are_named() -> None:
    other_gateway = """---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: foreign}
spec:
  gatewayClassName: someone-else
  listeners: [{name: web, protocol: HTTP, port: 80}]
"""
    t = run(other_gateway + tp("p", "  timeouts: {request: 1s}", """targetRefs:
    - {group: gateway.networking.k8s.io, kind: Gateway, name: foreign}
    - {group: gateway.networking.k8s.io, kind: HTTPRoute, name: gone}
    - {group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: three}"""))
    # As kgateway reports them: no ancestor per missing target, one StatusSummary naming them all.
    [summary] = t.status[ObjectKey("TrafficPolicy", "default", "p")]["ancestors"]
    assert summary["ancestorRef"] == {"group": "gateway.lychgate.dev", "kind": "StatusSummary", "name": "StatusSummary"}
    conditions = {c["type"]: c for c in summary["conditions"]}
    assert (conditions["Accepted"]["status"], conditions["Accepted"]["reason"]) == ("False", "TargetNotFound")
    assert conditions["Accepted"]["message"] == (
        "Gateway default/foreign is not served by lychgate (gatewayClassName someone-else); "
        "HTTPRoute default/gone not found; HTTPRoute default/r has no rule named three (rules: one, two)")
    assert conditions["Attached"]["status"] == "False"


@pytest.mark.parametrize(("body", "error"), [
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: Service, name: app}]\n  timeouts: {request: 1s}",
     "spec.targetRefs[0]: gateway.networking.k8s.io/Service cannot be targeted"),
    ("  targetSelectors: [{group: gateway.networking.k8s.io, kind: HTTPRoute}]\n  timeouts: {request: 1s}",
     "spec.targetSelectors[0].matchLabels: at least one label is required"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  extAuth: {extensionRef: {name: auth}, disable: {}}",
     "spec.extAuth: exactly one of extensionRef or disable must be set"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n  tracing: {randomSampling: 5}",
     "spec.tracing: can only be used when targeting GRPCRoute or HTTPRoute resources"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n  statPrefix: x",
     "spec.statPrefix: can only be used when targeting GRPCRoute or HTTPRoute resources"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  cors: {allowOrigins: ['example.com']}",
     "spec.cors.allowOrigins[0]: 'example.com' is not an origin"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  retry: {retryOn: [sometimes]}", "spec.retry.retryOn[0]: 'sometimes' is not one of"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  retry: {retryOn: [5xx], perTryTimeout: 2s}\n  timeouts: {request: 2s}",
     "spec.retry.perTryTimeout: must be less than timeouts.request (2s)"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  rateLimit: {local: {tokenBucket: {maxTokens: 1, fillInterval: 10ms}}}",
     "spec.rateLimit.local.tokenBucket.fillInterval: '10ms' is shorter than the minimum of 50ms"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  rateLimit: {local: {percentEnforced: 50, shareAcrossGateway: true}}",
     "spec.rateLimit.local.shareAcrossGateway: true needs tokenBucket"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  rateLimit: {quota: {extensionRef: {name: q}, bucket: [{key: k, type: Generic}]}}",
     "spec.rateLimit.quota.bucket[0]: a Generic entry sets value (and not header)"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  rateLimit: {quota: {extensionRef: {name: q}, bucket: [{key: k, type: Header, header: 'a b'}]}}",
     "spec.rateLimit.quota.bucket[0].header: "),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  rateLimit: {quota: {extensionRef: {name: q}, bucket: [{key: k, type: Generic, value: v}], "
     "reportingInterval: 10ms}}",
     "spec.rateLimit.quota.reportingInterval: '10ms' is shorter than the minimum of 100ms"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  rateLimit: {quota: {extensionRef: {name: q}, bucket: [{key: k, type: Generic, value: v}], "
     "expiredAssignmentBehavior: {strategy: Deny, timeout: soon}}}",
     "spec.rateLimit.quota.expiredAssignmentBehavior.timeout: 'soon' is not a duration"),
    ("  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n"
     "  transformation: {request: {set: [{name: x, value: '{% if user.id %}'}]}}",
     "spec.transformation.request.set[0].value: {% if %} at character 0 is never closed with {% endif %}"),
])
def test_invalid_fields_are_named(body: str, error: str) -> None:
    t = run(f"""---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: p}}
spec:
{body}
""")
    accepted = next(c for c in t.status[ObjectKey("TrafficPolicy", "default", "p")]["conditions"]
                    if c["type"] == "Accepted")
    assert accepted["status"] == "False"
    assert accepted["message"].startswith(f"invalid field {error}"), accepted["message"]


def test_policy_merge_settings() -> None:
    assert deep_merge_fields(None) == frozenset()
    assert deep_merge_fields({"trafficPolicy": {"extAuth": "DeepMerge", "extProc": "ShallowMerge",
                                                "cors": "DeepMerge", "transformation": "deep"},
                              "other": {}}) == {"extAuth"}


def test_a_listener_with_a_policy_has_a_filter_for_every_usable_extension() -> None:
    """Before any policy uses one: attaching it later changes only routes. A listener
    without policies carries none (docs/policies.md, "Filters in the chain")."""
    bare = next(iter(run("").gateways.values())).listeners[0]
    assert bare.extensions == () and not bare.policy_filters
    t = run(tp("slow", "  timeouts: {request: 10s}"))
    listener = next(iter(t.gateways.values())).listeners[0]
    assert [e.name for e in listener.extensions] == ["default/auth"] and listener.policy_filters
    assert "extension/default/auth" in {c.name for c in next(iter(t.gateways.values())).clusters}


GRPC = """
---
apiVersion: v1
kind: Service
metadata: {name: grpc-app}
spec: {ports: [{port: 9090, appProtocol: kubernetes.io/h2c}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g}
spec:
  parentRefs: [{name: gw}]
  hostnames: [grpc.example.com]
  rules:
    - name: orders
      matches: [{method: {service: shop.Orders}}]
      backendRefs: [{name: grpc-app, port: 9090}]
    - name: health
      matches: [{method: {service: grpc.health.v1.Health}}]
      backendRefs: [{name: grpc-app, port: 9090}]
"""


def test_grpc_routes_and_their_rules_are_targets() -> None:
    t = run(GRPC
            + tp("grpc-rbac", "  rbac:\n    policy: {matchExpressions: [\"request.headers['x-role'] == 'admin'\"]}",
                 targets="targetRefs: [{group: gateway.networking.k8s.io, kind: GRPCRoute, name: g}]")
            + tp("grpc-health", "  rbac:\n    policy: {allowedCIDRs: [10.0.0.0/8]}",
                 targets="targetRefs: [{group: gateway.networking.k8s.io, kind: GRPCRoute, name: g, "
                         "sectionName: health}]")
            + tp("grpc-missing", "  csrf: {}",
                 targets="targetRefs: [{group: gateway.networking.k8s.io, kind: GRPCRoute, name: g, "
                         "sectionName: nope}]"))
    rs = routes(t)
    orders, health = rs["g/orders"].policy, rs["g/health"].policy
    assert orders is not None and orders.rbac is not None and orders.rbac.expressions
    assert health is not None and health.rbac is not None and health.rbac.allowed_cidrs == ("10.0.0.0/8",)
    assert rs["r/one"].policy is None  # HTTPRoutes are not targeted
    assert applied(t, "grpc-rbac", 0)["message"] == ("applied: rbac; on some routes rbac overridden by policy "
                                                     "default/grpc-health on the more specific GRPCRoute default/g "
                                                     "rule health")
    assert applied(t, "grpc-missing", 0)["message"] == (
        "not applied: GRPCRoute default/g has no rule named nope (rules: orders, health)")
    route = t.status[ObjectKey("GRPCRoute", "default", "g")]["parents"][0]["conditions"]
    affected = next(c for c in route if c["type"] == "gateway.lychgate.dev/TrafficPolicyAffected")
    assert "TrafficPolicy default/grpc-health: applied: rbac" in affected["message"]


EXTENSION_REF_ROUTE = """---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: by-filter}
spec:
  parentRefs: [{name: gw}]
  hostnames: [filter.example.com]
  rules:
    - matches: [{path: {value: /with}}]
      filters: [{type: ExtensionRef, extensionRef: {group: gateway.lychgate.dev, kind: TrafficPolicy, name: %s}}]
      backendRefs: [{name: app, port: 80}]
    - matches: [{path: {value: /without}}]
      backendRefs: [{name: app, port: 80}]
"""


def test_a_policy_named_by_an_extension_ref_filter_applies_to_that_rule_only() -> None:
    """kgateway's way to put a policy on one rule: a TrafficPolicy without targets, named in
    the rule's ExtensionRef filter. It is the most specific attachment point."""
    t = run(tp("on-rule", headers("rule") + "\n  timeouts: {request: 4s}", targets="")
            + tp("on-route", headers("route"),
                 "targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: by-filter}]")
            + EXTENSION_REF_ROUTE % "on-rule")
    rs = routes(t)
    assert response_header(rs["by-filter/0"]) == "rule"
    assert rs["by-filter/0"].policy is not None and rs["by-filter/0"].policy.timeout_ms == 4000
    assert response_header(rs["by-filter/1"]) == "route"
    assert rs["r/one"].policy is None
    st = t.status[ObjectKey("TrafficPolicy", "default", "on-rule")]
    assert next(c for c in st["conditions"] if c["type"] == "Accepted")["status"] == "True"
    assert applied(t, "on-rule", 0)["status"] == "True"
    assert st["ancestors"][0]["ancestorRef"]["name"] == "by-filter"


def test_an_extension_ref_to_a_missing_policy_fails_the_rule_closed() -> None:
    t = run(EXTENSION_REF_ROUTE % "absent")
    rs = routes(t)
    action = rs["by-filter/0"].action
    assert isinstance(action, ir.DirectResponse) and action.status == 500
    assert not isinstance(rs["by-filter/1"].action, ir.DirectResponse)  # the other rule still serves
    resolved = t.status[ObjectKey("HTTPRoute", "default", "by-filter")]["parents"][0]["conditions"]
    assert any("TrafficPolicy default/absent not found" in c["message"] for c in resolved)


def test_a_policy_without_targets_or_referrers_says_it_applies_nowhere() -> None:
    t = run(tp("idle", "  timeouts: {request: 1s}", targets=""))
    st = t.status[ObjectKey("TrafficPolicy", "default", "idle")]
    assert next(c for c in st["conditions"] if c["type"] == "Accepted")["status"] == "True"
    assert applied(t, "idle") == {**applied(t, "idle"), "status": "False", "reason": "NoTargetMatched"}
    assert "no HTTPRoute rule names the policy in an ExtensionRef filter" in applied(t, "idle")["message"]


LISTENER_SET = """---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: shared}
spec:
  gatewayClassName: lychgate
  allowedListeners: {namespaces: {from: Same}}
  listeners:
    - {name: own, protocol: HTTP, port: 80, hostname: own.example.com}
---
apiVersion: %s
kind: %s
metadata: {name: team}
spec:
  parentRef: {name: shared, kind: Gateway, group: gateway.networking.k8s.io}
  listeners:
    - {name: extra, protocol: HTTP, port: 80, hostname: team.example.com}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: team-route}
spec:
  parentRefs: [{name: team, kind: ListenerSet, group: gateway.networking.k8s.io}]
  rules: [{backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: own-route}
spec:
  parentRefs: [{name: shared}]
  rules: [{backendRefs: [{name: app, port: 80}]}]
"""


@pytest.mark.parametrize(("group", "kind"), [("gateway.networking.k8s.io", "ListenerSet"),
                                             ("gateway.networking.x-k8s.io", "XListenerSet")])
def test_policies_target_listener_sets(group: str, kind: str) -> None:
    """As kgateway's listenerset suite: a policy on a ListenerSet (or the experimental
    XListenerSet kind) applies to the routes attached through its listeners, not to
    the Gateway's own listeners."""
    t = run(LISTENER_SET % ("gateway.networking.k8s.io/v1", "ListenerSet")
            + tp("on-set", headers("set"), f"targetRefs: [{{group: {group}, kind: {kind}, name: team}}]")
            + tp("on-listener", "  timeouts: {request: 7s}",
                 f"targetRefs: [{{group: {group}, kind: {kind}, name: team, sectionName: extra}}]"),
            base=BASE.replace("kind: Gateway\nmetadata: {name: gw}", "kind: Gateway\nmetadata: {name: gw-unused}"))
    rs = routes(t)
    team = rs["team-route/0"]
    assert response_header(team) == "set"
    assert team.policy is not None and team.policy.timeout_ms == 7000
    assert rs["own-route/0"].policy is None
    assert applied(t, "on-set", 0)["status"] == "True"


def test_an_invalid_policy_beside_a_valid_one_for_the_same_field_leaves_the_valid_one_serving() -> None:
    """kgateway's http_acl valid-and-invalid case: the invalid policy is refused and
    contributes nothing, the valid one's ACL applies, and the route is not replaced by a 500.
    An invalid policy whose field no valid policy supplies still fails its routes closed."""
    acl = "  acl:\n    defaultAction: allow\n    rules: [{cidrs: ['%s'], action: deny}]"
    t = run(tp("invalid-cidr", acl % "172.18.0.0/12") + tp("valid", acl % "192.168.0.0/16"))
    one = routes(t)["r/one"]
    assert not isinstance(one.action, ir.DirectResponse)
    assert one.policy is not None and one.policy.acl is not None
    invalid = t.status[ObjectKey("TrafficPolicy", "default", "invalid-cidr")]
    accepted = next(c for c in invalid["conditions"] if c["type"] == "Accepted")
    assert accepted["status"] == "False" and "172.18.0.0/12" in accepted["message"]
    assert applied(t, "valid", 0)["status"] == "True"

    alone = run(tp("invalid-cidr", acl % "172.18.0.0/12") + tp("timeouts", "  timeouts: {request: 2s}"))
    action = routes(alone)["r/one"].action
    assert isinstance(action, ir.DirectResponse) and action.status == 500


def test_a_policy_in_the_global_policy_namespace_selects_routes_in_every_namespace() -> None:
    """kgateway's globalPolicyNamespace (the installation namespace, unless set): there a
    policy's targetSelectors reach every namespace; elsewhere only the policy's own."""
    global_policy = """---
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: global-timeouts, namespace: lychgate-system}
spec:
  targetSelectors: [{group: gateway.networking.k8s.io, kind: HTTPRoute, matchLabels: {team: a}}]
  timeouts: {request: 11s}
"""
    store = Store()
    store.upsert(builtin_class())
    for doc in yaml.safe_load_all(BASE + global_policy):
        store.upsert(parse(doc))
    on = translate(store, lambda gw: "127.0.1.1", global_policy_namespace="lychgate-system")
    policy = routes(on)["r/one"].policy
    assert policy is not None and policy.timeout_ms == 11000
    ancestor = on.status[ObjectKey("TrafficPolicy", "lychgate-system", "global-timeouts")]["ancestors"][0]
    assert ancestor["ancestorRef"]["namespace"] == "default"

    off = translate(store, lambda gw: "127.0.1.1", global_policy_namespace="")
    assert routes(off)["r/one"].policy is None
    st = off.status[ObjectKey("TrafficPolicy", "lychgate-system", "global-timeouts")]
    assert "matched no HTTPRoute with labels team=a in namespace lychgate-system" in \
        next(c for c in st["conditions"] if c["type"] == "Applied")["message"]


def test_an_invalid_route_policy_does_not_fall_back_to_a_looser_gateway_one() -> None:
    acl = "  acl:\n    defaultAction: allow\n    rules: [{cidrs: ['%s'], action: deny}]"
    t = run(tp("gateway-acl", acl % "10.0.0.0/8", "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]")
            + tp("route-acl", acl % "172.18.0.0/12"))
    action = routes(t)["r/one"].action
    assert isinstance(action, ir.DirectResponse) and action.status == 500
    assert routes(t)["other/0"].policy is not None  # the Gateway's ACL still serves the other route


def test_a_policy_named_on_a_rule_s_only_backend_applies_to_the_rule() -> None:
    """kgateway's extproc backend-filter case: the ExtensionRef filter sits on the backendRef.
    On a rule's only backend that is the rule's policy; on one of several it is refused."""
    backend_filter = "filters: [{type: ExtensionRef, extensionRef: {group: gateway.lychgate.dev, kind: TrafficPolicy, name: per-backend}}]"
    route = f"""---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: backends}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [backends.example.com]
  rules:
    - matches: [{{path: {{value: /with}}}}]
      backendRefs: [{{name: app, port: 80, {backend_filter}}}]
    - matches: [{{path: {{value: /without}}}}]
      backendRefs: [{{name: app, port: 80}}]
    - matches: [{{path: {{value: /split}}}}]
      backendRefs: [{{name: app, port: 80, {backend_filter}}}, {{name: authz, port: 9000}}]
"""
    t = run(tp("per-backend", "  timeouts: {request: 3s}", targets="") + route)
    rs = routes(t)
    assert rs["backends/0"].policy is not None and rs["backends/0"].policy.timeout_ms == 3000
    assert rs["backends/1"].policy is None
    split = rs["backends/2"].action
    assert isinstance(split, ir.DirectResponse) and split.status == 500
    conditions = t.status[ObjectKey("HTTPRoute", "default", "backends")]["parents"][0]["conditions"]
    assert any("a TrafficPolicy on one of several backendRefs is not supported" in c["message"] for c in conditions)


def test_an_external_auth_filter_is_refused_by_name() -> None:
    """Gateway API's experimental ExternalAuth filter is typed (the CRD validates it) but not
    served: its rule answers 500 and the route's status says what to use instead."""
    route = """---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ext}
spec:
  parentRefs: [{name: gw}]
  hostnames: [ext.example.com]
  rules:
    - filters: [{type: ExternalAuth, externalAuth: {protocol: GRPC, grpc: {}, backendRef: {name: authz, port: 9000}}}]
      backendRefs: [{name: app, port: 80}]
"""
    t = run(route)
    action = routes(t)["ext/0"].action
    assert isinstance(action, ir.DirectResponse) and action.status == 500
    conditions = t.status[ObjectKey("HTTPRoute", "default", "ext")]["parents"][0]["conditions"]
    assert any("filter ExternalAuth is not supported yet; a TrafficPolicy extAuth does this" in c["message"]
               for c in conditions)
    with pytest.raises(ManifestError, match=r"externalAuth\.protocl"):
        parse(yaml.safe_load(route.replace("protocol: GRPC", "protocl: GRPC")))
