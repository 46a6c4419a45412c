"""xDS resources as JSON, for people: the admin server's /snapshots/xds and `lychgate translate`.

The protobuf JSON printer writes what the protos lychgate builds with know. One field
lychgate sends is newer than them: the compressor's `content_type_matcher`, which
xds/translator/compression.py writes as raw wire bytes (Envoy 1.40 deprecates the old
`content_type`). The printer drops it as unknown; `as_dict` puts it back, so what a
dump shows is what the proxy gets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.http.compressor.v3 import compressor_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from google.protobuf import json_format

from lychgate.xds import types
from lychgate.xds.translator import compression

_HCM = hcm_pb.HttpConnectionManager.DESCRIPTOR.full_name
_COMPRESSOR = compressor_pb2.Compressor.DESCRIPTOR.full_name


def as_dict(type_url: str, message: Any, proto_names: bool = False) -> dict[str, Any]:
    """One resource as JSON: proto field names (as Envoy's /config_dump writes them) or
    JSON names (camelCase, as protobuf's own printer)."""
    body: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=proto_names)
    if type_url == types.LISTENER:
        key = _proto_name if proto_names else _json_name
        for http, shown in _http_filters(message, body, key):
            if http.typed_config.TypeName() == _COMPRESSOR:
                matchers = compression.content_type_matchers(
                    compressor_pb2.Compressor.FromString(http.typed_config.value))
                if matchers:
                    common = shown[key("typed_config")].setdefault(key("response_direction_config"), {})
                    common.setdefault(key("common_config"), {})[key("content_type_matcher")] = matchers
    return body


def _proto_name(name: str) -> str:
    return name


def _json_name(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _http_filters(listener: listener_pb2.Listener, body: dict[str, Any],
                  key: Callable[[str], str]) -> Iterator[tuple[hcm_pb.HttpFilter, dict[str, Any]]]:
    """Each HTTP filter of the listener's connection managers, with its part of `body`."""
    for chain, chain_body in zip(listener.filter_chains, body.get(key("filter_chains"), []), strict=True):
        for network, network_body in zip(chain.filters, chain_body.get("filters", []), strict=True):
            if network.typed_config.TypeName() != _HCM:
                continue
            hcm = hcm_pb.HttpConnectionManager.FromString(network.typed_config.value)
            yield from zip(hcm.http_filters, network_body[key("typed_config")].get(key("http_filters"), []),
                           strict=True)
