"""extProc: stream the request and response through ExtProc GatewayExtensions (Envoy ext_proc).

Each ExtProc GatewayExtension is its own filter, placed by its `filterStage`
(xds/translator/filter_stage.py). Which of them a route enables follows
kgateway:

- By default one policy's extProc applies to a route (the most specific, then
  the oldest), even when other policies name other extensions.
- With `policyMerge.trafficPolicy.extProc: DeepMerge` every extension that the
  policies of the route (at all attachment points) name is enabled, each with
  the settings (processingMode) of the highest-priority policy naming it; a
  lower-priority policy naming the same extension adds nothing. A `disable`
  in any of those policies turns every extension off on the route.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lychgate import ir
from lychgate.translate.policies.ext_auth import ExtensionField, check_switch
from lychgate.translate.policies.extensions import ext_proc_service, processing_mode
from lychgate.translate.policies.fields import register
from lychgate.translate.values import CompileContext

# The key of a merged value: the policies' own values, one per extension, highest
# priority first. A user cannot write it (the model rejects unknown fields).
MERGED = "merged"


def _ref(value: dict[str, Any]) -> tuple[str, str] | None:
    ref = value.get("extensionRef")
    return (ref["namespace"], ref["name"]) if ref else None


def _entries(value: dict[str, Any]) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] | None = value.get(MERGED)
    return merged if merged is not None else [value]


class ExtProcField(ExtensionField):
    name, attr, deep_mergeable = "extProc", "ext_proc", True
    combines_across_delegation = True

    def superseded(self, values: Sequence[dict[str, Any]]) -> list[tuple[int, str] | None]:
        disabler = next((i for i, v in enumerate(values) if "disable" in v), None)
        if disabler is not None:
            return [None if "disable" in v else (disabler, "which disables extProc") for v in values]
        first: dict[tuple[str, str] | None, int] = {}
        out: list[tuple[int, str] | None] = []
        for i, v in enumerate(values):
            ref = _ref(v)
            if ref in first:
                out.append((first[ref], "which names the same GatewayExtension"))
            else:
                first[ref] = i
                out.append(None)
        return out

    def merge(self, high: dict[str, Any], low: dict[str, Any]) -> dict[str, Any]:
        if "disable" in high or "disable" in low:
            return {"disable": {}}
        named = {_ref(e) for e in _entries(high)}
        return {MERGED: _entries(high) + [e for e in _entries(low) if _ref(e) not in named]}

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if MERGED not in value and check_switch(value, path):
            return {"ext_proc": ()}
        routes: list[ir.ExtProcRoute] = []
        for entry in _entries(value):
            ref = entry["extensionRef"]
            service, cluster = ext_proc_service(ctx.store, ref["namespace"], ref["name"])
            ctx.clusters[cluster.name] = cluster
            routes.append(ir.ExtProcRoute(service, processing_mode(entry.get("processingMode"))))
        return {"ext_proc": tuple(routes)}


register(ExtProcField())
