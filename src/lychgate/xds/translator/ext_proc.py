"""extProc → one Envoy ext_proc filter per GatewayExtension, enabled per route.

Each filter sits where its extension's `filterStage` puts it (filter_stage.py);
kgateway's default is right after authorization. A route enables the filter of
every extension its policy carries (several with policyMerge DeepMerge), so a
request meets them in filter-chain order: by stage, then higher weight, then name.
"""

from __future__ import annotations

from collections.abc import Iterable

from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2 as proc_pb
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2 as mode_pb

from lychgate import ir
from lychgate.xds.translator.ext_authz import grpc_service
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.filter_stage import SOURCES, Placed
from lychgate.xds.translator.policy_filters import (
    enable_on_route,
    extension_services,
    ms,
    stat_name,
)

PREFIX = "envoy.filters.http.ext_proc/"
_HEADER = mode_pb.ProcessingMode.HeaderSendMode
_BODY = mode_pb.ProcessingMode.BodySendMode
_ROUTE_CACHE = {"FromResponse": proc_pb.ExternalProcessor.DEFAULT, "Clear": proc_pb.ExternalProcessor.CLEAR,
                "Retain": proc_pb.ExternalProcessor.RETAIN}


def filter_name(service: ir.ExtProcService) -> str:
    return PREFIX + service.name


def processing_mode(mode: ir.ProcessingMode) -> mode_pb.ProcessingMode:
    out = mode_pb.ProcessingMode()
    for attr in ("request_header", "response_header", "request_trailer", "response_trailer"):
        value = getattr(mode, attr)
        if value is not None:
            setattr(out, f"{attr}_mode", _HEADER.Value(value))
    for attr in ("request_body", "response_body"):
        value = getattr(mode, attr)
        if value is not None:
            setattr(out, f"{attr}_mode", _BODY.Value(value))
    return out


def ext_proc(service: ir.ExtProcService) -> proc_pb.ExternalProcessor:
    out = proc_pb.ExternalProcessor(
        grpc_service=grpc_service(service.cluster, service.authority, service.timeout_ms, service.retry),
        failure_mode_allow=service.fail_open,
        processing_mode=processing_mode(service.processing_mode),
        stat_prefix=service.stat_prefix or stat_name(service.name),
        route_cache_action=_ROUTE_CACHE[service.route_cache_action],
        allow_mode_override=service.allow_mode_override,
        allowed_override_modes=[processing_mode(m) for m in service.allowed_override_modes],
        request_attributes=list(service.request_attributes),
    )
    if service.forward_typed_metadata or service.forward_untyped_metadata:
        out.metadata_options.forwarding_namespaces.typed.extend(service.forward_typed_metadata)
        out.metadata_options.forwarding_namespaces.untyped.extend(service.forward_untyped_metadata)
    if service.receive_untyped_metadata:
        out.metadata_options.receiving_namespaces.untyped.extend(service.receive_untyped_metadata)
    if service.message_timeout_ms is not None:
        out.message_timeout.CopyFrom(ms(service.message_timeout_ms))
    if service.max_message_timeout_ms is not None:
        out.max_message_timeout.CopyFrom(ms(service.max_message_timeout_ms))
    return out


def _placed(listener: ir.HTTPListener) -> Iterable[Placed]:
    services = extension_services(listener, ir.ExtProcService, "ext_proc")
    return [Placed(s.stage, filter_name(s), ext_proc(s), s.stage_weight) for s in services.values()]


class ExtProc(Feature):
    name = "ext_proc"

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        for proc in route.policy.ext_proc if route.policy is not None else ():
            overrides = proc_pb.ExtProcOverrides()
            if proc.processing_mode is not None:
                overrides.processing_mode.CopyFrom(processing_mode(proc.processing_mode))
            enable_on_route(out, filter_name(proc.service), proc_pb.ExtProcPerRoute(overrides=overrides))


SOURCES.append(_placed)
register(ExtProc())
