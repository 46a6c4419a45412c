"""AI Backends and TrafficPolicy `ai`, for Envoy and for the AI extension.

Envoy gets, per Gateway whose routes use an AI Backend, the extension's loopback port
(its AI clusters call it: xds/translator/ai_gateway.py). The AI extension gets the
AIConfig built here: every AI Backend's providers with their credentials resolved
(translate/ai_backends.py) and every TrafficPolicy `ai` setting by the id routes carry
(policies/ai.py). Both are cheap (a few Backends and policies), so they are built whole
each pass; a Backend that cannot be resolved (a Secret missing) is left out, and its
routes answer 500 (translate/backends.py). `lychgate run` hands the whole config to its
one extension; in Kubernetes each Gateway's Pod gets only its own (`for_gateway`).
"""

from __future__ import annotations

import dataclasses

from lychgate import ir
from lychgate.ai.config import AIConfig
from lychgate.api.backend import Backend
from lychgate.api.policy import TrafficPolicy
from lychgate.store import Store
from lychgate.translate import ai_backends
from lychgate.translate.policies.ai import AI, route_settings, settings_id
from lychgate.translate.values import Invalid, Unresolved

# Where the AI extension listens beside Envoy when nothing else says (the proxy pod's
# container port in Kubernetes; `lychgate run` picks a free one).
DEFAULT_EXTENSION_PORT = 9097


def finish(gateways: dict[str, ir.GatewayIR], port: int) -> None:
    """Gateways with AI clusters learn where the extension is."""
    for ref, gw in gateways.items():
        if any(c.discovery == "ai" for c in gw.clusters):
            gateways[ref] = dataclasses.replace(gw, ai_extension_port=port)


def for_gateway(config: AIConfig, gateway: ir.GatewayIR) -> AIConfig:
    """The part of `config` one Gateway's proxy calls for: the providers of its AI clusters
    and the settings its routes carry. Another Gateway's keys never reach its Pod."""
    ids = {e.id for c in gateway.clusters if c.discovery == "ai" for e in c.ai_endpoints}
    settings = {p.ai for listener in gateway.listeners for vh in listener.virtual_hosts
                for p in vh.policies if p.ai is not None}
    return AIConfig(providers={i: p for i, p in config.providers.items() if i in ids},
                    routes={i: r for i, r in config.routes.items() if i in settings})


def per_gateway(config: AIConfig, gateways: dict[str, ir.GatewayIR]) -> dict[str, AIConfig]:
    """Each Gateway whose routes use an AI Backend, with its part of `config`."""
    return {ref: for_gateway(config, gw) for ref, gw in gateways.items() if gw.ai_extension_port}


def build(store: Store, gateways: dict[str, ir.GatewayIR]) -> AIConfig:
    """The providers and route settings the AI extension needs; nothing (no Secret read,
    no policy dumped) while no Gateway routes to an AI Backend: this runs every pass."""
    out = AIConfig()
    if not any(gw.ai_extension_port for gw in gateways.values()):
        return out
    for backend in store.list(Backend):
        if backend.spec.ai is None:
            continue
        try:
            for _, provider in ai_backends.providers_of(store, backend):
                out.providers[provider.id] = provider
        except (Invalid, Unresolved):
            continue  # the Backend's status says why; its routes answer 500
    for policy in store.list(TrafficPolicy):
        if policy.spec.ai is None:
            continue
        value = AI.value(policy)
        assert value is not None
        try:
            settings = route_settings(settings_id(value), policy.spec.ai, store=store, namespace=policy.namespace)
        except (Invalid, Unresolved):
            continue  # the policy's status says why; its routes answer 500
        out.routes[settings.id] = settings
    return out
