"""The scope key of a split route table from lychgate's Envoy module
(src/lychgate/native/lychgate_scope.c) instead of CEL (scoped.py says when).

Envoy's early header mutation `envoy.http.early_header_mutation.dynamic_modules`
hands the module a config string; the module reads `:authority` once and sets
the key header to `<table>/<hash>`, the hash scoped.bucket() computes (with
`native`: the module's mixed hash). The alphabet travels in that string, so
scoped.py stays its only definition.

The extension's message (DynamicModuleEarlyHeaderMutation) is newer than the
Python protos lychgate pins: it is declared here from Envoy's
api/envoy/extensions/http/early_header_mutation/dynamic_modules/v3/dynamic_modules.proto
(same package, names and field numbers), into the default pool, so config
dumps and JSON conversion know it too.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from envoy.config.core.v3 import extension_pb2
from envoy.extensions.dynamic_modules.v3 import dynamic_modules_pb2
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

from lychgate.native import SCOPE_MODULE

_PACKAGE = "envoy.extensions.http.early_header_mutation.dynamic_modules.v3"
_MESSAGE = "DynamicModuleEarlyHeaderMutation"


@functools.cache
def mutation_class() -> Any:
    """DynamicModuleEarlyHeaderMutation: Envoy's own Python module when the
    installed protos have it, else declared here."""
    try:
        module = importlib.import_module(f"{_PACKAGE}.dynamic_modules_pb2")
        return getattr(module, _MESSAGE)
    except (ImportError, AttributeError):
        pass
    pool = descriptor_pool.Default()
    try:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{_MESSAGE}"))
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto(
        name="lychgate/envoy_early_header_mutation_dynamic_modules.proto", package=_PACKAGE, syntax="proto3",
        dependency=[dynamic_modules_pb2.DESCRIPTOR.name, any_pb2.DESCRIPTOR.name])
    message = proto.message_type.add(name=_MESSAGE)
    field = descriptor_pb2.FieldDescriptorProto
    for number, name, kind, type_name in (
            (1, "dynamic_module_config", field.TYPE_MESSAGE, ".envoy.extensions.dynamic_modules.v3.DynamicModuleConfig"),
            (2, "early_header_mutation_name", field.TYPE_STRING, None),
            (3, "early_header_mutation_config", field.TYPE_MESSAGE, ".google.protobuf.Any")):
        message.field.add(name=name, number=number, type=kind, label=field.LABEL_OPTIONAL,
                          **({"type_name": type_name} if type_name else {}))
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{_MESSAGE}"))


def module_config(header: str, prefix: str, alphabet: str, bits: int) -> str:
    """The module's config: fields parted by a space (none of them holds one), the bits as "#<bits>"."""
    fields = (header, prefix, alphabet, f"#{bits}")
    assert all(f and " " not in f for f in fields), fields
    return " ".join(fields)


def scope_key_mutation(header: str, prefix: str, alphabet: str, bits: int) -> extension_pb2.TypedExtensionConfig:
    """Sets `header` to `prefix` and the low `bits` of the module's hash of the Host
    (lychgate_scope.c; scoped.bucket() with `native`)."""
    mutation = mutation_class()(early_header_mutation_name="scope")
    mutation.dynamic_module_config.name = SCOPE_MODULE
    config = wrappers_pb2.StringValue(value=module_config(header, prefix, alphabet, bits))
    mutation.early_header_mutation_config.Pack(config)
    out = extension_pb2.TypedExtensionConfig(name="lychgate.route_scope")
    out.typed_config.Pack(mutation)
    return out
