"""GatewayParameters `spec.kube.stats`: the proxy's Prometheus metrics (kgateway's StatsConfig)."""

from __future__ import annotations

from pydantic import Field

from lychgate.api.base import Model
from lychgate.api.matchers import StringMatcher
from lychgate.api.rules import exactly_one_of


class StatsMatcher(Model):
    """Which Envoy stats exist at all: an inclusion or an exclusion list (not both)."""

    # At least one entry: Envoy refuses an empty list (ListStringMatcher.patterns); kgateway's
    # CRD lets `[]` through (only MinProperties=1 on the matcher) to a proxy that cannot start.
    inclusion_list: list[StringMatcher] = Field(default_factory=list, min_length=1, max_length=16)
    exclusion_list: list[StringMatcher] = Field(default_factory=list, min_length=1, max_length=16)

    RULES = (exactly_one_of("inclusion_list", "exclusion_list"),)


class StatsConfig(Model):
    enabled: bool | None = Field(None, description="Serve /metrics on port 9091 and annotate the Pod for scraping.")
    route_prefix_rewrite: str | None = Field(
        None, description="The Envoy admin path /metrics shows (default /stats/prometheus?usedonly).")
    enable_stats_route: bool | None = Field(None, description="Also serve Envoy's /stats on port 9091.")
    stats_route_prefix_rewrite: str | None = Field(
        None, description="The Envoy admin path /stats shows (default /stats).")
    matcher: StatsMatcher | None = None
