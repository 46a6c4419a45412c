"""extProc: stream the request and response through an ExtProc GatewayExtension (Envoy ext_proc)."""

from __future__ import annotations

from typing import Any

from lychgate import ir
from lychgate.translate.policies.common import CompileContext
from lychgate.translate.policies.ext_auth import ExtensionField, check_switch
from lychgate.translate.policies.extensions import ext_proc_service, processing_mode
from lychgate.translate.policies.fields import register


class ExtProcField(ExtensionField):
    name, attr, deep_mergeable = "extProc", "ext_proc", True

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if check_switch(value, path):
            return {"ext_proc": None}
        ref = value["extensionRef"]
        service, cluster = ext_proc_service(ctx.store, ref["namespace"], ref["name"])
        ctx.clusters[cluster.name] = cluster
        return {"ext_proc": ir.ExtProcRoute(service, processing_mode(value.get("processingMode")))}


register(ExtProcField())
