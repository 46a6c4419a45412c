"""Route rules' sessionPersistence -> Envoy's stateful session filter.

The filter sits, doing nothing, in the chain of a listener whose routes keep
sessions; each such route carries its own cookie or header state. The cookie's
Path is the route's path, so a browser sends it only where the session applies.
"""

from __future__ import annotations

from envoy.config.core.v3 import extension_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2 as ss_pb
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.extensions.http.stateful_session.cookie.v3 import cookie_pb2
from envoy.extensions.http.stateful_session.header.v3 import header_pb2
from envoy.type.http.v3 import cookie_pb2 as http_cookie_pb2
from google.protobuf import duration_pb2

from lychgate import ir
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.host_flags import any_host
from lychgate.xds.translator.policy_filters import pack

FILTER = "envoy.filters.http.stateful_session"


def _session(route: ir.Route) -> ir.SessionPersistence | None:
    return route.action.session if isinstance(route.action, ir.Forward) else None


def _keeps_sessions_here(vh: ir.VirtualHost) -> bool:
    return any(_session(r) is not None for r in vh.routes)


def _cookie_path(match: ir.Match) -> str:
    return match.path if match.path_type in ("PathPrefix", "Exact") else "/"  # a regex names no single path


def session_state(session: ir.SessionPersistence, match: ir.Match) -> extension_pb2.TypedExtensionConfig:
    if session.kind == "Header":
        return extension_pb2.TypedExtensionConfig(
            name="envoy.http.stateful_session.header",
            typed_config=pack(header_pb2.HeaderBasedSessionState(name=session.name)))
    cookie = http_cookie_pb2.Cookie(name=session.name, path=_cookie_path(match))
    if session.ttl_s:
        cookie.ttl.CopyFrom(duration_pb2.Duration(seconds=session.ttl_s))
    return extension_pb2.TypedExtensionConfig(
        name="envoy.http.stateful_session.cookie",
        typed_config=pack(cookie_pb2.CookieBasedSessionState(cookie=cookie)))


class StatefulSession(Feature):
    name = "stateful_session"
    order = 90  # late: it only steers the router's choice of upstream host

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        if any_host(listener, _keeps_sessions_here):
            # No session state: routes without sessionPersistence are untouched.
            hcm.http_filters.append(hcm_pb.HttpFilter(name=FILTER, typed_config=pack(ss_pb.StatefulSession())))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        session = _session(route)
        if session is not None:
            per_route = ss_pb.StatefulSessionPerRoute(
                stateful_session=ss_pb.StatefulSession(session_state=session_state(session, route.match)))
            out.typed_per_filter_config[FILTER].CopyFrom(pack(per_route))


register(StatefulSession())
