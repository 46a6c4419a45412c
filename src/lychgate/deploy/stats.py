"""GatewayParameters `kube.stats`: the proxy's Prometheus metrics, reachable by a scraper.

Envoy's admin interface stays on 127.0.0.1; with `stats.enabled` the proxy gets
a static listener on METRICS_PORT that serves only `/metrics` (Envoy's
`/stats/prometheus?usedonly`, or `routePrefixRewrite`) and, with
`enableStatsRoute`, `/stats`. The container port is named `http-monitoring`
and the Pod carries the `prometheus.io/scrape|port|path` annotations, as
kgateway's proxies do, so an annotation-based Prometheus finds it and the
chart's PodMonitor can select it. `matcher` limits which stats Envoy keeps.
"""

from __future__ import annotations

import json
from typing import Any

from lychgate.api.stats import StatsConfig, StringMatcher

METRICS_PORT = 9091
PORT_NAME = "http-monitoring"
DEFAULT_METRICS_PATH = "/stats/prometheus?usedonly"
HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"


def enabled(stats: StatsConfig | None) -> bool:
    return stats is not None and bool(stats.enabled)


def _matcher(m: StringMatcher) -> dict[str, Any]:
    out: dict[str, Any] = m.model_dump(exclude_none=True, exclude={"ignore_case", "safe_regex"})
    if m.safe_regex is not None:
        out["safe_regex"] = {"regex": m.safe_regex}
    if m.ignore_case is not None:
        out["ignore_case"] = m.ignore_case
    return out


def add_to_bootstrap(boot: dict[str, Any], stats: StatsConfig | None, admin_cluster: str) -> None:
    """The metrics listener (routes to `admin_cluster`) and the stats matcher."""
    if stats is None:
        return
    if stats.matcher is not None:
        key, items = (("inclusion_list", stats.matcher.inclusion_list) if stats.matcher.inclusion_list
                      else ("exclusion_list", stats.matcher.exclusion_list))
        boot.setdefault("stats_config", {})["stats_matcher"] = {key: {"patterns": [_matcher(m) for m in items]}}
    if not enabled(stats):
        return
    routes: list[dict[str, Any]] = [{"match": {"prefix": "/metrics"},
               "route": {"cluster": admin_cluster, "prefix_rewrite": stats.route_prefix_rewrite or DEFAULT_METRICS_PATH}}]
    if stats.enable_stats_route:
        routes.append({"match": {"prefix": "/stats"},
                       "route": {"cluster": admin_cluster, "prefix_rewrite": stats.stats_route_prefix_rewrite or "/stats"}})
    routes.append({"match": {"prefix": "/"}, "direct_response": {"status": 404}})
    boot.setdefault("static_resources", {}).setdefault("listeners", []).append({
        "name": "lychgate_metrics",
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": METRICS_PORT}},
        "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": HCM, "stat_prefix": "lychgate_metrics",
                "route_config": {"virtual_hosts": [{"name": "metrics", "domains": ["*"], "routes": routes}]},
                "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": ROUTER}}],
            },
        }]}],
    })


def add_to_config_map(config_map: dict[str, Any], file: str, stats: StatsConfig | None, admin_cluster: str) -> None:
    """The same, in the ConfigMap that carries the bootstrap as JSON."""
    if stats is None:
        return
    boot = json.loads(config_map["data"][file])
    add_to_bootstrap(boot, stats, admin_cluster)
    config_map["data"][file] = json.dumps(boot, indent=2, sort_keys=True) + "\n"


def expose(deployment: dict[str, Any], stats: StatsConfig | None) -> None:
    """The container port and the Pod's scrape annotations."""
    if not enabled(stats):
        return
    template = deployment["spec"]["template"]
    template["spec"]["containers"][0]["ports"].append(
        {"name": PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"})
    template["metadata"].setdefault("annotations", {}).update({
        "prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT), "prometheus.io/path": "/metrics"})
