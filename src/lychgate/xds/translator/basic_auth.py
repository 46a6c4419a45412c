"""basicAuth → Envoy's basic_auth filter, off by default; a route enables it with its users.

Authenticated requests reach the backend with `x-envoy-basic-auth-user` (as in
kgateway) and without the credentials' password check ever leaving the proxy.
"""

from __future__ import annotations

import base64
import hashlib

from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.basic_auth.v3 import basic_auth_pb2

from lychgate import ir
from lychgate.xds.translator.features import register
from lychgate.xds.translator.policy_filters import PolicyFilter

FILTER = "envoy.filters.http.basic_auth"
USER_HEADER = "x-envoy-basic-auth-user"
# `users` is required in the listener's copy, which no route uses (each brings its
# own): one user whose password hash matches nothing anyone can type.
_NOBODY = "lychgate-nobody:{SHA}" + base64.b64encode(hashlib.sha1(b"\x00" * 64).digest()).decode()


class BasicAuth(PolicyFilter):
    name, filter, field = "basic_auth", FILTER, "basic_auth"
    order = 33

    def listener_config(self) -> object:
        return basic_auth_pb2.BasicAuth(users=base_pb2.DataSource(inline_string=_NOBODY),
                                        forward_username_header=USER_HEADER)

    def route_config(self, value: ir.BasicAuth) -> object:
        return basic_auth_pb2.BasicAuthPerRoute(users=base_pb2.DataSource(inline_string=value.htpasswd))


register(BasicAuth())
