"""Access logs of a listener (ListenerPolicy `accessLog[]`) → the connection manager's access_log.

A file sink is Envoy's file logger with a text or JSON format; a gRPC sink is
Envoy's HTTP gRPC access log service (envoy.service.accesslog.v3); an
OpenTelemetry sink sends OTLP log records. Filters map one to one onto Envoy's
AccessLogFilter (a CEL condition is the `cel` extension filter).
"""

from __future__ import annotations

import json

from envoy.config.accesslog.v3 import accesslog_pb2 as log_pb
from envoy.config.core.v3 import config_source_pb2
from envoy.config.core.v3 import substitution_format_string_pb2 as fmt_pb
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.access_loggers.file.v3 import file_pb2
from envoy.extensions.access_loggers.filters.cel.v3 import cel_pb2
from envoy.extensions.access_loggers.grpc.v3 import als_pb2
from envoy.extensions.access_loggers.open_telemetry.v3 import logs_service_pb2 as otel_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from envoy.type.v3 import percent_pb2
from google.protobuf import json_format

from lychgate import ir, ir_listener
from lychgate.xds.translator.collector import grpc_service
from lychgate.xds.translator.features import Feature, register

_OPS = {"EQ": log_pb.ComparisonFilter.EQ, "GE": log_pb.ComparisonFilter.GE, "LE": log_pb.ComparisonFilter.LE}


def access_log(sink: ir_listener.AccessLogSink) -> log_pb.AccessLog:
    out = log_pb.AccessLog()
    if sink.kind == "file":
        cfg = file_pb2.FileAccessLog(path=sink.path)
        if sink.json_format is not None:
            cfg.log_format.json_format.update(json.loads(sink.json_format))
        else:
            cfg.log_format.CopyFrom(fmt_pb.SubstitutionFormatString(
                text_format_source={"inline_string": sink.text_format or ""}))
        out.name = "envoy.access_loggers.file"
        out.typed_config.Pack(cfg)
    elif sink.kind == "grpc":
        assert sink.collector is not None
        als = als_pb2.HttpGrpcAccessLogConfig(
            common_config=_common(sink),
            additional_request_headers_to_log=list(sink.request_headers),
            additional_response_headers_to_log=list(sink.response_headers),
            additional_response_trailers_to_log=list(sink.response_trailers),
        )
        out.name = "envoy.access_loggers.http_grpc"
        out.typed_config.Pack(als)
    else:
        otel = otel_pb.OpenTelemetryAccessLogConfig(common_config=_common(sink),
                                                    disable_builtin_labels=sink.disable_builtin_labels)
        if sink.body is not None:
            otel.body.string_value = sink.body
        if sink.attributes is not None:
            json_format.Parse(sink.attributes, otel.attributes)
        if sink.resource_attributes is not None:
            json_format.Parse(sink.resource_attributes, otel.resource_attributes)
        out.name = "envoy.access_loggers.open_telemetry"
        out.typed_config.Pack(otel)
    if sink.filter is not None:
        out.filter.CopyFrom(log_filter(sink.filter))
    return out


def _common(sink: ir_listener.AccessLogSink) -> als_pb2.CommonGrpcAccessLogConfig:
    assert sink.collector is not None
    return als_pb2.CommonGrpcAccessLogConfig(log_name=sink.log_name, grpc_service=grpc_service(sink.collector),
                                             transport_api_version=config_source_pb2.V3)


def _comparison(f: ir_listener.LogFilter, key: str) -> log_pb.ComparisonFilter:
    # Envoy wants a runtime key beside the value; nothing sets it, so the value holds.
    return log_pb.ComparisonFilter(op=_OPS[f.op], value={"default_value": f.value,
                                                         "runtime_key": f"lychgate.access_log.{key}"})


def log_filter(f: ir_listener.LogFilter) -> log_pb.AccessLogFilter:
    out = log_pb.AccessLogFilter()
    if f.kind == "status":
        out.status_code_filter.comparison.CopyFrom(_comparison(f, "status_code"))
    elif f.kind == "duration":
        out.duration_filter.comparison.CopyFrom(_comparison(f, "duration"))
    elif f.kind == "not_health_check":
        out.not_health_check_filter.SetInParent()
    elif f.kind == "traceable":
        out.traceable_filter.SetInParent()
    elif f.kind == "header":
        assert f.header is not None
        name, how, value = f.header
        matcher = (string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=value))
                   if how == "RegularExpression" else string_pb2.StringMatcher(exact=value))
        out.header_filter.header.CopyFrom(route_pb.HeaderMatcher(name=name, string_match=matcher))
    elif f.kind == "response_flags":
        out.response_flag_filter.flags.extend(f.values)
    elif f.kind == "grpc_status":
        out.grpc_status_filter.statuses.extend(log_pb.GrpcStatusFilter.Status.Value(s) for s in f.values)
        out.grpc_status_filter.exclude = f.exclude
    elif f.kind == "cel":
        out.extension_filter.name = "envoy.access_loggers.extension_filters.cel"
        out.extension_filter.typed_config.Pack(cel_pb2.ExpressionFilter(expression=f.text))
    elif f.kind == "runtime":
        out.runtime_filter.runtime_key = f.text
        out.runtime_filter.use_independent_randomness = f.independent
        if f.numerator is not None:
            out.runtime_filter.percent_sampled.CopyFrom(percent_pb2.FractionalPercent(
                numerator=f.numerator, denominator=percent_pb2.FractionalPercent.DenominatorType.Value(f.denominator)))
    else:
        children = (out.and_filter if f.kind == "and" else out.or_filter).filters
        children.extend(log_filter(c) for c in f.children)
    return out


class AccessLogFeature(Feature):
    name = "access_log"

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if listener.settings is not None:
            hcm.access_log.extend(access_log(s) for s in listener.settings.access_logs)


register(AccessLogFeature())
