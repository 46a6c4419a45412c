"""basicAuth → Envoy's basic_auth filter, off by default; a route enables it with its users.

Authenticated requests reach the backend with `x-envoy-basic-auth-user` (as in
kgateway) and without the credentials' password check ever leaving the proxy.
"""

from __future__ import annotations

import base64
import hashlib

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.basic_auth.v3 import basic_auth_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.policy_filters import add_disabled_filter, enable_on_route

FILTER = "envoy.filters.http.basic_auth"
USER_HEADER = "x-envoy-basic-auth-user"
# `users` is required in the listener's copy, which no route uses (each brings its
# own): one user whose password hash matches nothing anyone can type.
_NOBODY = "lychgate-nobody:{SHA}" + base64.b64encode(hashlib.sha1(b"\x00" * 64).digest()).decode()


class BasicAuth(Feature):
    name = "basic_auth"
    order = 33

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if listener.policy_filters:
            add_disabled_filter(hcm, FILTER, basic_auth_pb2.BasicAuth(
                users=base_pb2.DataSource(inline_string=_NOBODY), forward_username_header=USER_HEADER))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        auth = route.policy.basic_auth if route.policy is not None else None
        if auth is not None:
            enable_on_route(out, FILTER, basic_auth_pb2.BasicAuthPerRoute(
                users=base_pb2.DataSource(inline_string=auth.htpasswd)))


register(BasicAuth())
