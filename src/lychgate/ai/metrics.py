"""Token accounting: every answer's tokens, and the answers by status class, as Prometheus
counters by Gateway, route, backend, provider and model (the AI extension serves them on
its metrics port)."""

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


def _labels(provider: Provider, model: str, gateway: str, route: str) -> tuple[str, ...]:
    backend, _, name = provider.id.rpartition("/")
    return gateway, route, backend, name, model


def answered(provider: Provider, model: str, status: int, gateway: str = "", route: str = "") -> None:
    """One provider answer, by status class ("2xx", "4xx", "5xx")."""
    REQUESTS.labels(*_labels(provider, model, gateway, route), f"{status // 100}xx").inc()


def count(provider: Provider, model: str, usage: Usage, gateway: str = "", route: str = "") -> None:
    labels = _labels(provider, model, gateway, route)
    TOKENS.labels(*labels, "input").inc(usage.input)
    TOKENS.labels(*labels, "output").inc(usage.output)
    TOKENS.labels(*labels, "total").inc(usage.total)
