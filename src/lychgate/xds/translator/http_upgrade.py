"""TrafficPolicy `httpUpgrade`: the route's upgrade configs, as kgateway writes them (a type
the route already allows, such as a WebSocket backend's, is replaced, not repeated)."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as route_pb

from lychgate import ir
from lychgate.xds.translator.features import Feature, register


class HTTPUpgrade(Feature):
    name = "http_upgrade"

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        if route.policy is None or not route.policy.http_upgrades or not out.HasField("route"):
            return
        configs = out.route.upgrade_configs
        for kind, terminate in route.policy.http_upgrades:
            config = route_pb.RouteAction.UpgradeConfig(upgrade_type=kind, enabled={"value": True})
            if terminate:
                config.connect_config.SetInParent()
            existing = next((i for i, c in enumerate(configs) if c.upgrade_type.lower() == kind.lower()), None)
            if existing is None:
                configs.append(config)
            else:
                configs[existing].CopyFrom(config)


register(HTTPUpgrade())
