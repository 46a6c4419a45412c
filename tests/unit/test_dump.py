"""xds/dump.py: the JSON of /snapshots/xds and `lychgate translate` shows the compressor's
content types, a field newer than the protos lychgate builds with."""

from __future__ import annotations

from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate.xds import types
from lychgate.xds.dump import as_dict
from lychgate.xds.translator import compression
from lychgate.xds.translator.policy_filters import pack


def _listener() -> listener_pb2.Listener:
    hcm = hcm_pb.HttpConnectionManager(stat_prefix="http-80", http_filters=[hcm_pb.HttpFilter(
        name=compression.COMPRESSOR, typed_config=pack(compression.compressor(("Gzip", None, ("text/css",)))))])
    out = listener_pb2.Listener(name="http-80")
    out.filter_chains.add().filters.add(name="envoy.filters.network.http_connection_manager", typed_config=pack(hcm))
    return out


def test_the_compressors_content_types_are_shown_in_both_namings() -> None:
    listener = _listener()
    snake = as_dict(types.LISTENER, listener, proto_names=True)
    [http] = snake["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"]
    assert http["typed_config"]["response_direction_config"]["common_config"]["content_type_matcher"] == [
        {"exact": "text/css"}]
    camel = as_dict(types.LISTENER, listener)
    [http] = camel["filterChains"][0]["filters"][0]["typedConfig"]["httpFilters"]
    assert http["typedConfig"]["responseDirectionConfig"]["commonConfig"]["contentTypeMatcher"] == [
        {"exact": "text/css"}]
