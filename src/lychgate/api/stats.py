"""GatewayParameters `spec.kube.stats`: the proxy's Prometheus metrics (kgateway's StatsConfig)."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from lychgate.api.base import Model

_KINDS = ("exact", "prefix", "suffix", "contains", "safe_regex")


class StringMatcher(Model):
    """Exactly one of exact, prefix, suffix, contains or safeRegex."""

    exact: str | None = None
    prefix: str | None = Field(None, min_length=1)
    suffix: str | None = Field(None, min_length=1)
    contains: str | None = None
    safe_regex: str | None = None
    ignore_case: bool | None = None

    @model_validator(mode="after")
    def _one(self) -> StringMatcher:
        if sum(getattr(self, k) is not None for k in _KINDS) != 1:
            raise ValueError("exactly one of exact, prefix, suffix, contains or safeRegex must be set")
        if self.safe_regex is not None:
            try:
                re.compile(self.safe_regex)
            except re.error as err:
                raise ValueError(f"safeRegex {self.safe_regex!r} is not a regular expression: {err}") from None
        return self


class StatsMatcher(Model):
    """Which Envoy stats exist at all: an inclusion or an exclusion list (not both)."""

    inclusion_list: list[StringMatcher] = Field(default_factory=list, max_length=16)
    exclusion_list: list[StringMatcher] = Field(default_factory=list, max_length=16)

    @model_validator(mode="after")
    def _one(self) -> StatsMatcher:
        if bool(self.inclusion_list) == bool(self.exclusion_list):
            raise ValueError("exactly one of inclusionList or exclusionList must be set")
        return self


class StatsConfig(Model):
    enabled: bool | None = Field(None, description="Serve /metrics on port 9091 and annotate the Pod for scraping.")
    route_prefix_rewrite: str | None = Field(
        None, description="The Envoy admin path /metrics shows (default /stats/prometheus?usedonly).")
    enable_stats_route: bool | None = Field(None, description="Also serve Envoy's /stats on port 9091.")
    stats_route_prefix_rewrite: str | None = Field(
        None, description="The Envoy admin path /stats shows (default /stats).")
    matcher: StatsMatcher | None = None
