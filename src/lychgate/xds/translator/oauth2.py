"""oauth2 → one Envoy oauth2 filter per OAuth2 GatewayExtension, enabled per route.

The filter's client secret and cookie-signing key reach Envoy as SDS secrets
(`oauth2/<namespace>/<name>/client-secret`, `.../hmac`) over the same ADS
stream, never inline in the listener. Like ext_authz, every usable extension
has its filter in the listener, off by default, so attaching a policy only
changes routes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from envoy.config.core.v3 import base_pb2, config_source_pb2, http_uri_pb2
from envoy.config.route.v3 import route_components_pb2 as route_pb
from envoy.extensions.filters.http.jwt_authn.v3 import config_pb2 as jwt_pb
from envoy.extensions.filters.http.oauth2.v3 import oauth_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb,
)
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from envoy.type.matcher.v3 import path_pb2, regex_pb2, string_pb2

from lychgate import ir
from lychgate.xds import types
from lychgate.xds.translator.features import Feature, register
from lychgate.xds.translator.jwt_authn import JWKS_FETCH_TIMEOUT_MS
from lychgate.xds.translator.policy_filters import (
    add_disabled_filter,
    enable_on_route,
    extension_services,
    ms,
)

PREFIX = "envoy.filters.http.oauth2/"
JWT_REQUIREMENT = "oauth2"
TOKEN_TIMEOUT_MS = 5000
_SAME_SITE = {"Lax": oauth_pb2.CookieConfig.LAX, "Strict": oauth_pb2.CookieConfig.STRICT,
              "None": oauth_pb2.CookieConfig.NONE}


def filter_name(service: ir.OAuth2Service) -> str:
    return PREFIX + service.name


def secret_names(service: ir.OAuth2Service) -> tuple[str, str]:
    return f"oauth2/{service.name}/client-secret", f"oauth2/{service.name}/hmac"


def _sds(name: str) -> secret_pb2.SdsSecretConfig:
    return secret_pb2.SdsSecretConfig(name=name, sds_config=config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(), resource_api_version=config_source_pb2.V3))


def _exact_path(path: str) -> path_pb2.PathMatcher:
    return path_pb2.PathMatcher(path=string_pb2.StringMatcher(exact=path))


def _header(name: str, kind: str, value: str) -> route_pb.HeaderMatcher:
    if kind == "RegularExpression":
        match = string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=value))
    else:
        match = string_pb2.StringMatcher(exact=value)
    return route_pb.HeaderMatcher(name=name, string_match=match)


def oauth2(s: ir.OAuth2Service) -> oauth_pb2.OAuth2:
    token_secret, hmac_secret = secret_names(s)
    names = oauth_pb2.OAuth2Credentials.CookieNames(bearer_token=s.access_token_cookie or "",
                                                     id_token=s.id_token_cookie or "")
    same_site = oauth_pb2.CookieConfig(same_site=_SAME_SITE[s.same_site])
    config = oauth_pb2.OAuth2Config(
        token_endpoint=http_uri_pb2.HttpUri(uri=s.token_endpoint, cluster=s.cluster, timeout=ms(TOKEN_TIMEOUT_MS)),
        authorization_endpoint=s.authorization_endpoint,
        credentials=oauth_pb2.OAuth2Credentials(client_id=s.client_id, token_secret=_sds(token_secret),
                                                hmac_secret=_sds(hmac_secret), cookie_names=names,
                                                cookie_domain=s.cookie_domain or ""),
        redirect_uri=s.redirect_uri, redirect_path_matcher=_exact_path(s.redirect_path),
        signout_path=_exact_path(s.logout_path), forward_bearer_token=s.forward_access_token,
        auth_scopes=list(s.scopes),
        deny_redirect_matcher=[_header(*h) for h in s.deny_redirect_headers],
        disable_access_token_set_cookie=s.disable_access_token_cookie,
        disable_id_token_set_cookie=s.disable_id_token_cookie,
        disable_refresh_token_set_cookie=s.disable_refresh_token_cookie,
        cookie_configs=oauth_pb2.CookieConfigs(**{f: same_site for f in (
            "bearer_token_cookie_config", "oauth_hmac_cookie_config", "oauth_expires_cookie_config",
            "id_token_cookie_config", "refresh_token_cookie_config", "oauth_nonce_cookie_config",
            "code_verifier_cookie_config")}),
        stat_prefix=s.name.replace("/", "_"),
    )
    if s.end_session_endpoint:
        config.end_session_endpoint = s.end_session_endpoint
    return oauth_pb2.OAuth2(config=config)


def jwt_filter_name(service: ir.OAuth2Service) -> str:
    return f"{PREFIX}jwt/{service.name}"


def oauth2_jwt(jwt: ir.OAuth2Jwt) -> jwt_pb.JwtAuthentication:
    """`jwt`: both tokens (when configured) must verify, read from the filter's cookies;
    their payloads land in jwt_authn metadata as `accessToken` and `idToken`."""
    out = jwt_pb.JwtAuthentication()
    names = []
    for token, name, metadata in ((jwt.access_token, "oauth2/accessToken", "accessToken"),
                                  (jwt.id_token, "oauth2/idToken", "idToken")):
        if token is None:
            continue
        p = out.providers[name]
        p.from_cookies.append(token.cookie)
        p.payload_in_metadata = metadata
        p.audiences.extend(token.audiences)
        p.claim_to_headers.extend(jwt_pb.JwtClaimToHeader(claim_name=c, header_name=h)
                                  for c, h in token.claims_to_headers)
        p.clear_route_cache = bool(token.claims_to_headers)
        p.remote_jwks.http_uri.CopyFrom(http_uri_pb2.HttpUri(uri=jwt.jwks_uri, cluster=jwt.jwks_cluster,
                                                             timeout=ms(JWKS_FETCH_TIMEOUT_MS)))
        names.append(name)
    out.requirement_map[JWT_REQUIREMENT].requires_all.requirements.extend(
        jwt_pb.JwtRequirement(provider_name=n) for n in names)
    return out


def _generic(name: str, value: str) -> secret_pb2.Secret:
    return secret_pb2.Secret(name=name, generic_secret=secret_pb2.GenericSecret(
        secret=base_pb2.DataSource(inline_string=value)))


class OAuth2(Feature):
    name = "oauth2"
    order = 31  # before jwt_authn and rbac: those read the tokens it sets

    def patch_hcm(self, listener: ir.HTTPListener, hcm: hcm_pb.HttpConnectionManager) -> None:
        services = extension_services(listener, ir.OAuth2Service, "oauth2")
        for name in sorted(services):
            service = services[name]
            add_disabled_filter(hcm, filter_name(service), oauth2(service))
            if service.jwt is not None:  # right after the login that sets the cookies it reads
                add_disabled_filter(hcm, jwt_filter_name(service), oauth2_jwt(service.jwt))

    def patch_route(self, route: ir.Route, out: route_pb.Route) -> None:
        login = route.policy.oauth2 if route.policy is not None else None
        if login is not None:
            enable_on_route(out, filter_name(login.service), None)
            if login.service.jwt is not None:
                enable_on_route(out, jwt_filter_name(login.service),
                                jwt_pb.PerRouteConfig(requirement_name=JWT_REQUIREMENT))

    def resources(self, gateway: ir.GatewayIR) -> Iterable[tuple[str, str, Any]]:
        seen: dict[str, ir.OAuth2Service] = {}
        for listener in gateway.listeners:
            seen.update(extension_services(listener, ir.OAuth2Service, "oauth2"))
        for name in sorted(seen):
            token_secret, hmac_secret = secret_names(seen[name])
            yield types.SECRET, token_secret, _generic(token_secret, seen[name].client_secret)
            yield types.SECRET, hmac_secret, _generic(hmac_secret, seen[name].hmac_secret)


register(OAuth2())
