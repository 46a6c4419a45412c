"""headerModifiers.filterStage → a header_mutation filter at that stage of the chain.

kgateway names five well-known stages (Fault, AuthN, AuthZ, RateLimit, Route)
and a predicate (Before, During, After). Each of the fifteen positions is one
feature with its own filter order among lychgate's filters; a listener gets the
filter of a position once one of its routes asks for it (off by default), and
those routes turn it on with their header changes. Envoy applies the changes
when the request (or response) passes that point, so, for example, a header set
`Before AuthZ` is seen by the authorization service. (`weight` is accepted; with
one filter per position there is nothing to order.)
"""

from __future__ import annotations

from envoy.config.common.mutation_rules.v3 import mutation_rules_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.header_mutation.v3 import header_mutation_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route, policies
from lychgate.xds.translator.route import header_values

# The filter order of each stage (see the other features' `order`): fault 5,
# authentication before ext_authz (40), the global rate limit 45, routing last.
_STAGES = {"Fault": 6, "AuthN": 34, "AuthZ": 41, "RateLimit": 46, "Route": 97}
_PREDICATES = {"Before": -2, "During": 0, "After": 1}


class _StagesUsed:
    """The positions a listener's routes use, found once per listener: the fifteen
    features ask in turn about the same listener, and it may have many routes."""

    def __init__(self) -> None:
        self.listener: ir.HTTPListener | None = None
        self.stages: frozenset[tuple[str, str]] = frozenset()

    def __call__(self, listener: ir.HTTPListener) -> frozenset[tuple[str, str]]:
        if listener is not self.listener:
            self.listener = listener
            self.stages = frozenset(p.header_stage for p in policies(listener) if p.header_stage is not None)
        return self.stages


_stages_used = _StagesUsed()


def _mutations(ops: ir.HeaderOps) -> list[mutation_rules_pb2.HeaderMutation]:
    return ([mutation_rules_pb2.HeaderMutation(append=v) for v in header_values(ops)]
            + [mutation_rules_pb2.HeaderMutation(remove=name) for name in ops.remove])


class HeaderStage(Feature):
    def __init__(self, stage: str, predicate: str) -> None:
        self.stage = (stage, predicate)
        self.name = f"header_mutation_{stage}_{predicate}".lower()
        self.order = _STAGES[stage] + _PREDICATES[predicate]
        self.filter = f"envoy.filters.http.header_mutation/{stage}-{predicate}"

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if self.stage in _stages_used(listener):
            add_disabled_filter(hcm, self.filter, header_mutation_pb2.HeaderMutation())

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        p = route.policy
        if p is None or p.header_stage != self.stage:
            return
        mutations = header_mutation_pb2.Mutations(request_mutations=_mutations(p.request_headers),
                                                  response_mutations=_mutations(p.response_headers))
        enable_on_route(out, self.filter, header_mutation_pb2.HeaderMutationPerRoute(mutations=mutations))


for _stage in _STAGES:
    for _predicate in _PREDICATES:
        register(HeaderStage(_stage, _predicate))
