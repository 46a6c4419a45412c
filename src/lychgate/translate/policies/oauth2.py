"""oauth2: log users in with an OAuth2 / OpenID Connect provider (Envoy oauth2).

A GatewayExtension of type OAuth2 (kgateway's OAuth2Provider) names the
provider's endpoints, the client (`credentials.clientID`, and a Secret in the
extension's namespace whose `client-secret` is the client secret) and the
cookies; a TrafficPolicy's `oauth2.extensionRef` turns the login on for its
routes. Unauthenticated browsers are redirected to the authorization endpoint;
the provider redirects back to the redirect URI with a code, which Envoy
exchanges at the token endpoint (reached through `backendRef`) for tokens it
keeps in signed cookies. The logout path clears them (and goes on to the
provider's end-session endpoint when one is set).

With `issuerURI`, endpoints not set explicitly come from the provider's
discovery document (oidc_discovery); until it is known the routes fail
closed. `jwt` verifies the retrieved access and ID tokens on every request
(xds/translator/oauth2.py): a request whose token cookie is missing or does not
verify is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from lychgate import ir
from lychgate.api.auth import OAuth2CookieNames, OAuth2JWTProcessingConfig
from lychgate.api.policy import GatewayExtension
from lychgate.store import Store
from lychgate.translate.policies import extension_backend, oidc_discovery
from lychgate.translate.policies.ext_auth import normalize_ref
from lychgate.translate.policies.extensions import (
    SERVICES,
    VALIDATORS,
    check_backend,
    cluster_name,
    lookup,
    use_service,
)
from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.policies.secret_refs import entries, secret
from lychgate.translate.values import CompileContext, Invalid, Unresolved, header_name

OAUTH2 = "OAuth2"
SECRET_KEY = "client-secret"
DEFAULT_REDIRECT = "%REQ(x-forwarded-proto)%://%REQ(:authority)%/oauth2/redirect"


def _url(value: str, path: str) -> str:
    """An https URL, as kgateway's CRD demands (HttpsUri): the client secret, the codes and the
    tokens never cross a network in the clear. http:// only to a loopback address, which no
    packet leaves (lychgate run's local identity provider, examples/oauth2)."""
    url = urlsplit(value)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise Invalid(path, f"{value!r} is not an https URL with a host")
    if url.scheme == "http" and not _loopback(url.hostname):
        raise Invalid(path, f"{value!r} must be an https URL (http:// is allowed only to a loopback address)")
    return value


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def validate(ext: GatewayExtension) -> None:
    spec = ext.spec.oauth2
    assert spec is not None
    if spec.issuer_uri is None and (spec.authorization_endpoint is None or spec.token_endpoint is None):
        raise Invalid("spec.oauth2", "either issuerURI, or both authorizationEndpoint and tokenEndpoint must be set")
    for value, label in ((spec.issuer_uri, "issuerURI"), (spec.authorization_endpoint, "authorizationEndpoint"),
                         (spec.token_endpoint, "tokenEndpoint"), (spec.end_session_endpoint, "endSessionEndpoint")):
        if value is not None:
            _url(value, f"spec.oauth2.{label}")
    jwt = spec.jwt
    if jwt is not None and (jwt.access_token is not None or jwt.id_token is not None):
        if spec.issuer_uri is None and jwt.jwks_uri is None:
            raise Invalid("spec.oauth2.jwt.jwksURI", "either issuerURI or jwksURI must be set to verify tokens")
        if jwt.jwks_uri is not None:
            _url(jwt.jwks_uri, "spec.oauth2.jwt.jwksURI")
        if jwt.jwks_backend is not None and jwt.jwks_backend_ref is not None:
            raise Invalid("spec.oauth2.jwt", "set jwksBackend or (its older name) jwksBackendRef, not both")
        if jwt.jwks_backend is not None:
            check_backend(jwt.jwks_backend.backend_ref, "spec.oauth2.jwt.jwksBackend.backendRef")
        if jwt.jwks_backend_ref is not None:
            check_backend(jwt.jwks_backend_ref, "spec.oauth2.jwt.jwksBackendRef")
        cookies = spec.cookies
        for token, label, off in ((jwt.access_token, "accessToken", cookies and cookies.disable_access_token_set_cookie),
                                  (jwt.id_token, "idToken", cookies and cookies.disable_id_token_set_cookie)):
            if token is not None and off:
                raise Invalid(f"spec.oauth2.jwt.{label}", "the token's cookie must not be disabled when it is verified")
            for j, claim in enumerate(token.claims_to_headers if token else []):
                header_name(claim.header, f"spec.oauth2.jwt.{label}.claimsToHeaders[{j}].header")
    check_backend(spec.backend_ref, "spec.oauth2.backendRef")
    if spec.redirect_uri is not None and redirect_path(spec.redirect_uri) == "/":
        raise Invalid("spec.oauth2.redirectURI", f"{spec.redirect_uri!r} needs a path, like https://host/oauth2/redirect")
    if not spec.logout_path.startswith("/"):
        raise Invalid("spec.oauth2.logoutPath", f"{spec.logout_path!r} must start with '/'")


def oauth2_service(store: Store, namespace: str, name: str) -> tuple[ir.ExtensionService, list[ir.Cluster]]:
    ext = lookup(store, namespace, name, OAUTH2)
    spec = ext.spec.oauth2
    assert spec is not None
    where = f"GatewayExtension {namespace}/{name} spec.oauth2"
    authorize, token, end_session = spec.authorization_endpoint, spec.token_endpoint, spec.end_session_endpoint

    res = extension_backend.resolve(store, "GatewayExtension", namespace, spec.backend_ref,
                                    "an OAuth2 provider's backend (its token endpoint)")

    def doc_of() -> dict[str, Any]:
        assert spec is not None and spec.issuer_uri is not None
        # Discovery trusts what the proxy trusts on its way to the provider (a BackendTLSPolicy's CA).
        return oidc_discovery.lookup(store, spec.issuer_uri, ext.key, res.cluster.tls if res.cluster else None)

    if authorize is None or token is None:
        assert spec.issuer_uri is not None
        doc = doc_of()
        authorize = authorize or _discovered(doc, "authorization_endpoint", spec.issuer_uri)
        token = token or _discovered(doc, "token_endpoint", spec.issuer_uri)
        end_session = end_session or doc.get("end_session_endpoint")
    ref = spec.credentials.client_secret_ref
    found = secret(store, namespace, namespace, ref.name, f"{where}.credentials.clientSecretRef")
    client_secret = entries(found).get(SECRET_KEY)
    if not client_secret:
        raise Unresolved("InvalidSecret", f"{where}.credentials.clientSecretRef: Secret {namespace}/{ref.name} "
                                          f"has no key {SECRET_KEY}")
    if res.cluster is None:
        raise Unresolved(res.reason, f"{where}.backendRef: {res.message}")
    token_url = urlsplit(token)
    tls = res.cluster.tls
    if token_url.scheme == "https" and tls is None:
        host = token_url.hostname or ""
        tls = ir.UpstreamTLS(sni=host, ca=None, sans=(("Hostname", host),))  # the system's CAs
    cluster = ir.Cluster(name=cluster_name(ext), endpoints=res.cluster.endpoints, tls=tls)
    cookies = spec.cookies
    names = cookies.names if cookies else None
    jwt, jwt_clusters = _jwt(store, ext, cluster, doc_of, names)
    redirect = spec.redirect_uri or DEFAULT_REDIRECT
    # A stable per-extension key: cookies stay valid across passes and replicas,
    # and change when the client secret does.
    hmac_key = hmac.new(client_secret.encode(), f"lychgate-oauth2/{namespace}/{name}".encode(), hashlib.sha256)
    return ir.OAuth2Service(
        name=f"{namespace}/{name}", cluster=cluster.name, token_endpoint=token,
        authorization_endpoint=authorize, client_id=spec.credentials.client_id,
        client_secret=client_secret, hmac_secret=hmac_key.hexdigest(),
        redirect_uri=redirect, redirect_path=redirect_path(redirect),
        logout_path=spec.logout_path, end_session_endpoint=end_session,
        scopes=tuple(spec.scopes) or ("user",), forward_access_token=bool(spec.forward_access_token),
        cookie_domain=cookies.domain if cookies else None,
        access_token_cookie=names.access_token if names else None, id_token_cookie=names.id_token if names else None,
        same_site=(cookies.same_site if cookies and cookies.same_site else "Lax"),
        disable_access_token_cookie=bool(cookies and cookies.disable_access_token_set_cookie),
        disable_id_token_cookie=bool(cookies and cookies.disable_id_token_set_cookie),
        disable_refresh_token_cookie=bool(cookies and cookies.disable_refresh_token_set_cookie),
        deny_redirect_headers=tuple((h.name, h.type, h.value) for h in (spec.deny_redirect.headers
                                                                          if spec.deny_redirect else [])),
        jwt=jwt,
    ), [cluster, *jwt_clusters]


def _jwt(store: Store, ext: GatewayExtension, cluster: ir.Cluster, doc_of: Callable[[], dict[str, Any]],
         names: OAuth2CookieNames | None) -> tuple[ir.OAuth2Jwt | None, list[ir.Cluster]]:
    """`jwt`: a jwt_authn filter right after the oauth2 one checks the tokens in its cookies,
    keys from jwksURI (or the issuer's discovery document) through jwksBackendRef or backendRef."""
    spec = ext.spec.oauth2
    assert spec is not None
    jwt = spec.jwt
    if jwt is None or (jwt.access_token is None and jwt.id_token is None):
        return None, []
    uri = jwt.jwks_uri or _discovered(doc_of(), "jwks_uri", spec.issuer_uri or "")
    clusters = []
    keys_backend = jwt.keys_backend()
    if keys_backend is not None:
        res = extension_backend.resolve(store, "GatewayExtension", ext.namespace, keys_backend, "a JWKS server")
        if res.cluster is None:
            field = "jwksBackend.backendRef" if jwt.jwks_backend is not None else "jwksBackendRef"
            raise Unresolved(res.reason, f"GatewayExtension {ext.namespace}/{ext.name} spec.oauth2.jwt.{field}: "
                                         f"{res.message}")
        host = urlsplit(uri).hostname or ""
        tls = res.cluster.tls or (ir.UpstreamTLS(sni=host, ca=None, sans=(("Hostname", host),))
                                  if uri.startswith("https:") else None)
        cluster = ir.Cluster(name=f"{cluster_name(ext)}/jwks", endpoints=res.cluster.endpoints, tls=tls)
        clusters.append(cluster)

    def token(cfg: OAuth2JWTProcessingConfig | None, cookie: str) -> ir.OAuth2Token | None:
        return None if cfg is None else ir.OAuth2Token(
            cookie, tuple(cfg.audiences), tuple((c.name, c.header) for c in cfg.claims_to_headers))

    # Envoy's cookie names unless the extension renames them.
    return ir.OAuth2Jwt(uri, cluster.name,
                        token(jwt.access_token, (names.access_token if names else None) or "BearerToken"),
                        token(jwt.id_token, (names.id_token if names else None) or "IdToken")), clusters


def _discovered(doc: dict[str, Any], key: str, issuer: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise Unresolved("DiscoveryFailed", f"the discovery document of issuer {issuer} has no {key}")
    try:
        _url(value, key)
    except Invalid as err:  # fails closed, as for an endpoint written in the spec
        raise Unresolved("DiscoveryFailed", f"the discovery document of issuer {issuer}: {err}") from None
    return value


def redirect_path(uri: str) -> str:
    """The path part of a redirect URI whose scheme and host may be Envoy format
    commands (`%REQ(:authority)%`), which no URL parser takes for a host."""
    rest = uri.split("://", 1)[-1]
    path = "/" + rest.split("/", 1)[1] if "/" in rest else "/"
    return path.split("?", 1)[0]


class OAuth2Field(PolicyField):
    name, attr, security = "oauth2", "oauth2", True

    def normalize(self, policy: Any, value: dict[str, Any]) -> dict[str, Any]:
        return normalize_ref(policy, value)

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        ref = value.get("extensionRef")
        if ref is None:
            raise Invalid(path, "extensionRef must be set")
        service = use_service(ctx, OAUTH2, ref)
        assert isinstance(service, ir.OAuth2Service)
        return {"oauth2": ir.OAuth2Route(service)}


VALIDATORS[OAUTH2] = validate
SERVICES[OAUTH2] = oauth2_service
register(OAuth2Field())
