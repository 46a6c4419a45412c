"""Token accounting: every answer's tokens as Prometheus counters, by Gateway, route,
backend, provider and model (the AI extension serves them on its metrics port)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from lychgate.ai.config import Provider
from lychgate.ai.providers.base import Usage

REGISTRY = CollectorRegistry(auto_describe=True)
LABELS = ("gateway", "route", "backend", "provider", "model")
TOKENS = Counter("lychgate_ai_tokens", "Tokens of LLM requests, as the providers counted them",
                 (*LABELS, "type"), registry=REGISTRY)
REQUESTS = Counter("lychgate_ai_requests", "LLM requests answered, by the provider's status class",
                   (*LABELS, "status"), registry=REGISTRY)


def count(provider: Provider, model: str, usage: Usage, gateway: str = "", route: str = "") -> None:
    backend, _, name = provider.id.rpartition("/")
    labels = (gateway, route, backend, name, model)
    TOKENS.labels(*labels, "input").inc(usage.input)
    TOKENS.labels(*labels, "output").inc(usage.output)
    TOKENS.labels(*labels, "total").inc(usage.total)
