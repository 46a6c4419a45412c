"""`httpSettings.accessLog[]` → access log sinks (IR), checked field by field.

Each entry has exactly one sink: `fileSink` (a path, and a text `stringFormat`
or a `jsonFormat` dictionary of Envoy command operators; neither: lychgate's
DEFAULT_FORMAT), `grpcService` (Envoy's gRPC access log service) or
`openTelemetry` (OTLP logs), and optionally a `filter` deciding which requests
are logged. Values Envoy would reject (an unknown response flag, a filter with
two conditions) are reported here with their field path instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lychgate import envoy_limits, ir, ir_listener
from lychgate.api.format_dict import stray_percent
from lychgate.api.listener_policy import (
    AccessLog,
    AccessLogFilter,
    AnyValue,
    FilterType,
    KeyAnyValueList,
)
from lychgate.store import Store
from lychgate.translate.collectors import collector
from lychgate.translate.values import Invalid, Unresolved, envoy_check, header_name

# One line per request: when, what, the answer, how long, who asked, and where it went.
DEFAULT_FORMAT = (
    '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" '
    "%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% "
    '"%REQ(:AUTHORITY)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" '
    'client=%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% route=%ROUTE_NAME% upstream=%UPSTREAM_HOST%\n'
)

# Envoy's short response flags (what %RESPONSE_FLAGS% prints and responseFlagFilter takes).
RESPONSE_FLAGS = frozenset({
    "LH", "UH", "UT", "LR", "UR", "UF", "UC", "UO", "NR", "DI", "FI", "RL", "UAEX", "RLSE", "DC", "URX",
    "SI", "IH", "DPE", "UMSDR", "RFCF", "NFCF", "DT", "UPE", "NC", "OM", "DF", "DO", "DR",
})

_CONDITIONS = {
    "status_code_filter": "statusCodeFilter", "duration_filter": "durationFilter",
    "not_health_check_filter": "notHealthCheckFilter", "traceable_filter": "traceableFilter",
    "header_filter": "headerFilter", "response_flag_filter": "responseFlagFilter",
    "grpc_status_filter": "grpcStatusFilter", "cel_filter": "celFilter", "runtime_filter": "runtimeFilter",
}
_OPERATOR = re.compile(r"%([A-Z_0-9]+)(\([^)]*\))?(:\d+)?%")


def compile_access_logs(store: Store, kind: str, namespace: str, logs: list[AccessLog], path: str,
                        clusters: dict[str, ir.Cluster],
                        unreachable: list[Unresolved]) -> tuple[ir_listener.AccessLogSink, ...]:
    """The sinks, adding the clusters of their collectors to `clusters`. A sink whose
    collector cannot be reached is left out (and added to `unreachable`): the others
    still log."""
    out = []
    for i, log in enumerate(logs):
        try:
            out.append(_sink(store, kind, namespace, log, f"{path}[{i}]", clusters))
        except Unresolved as err:
            unreachable.append(err)
    return tuple(out)


def _sink(store: Store, kind: str, namespace: str, log: AccessLog, path: str,
          clusters: dict[str, ir.Cluster]) -> ir_listener.AccessLogSink:
    sinks = [n for n, v in (("fileSink", log.file_sink), ("grpcService", log.grpc_service),
                            ("openTelemetry", log.open_telemetry)) if v is not None]
    if len(sinks) != 1:
        raise Invalid(path, "exactly one of fileSink, grpcService or openTelemetry must be set"
                      + (f" (found {', '.join(sinks)})" if sinks else ""))
    filt = compile_filter(log.filter, f"{path}.filter") if log.filter is not None else None
    if log.file_sink is not None:
        sink = log.file_sink
        if sink.string_format is not None and sink.json_format is not None:
            raise Invalid(f"{path}.fileSink", "only one of stringFormat or jsonFormat may be set")
        if sink.json_format is not None:  # checked as Envoy would by the model (api/format_dict.py)
            return ir_listener.AccessLogSink(kind="file", filter=filt, path=sink.path,
                                             json_format=json.dumps(sink.json_format))
        text = sink.string_format if sink.string_format is not None else DEFAULT_FORMAT
        _check_operators(text, f"{path}.fileSink.stringFormat")
        # Envoy writes exactly the format: one line per request needs the newline.
        return ir_listener.AccessLogSink(kind="file", filter=filt, path=sink.path,
                                         text_format=text if text.endswith("\n") else text + "\n")
    if log.grpc_service is not None:
        grpc = log.grpc_service
        col, cluster = collector(store, kind, namespace, grpc, f"{path}.grpcService")
        clusters[cluster.name] = cluster
        headers = {}
        for attr, label in (("additional_request_headers_to_log", "additionalRequestHeadersToLog"),
                            ("additional_response_headers_to_log", "additionalResponseHeadersToLog"),
                            ("additional_response_trailers_to_log", "additionalResponseTrailersToLog")):
            headers[attr] = tuple(header_name(h, f"{path}.grpcService.{label}[{i}]")
                                  for i, h in enumerate(getattr(grpc, attr)))
        return ir_listener.AccessLogSink(
            kind="grpc", filter=filt, collector=col, log_name=grpc.log_name,
            request_headers=headers["additional_request_headers_to_log"],
            response_headers=headers["additional_response_headers_to_log"],
            response_trailers=headers["additional_response_trailers_to_log"],
        )
    otel = log.open_telemetry
    assert otel is not None
    col, cluster = collector(store, kind, namespace, otel.grpc_service, f"{path}.openTelemetry.grpcService")
    clusters[cluster.name] = cluster
    if otel.body is not None:
        _check_operators(otel.body, f"{path}.openTelemetry.body")
    return ir_listener.AccessLogSink(
        kind="otel", filter=filt, collector=col, log_name=otel.grpc_service.log_name, body=otel.body,
        attributes=_kv_json(otel.attributes),
        resource_attributes=_kv_json(otel.resource_attributes),
        disable_builtin_labels=bool(otel.disable_builtin_labels),
    )


def _check_operators(text: str, path: str) -> None:
    """Catch the most common mistake, an unclosed operator, before Envoy does."""
    if stray_percent(text):
        raise Invalid(path, f"{text!r} has an unpaired '%' (command operators look like %REQ(:PATH)%; "
                            "write a literal percent sign as %%)")


def _kv_json(values: KeyAnyValueList | None) -> str | None:
    """OTLP's KeyValueList in its JSON form, for Envoy's open_telemetry logger."""
    return None if values is None else json.dumps(_kv_list(values))


def _kv_list(values: KeyAnyValueList) -> dict[str, Any]:
    return {"values": [{"key": kv.key, "value": _any_value(kv.value)} for kv in values.values]}


def _any_value(value: AnyValue) -> dict[str, Any]:
    """The model holds exactly one of the three (api/listener_policy.py), at any depth."""
    if value.string_value is not None:
        return {"stringValue": value.string_value}
    if value.array_value is not None:
        return {"arrayValue": {"values": [_any_value(v) for v in value.array_value]}}
    assert value.kv_list_value is not None
    return {"kvlistValue": _kv_list(value.kv_list_value)}


def compile_filter(value: AccessLogFilter, path: str) -> ir_listener.LogFilter:
    combined = [n for n, v in (("andFilter", value.and_filter), ("orFilter", value.or_filter)) if v]
    inline = [n for n in _CONDITIONS if getattr(value, n) is not None]
    if len(combined) + len(inline) != 1:
        raise Invalid(path, "exactly one filter must be set: a condition, andFilter or orFilter")
    if combined:
        items: list[FilterType] = value.and_filter or value.or_filter
        name = combined[0]
        if len(items) < 2:
            raise Invalid(f"{path}.{name}", "needs at least two filters")
        children = tuple(_condition(f, f"{path}.{name}[{i}]") for i, f in enumerate(items))
        return ir_listener.LogFilter(kind="and" if name == "andFilter" else "or", children=children)
    return _condition(value, path)


def _condition(value: FilterType, path: str) -> ir_listener.LogFilter:
    present = [n for n in _CONDITIONS if getattr(value, n) is not None]
    if len(present) != 1:
        raise Invalid(path, "exactly one condition must be set (statusCodeFilter, durationFilter, headerFilter, ...)")
    name = present[0]
    where = f"{path}.{_CONDITIONS[name]}"
    if value.status_code_filter is not None:
        return ir_listener.LogFilter("status", op=value.status_code_filter.op, value=value.status_code_filter.value)
    if value.duration_filter is not None:
        return ir_listener.LogFilter("duration", op=value.duration_filter.op, value=value.duration_filter.value)
    if value.not_health_check_filter is not None:
        if not value.not_health_check_filter:
            raise Invalid(where, "set it to true or leave it out")
        return ir_listener.LogFilter("not_health_check")
    if value.traceable_filter is not None:
        if not value.traceable_filter:
            raise Invalid(where, "set it to true or leave it out")
        return ir_listener.LogFilter("traceable")
    if value.header_filter is not None:
        h = value.header_filter.header
        if h.type == "RegularExpression":
            envoy_check(envoy_limits.regex, h.value, f"{where}.header.value")
        return ir_listener.LogFilter("header", header=(header_name(h.name, f"{where}.header.name", pseudo=True),
                                                       h.type, h.value))
    if value.response_flag_filter is not None:
        unknown = [f for f in value.response_flag_filter.flags if f not in RESPONSE_FLAGS]
        if unknown:
            raise Invalid(f"{where}.flags", f"unknown response flags {', '.join(unknown)}; Envoy's are "
                                            f"{', '.join(sorted(RESPONSE_FLAGS))}")
        return ir_listener.LogFilter("response_flags", values=tuple(value.response_flag_filter.flags))
    if value.grpc_status_filter is not None:
        g = value.grpc_status_filter
        return ir_listener.LogFilter("grpc_status", values=tuple(g.statuses), exclude=bool(g.exclude))
    if value.cel_filter is not None:
        return ir_listener.LogFilter("cel", text=value.cel_filter.match)
    runtime = value.runtime_filter
    assert runtime is not None
    pct = runtime.percent_sampled
    return ir_listener.LogFilter("runtime", text=runtime.runtime_key,
                                 numerator=pct.numerator if pct else None,
                                 denominator=(pct.denominator or "HUNDRED") if pct else "HUNDRED",
                                 independent=bool(runtime.use_independent_randomness))
