"""Delta requests as the ADS server reads them: Envoy's DeltaDiscoveryRequest with its
`initial_resource_versions` left as the map's raw entries.

A proxy that reconnects names every resource it holds with its version: 3,000 endpoints
are a 130 KiB map, and after a control-plane restart every proxy sends its maps at once.
Read as a map, upb hashes each entry into a table and `dict()` then makes two Python
strings of each: 0.6 ms a type a proxy, about half the controller's CPU in a reconnect
storm of 1,000 proxies. Yet versions are content hashes (xds/cache.py), so after a restart
a proxy mostly holds exactly what the snapshot has.

On the wire a map is a repeated field of (key = 1, value = 2) entry messages. Read as
`repeated bytes` instead, the same field gives each entry's encoding, and comparing that
set with the snapshot's entries, encoded once per Gateway (delta._encoded), answers "it
holds exactly the snapshot" in about 0.2 ms. Only when it does not are the entries decoded
(`versions`). Every other field keeps its name and type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

VERSIONS_FIELD = 5  # DeltaDiscoveryRequest.initial_resource_versions


def _lean_class() -> Any:
    """DeltaDiscoveryRequest, field 5 renamed `initial_entries` and read as repeated bytes."""
    source = descriptor_pb2.DescriptorProto()
    discovery_pb2.DeltaDiscoveryRequest.DESCRIPTOR.CopyToProto(source)
    lean = descriptor_pb2.FileDescriptorProto(
        name="lychgate/xds/delta_request.proto", package="lychgate.xds", syntax="proto3",
        dependency=[discovery_pb2.DESCRIPTOR.name, "envoy/config/core/v3/base.proto", "google/rpc/status.proto"])
    message = lean.message_type.add(name="DeltaDiscoveryRequest")
    for field in source.field:
        copy = message.field.add()
        copy.CopyFrom(field)
        copy.ClearField("options")  # validation annotations: not ours to load
        if field.number == VERSIONS_FIELD:
            copy.name, copy.json_name = "initial_entries", "initialEntries"
            copy.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
            copy.ClearField("type_name")
    pool = descriptor_pool.Default()
    pool.Add(lean)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("lychgate.xds.DeltaDiscoveryRequest"))


DeltaRequest = _lean_class()


NODE_TAG = 0x0A  # field 1 (node), length-delimited


def after_node(raw: bytes) -> int:
    """Where a request's bytes go on after its node, when the node is the first field (protobuf
    libraries write fields in number order), else 0: a field's boundary either way. What follows
    is the same for every proxy of a Gateway that holds the same, whatever its node's id."""
    if not raw or raw[0] != NODE_TAG:
        return 0
    size, shift, at = 0, 0, 1
    while at < len(raw) and shift < 64:
        byte = raw[at]
        size |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return min(at + size, len(raw))
        shift += 7
    return 0


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def entry(name: str, version: str) -> bytes:
    """One map entry as Envoy (C++ protobuf) and gRPC's other clients write it: key, then value."""
    key, value = name.encode(), version.encode()
    return b"\n" + _varint(len(key)) + key + b"\x12" + _varint(len(value)) + value


def versions(entries: Sequence[bytes]) -> dict[str, str]:
    """The entries as the map they are (duplicates and field order as protobuf reads them)."""
    wire = DeltaRequest(initial_entries=entries).SerializeToString()
    return dict(discovery_pb2.DeltaDiscoveryRequest.FromString(wire).initial_resource_versions)
