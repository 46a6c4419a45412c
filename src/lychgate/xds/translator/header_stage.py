"""headerModifiers.filterStage → a header_mutation filter at that position of the chain.

A listener gets the filter of a position (filter_stage.py) once one of its
routes asks for it (off by default), and those routes turn it on with their
header changes. Envoy applies the changes when the request (or response)
passes that point, so, for example, a header set `Before AuthZ` is seen by the
authorization service. (`weight` is accepted; with one header_mutation filter
per position there is nothing to order it against but other kinds of filters.)
"""

from __future__ import annotations

from collections.abc import Iterable

from envoy.config.common.mutation_rules.v3 import mutation_rules_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.header_mutation.v3 import header_mutation_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.filter_stage import SOURCES, Placed, Position
from lychgate.xds.translator.policy_filters import enable_on_route, policies
from lychgate.xds.translator.route import header_values


def filter_name(position: Position) -> str:
    return f"envoy.filters.http.header_mutation/{position[0]}-{position[1]}"


def _placed(listener: ir.HTTPListener) -> Iterable[Placed]:
    used = {p.header_stage for p in policies(listener) if p.header_stage is not None}
    return [Placed(position, filter_name(position), header_mutation_pb2.HeaderMutation()) for position in used]


def _mutations(ops: ir.HeaderOps) -> list[mutation_rules_pb2.HeaderMutation]:
    return ([mutation_rules_pb2.HeaderMutation(append=v) for v in header_values(ops)]
            + [mutation_rules_pb2.HeaderMutation(remove=name) for name in ops.remove])


class HeaderStage(Feature):
    name = "header_stage"

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        p = route.policy
        if p is None or p.header_stage is None:
            return
        mutations = header_mutation_pb2.Mutations(request_mutations=_mutations(p.request_headers),
                                                  response_mutations=_mutations(p.response_headers))
        enable_on_route(out, filter_name(p.header_stage),
                        header_mutation_pb2.HeaderMutationPerRoute(mutations=mutations))


SOURCES.append(_placed)
register(HeaderStage())
