"""ListenerPolicy `localReplies` → the connection manager's local_reply_config.

Envoy checks the mappers in order for each reply it makes itself and applies
the first whose filter matches (its status, body, format and headers); the
body format of that mapper, else the default one, formats the body.
"""

from __future__ import annotations

import json

from envoy.config.core.v3 import base_pb2
from envoy.config.core.v3 import substitution_format_string_pb2 as fmt_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir, ir_listener
from lychgate.xds.translator.access_log import log_filter
from lychgate.xds.translator.features import Feature, register

_OPTION = base_pb2.HeaderValueOption


def _format(f: ir_listener.ReplyFormat) -> fmt_pb.SubstitutionFormatString:
    out = fmt_pb.SubstitutionFormatString()
    if f.json is not None:
        out.json_format.update(json.loads(f.json))
    else:
        out.text_format_source.inline_string = f.text or ""
    if f.content_type:
        out.content_type = f.content_type
    return out


def _mapper(m: ir_listener.ReplyMapper) -> hcm_pb.ResponseMapper:
    out = hcm_pb.ResponseMapper(filter=log_filter(m.filter))
    if m.status_code is not None:
        out.status_code.value = m.status_code
    if m.body is not None:
        out.body.inline_string = m.body
    if m.body_format is not None:
        out.body_format_override.CopyFrom(_format(m.body_format))
    # As kgateway writes them: the adds, then the sets (a set of the same name wins).
    for headers, action in ((m.add_headers, _OPTION.APPEND_IF_EXISTS_OR_ADD),
                            (m.set_headers, _OPTION.OVERWRITE_IF_EXISTS_OR_ADD)):
        out.headers_to_add.extend(_OPTION(header=base_pb2.HeaderValue(key=k, value=v), append_action=action)
                                  for k, v in headers)
    return out


class LocalReplyFeature(Feature):
    name = "local_reply"

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        replies = listener.settings.local_replies if listener.settings is not None else None
        if replies is None:
            return
        config = hcm.local_reply_config
        config.mappers.extend(_mapper(m) for m in replies.mappers)
        if replies.body_format is not None:
            config.body_format.CopyFrom(_format(replies.body_format))


register(LocalReplyFeature())
