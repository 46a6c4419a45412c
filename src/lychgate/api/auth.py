"""Authentication and authorization fields of TrafficPolicy and GatewayExtension.

Shapes and names are kgateway's (api/v1alpha1/kgateway/jwt_types.go,
basic_auth_types.go, oauth2.go, shared/*): the TrafficPolicy side names a
GatewayExtension or turns the feature off; the GatewayExtension side says how
to authenticate. What a value means is checked by translation
(translate/policies/*), which reports problems on the status.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic.json_schema import JsonDict

from lychgate.api.base import Duration, Model, renamed
from lychgate.api.gateway import (
    BackendObjectReference,
    BackendRef,
    HeaderMatch,
    SecretObjectReference,
)
from lychgate.api.matchers import StringMatcher
from lychgate.api.rules import (
    CEL,
    DURATION_MATCH,
    at_least_one_of,
    at_most_one_of,
    exactly_one_of,
    field_rules,
)

JWT_CHECKS = "translate/policies/jwt_auth.py"


class NamespacedObjectReference(Model):
    name: str = Field(min_length=1)
    namespace: str | None = None


class LocalObjectReference(Model):
    name: str = Field(min_length=1)


class PolicyDisable(Model):
    """`disable: {}` turns a feature off where it would otherwise be inherited."""


# --- jwtAuth ---------------------------------------------------------------------------


class JWTAuth(Model):
    """TrafficPolicy `jwtAuth`: the JWT GatewayExtension whose providers check requests."""

    RULES = (exactly_one_of("extension_ref", "disable", checked_by=JWT_CHECKS),)

    extension_ref: NamespacedObjectReference | None = None
    disable: PolicyDisable | None = None


class HeaderSource(Model):
    header: str = Field(min_length=1, max_length=2048)
    prefix: str | None = Field(None, min_length=1, max_length=2048)


class JWTTokenSource(Model):
    RULES = (exactly_one_of("header", "query_parameter", checked_by=JWT_CHECKS),)

    header: HeaderSource | None = None
    query_parameter: str | None = None


class JWTClaimToHeader(Model):
    name: str = Field(min_length=1, max_length=2048)
    header: str = Field(min_length=1, max_length=2048)


class LocalJWKS(Model):
    # `key` is inline's older name (one of the two, see _older_name).
    RULES = (exactly_one_of(("inline", "key"), "config_map_ref", checked_by=JWT_CHECKS),)

    inline: str | None = Field(None, min_length=1, max_length=16384)
    key: str | None = Field(None, min_length=1, max_length=16384)  # kgateway's older name of inline
    config_map_ref: LocalObjectReference | None = None  # data key `jwks`

    @model_validator(mode="after")
    def _older_name(self) -> LocalJWKS:
        return renamed(self, "inline", "key")


def _at_least_1ms(message: str) -> JsonDict:
    """kgateway's rules of a JWKS fetch duration (jwt_types.go), its message word for word;
    translate/policies/jwt_auth.py refuses the same (each a duration of 1ms or more)."""
    return field_rules(CEL(DURATION_MATCH, "invalid duration value", JWT_CHECKS),
                       CEL("duration(self) >= duration('1ms')", message, JWT_CHECKS))


class JWKSAsyncFetch(Model):
    """Fetch the keys when the listener starts and on a timer, not when a request needs them."""

    fast_listener: bool | None = None
    failed_refetch_duration: str | None = Field(None, max_length=32, json_schema_extra=_at_least_1ms(
        "failedRefetchDuration must be at least 1ms."))


class JWKSRetryBackOff(Model):
    RULES = (CEL("!has(self.maxInterval) || duration(self.maxInterval) >= duration(self.baseInterval)",
                 "maxInterval must be greater than or equal to baseInterval", JWT_CHECKS),)

    base_interval: str = Field(max_length=32, json_schema_extra=_at_least_1ms("baseInterval must be at least 1ms."))
    max_interval: str | None = Field(None, max_length=32, json_schema_extra=_at_least_1ms(
        "maxInterval must be at least 1ms."))


class JWKSRetryPolicy(Model):
    num_retries: int | None = Field(None, ge=1)
    back_off: JWKSRetryBackOff | None = None


class RemoteJWKS(Model):
    url: str = Field(min_length=1, max_length=2048)
    backend_ref: BackendObjectReference
    cache_duration: str | None = Field(None, max_length=32, json_schema_extra=_at_least_1ms(
        "cacheDuration must be at least 1ms."))
    async_fetch: JWKSAsyncFetch | None = None
    retry_policy: JWKSRetryPolicy | None = None
    timeout: str | None = Field(None, json_schema_extra=_at_least_1ms("timeout must be at least 1ms"))


class JWKS(Model):
    RULES = (exactly_one_of("local", "remote", checked_by=JWT_CHECKS),)

    local: LocalJWKS | None = None
    remote: RemoteJWKS | None = None


class JWTProvider(Model):
    issuer: str = Field("", max_length=2048)
    # kgateway's MinItems 1: an empty list is refused, not read as "any audience" (leave it out for that).
    audiences: list[str] = Field(default_factory=list, min_length=1, max_length=32)
    token_source: JWTTokenSource | None = None
    claims_to_headers: list[JWTClaimToHeader] = Field(default_factory=list, min_length=1, max_length=32)
    jwks: JWKS
    forward_token: bool | None = None


class JWTCache(Model):
    """Keep verified tokens so a repeated token skips parsing and the signature check
    (Envoy `jwt_cache_config`); `{}` turns it on with Envoy's defaults (100 tokens a
    worker, tokens up to 4096 bytes). A cached token is still checked for expiry."""

    size: int | None = Field(None, ge=1, le=2**31 - 1)
    max_token_size: int | None = Field(None, ge=1, le=2**31 - 1)


class NamedJWTProvider(JWTProvider):
    name: str = Field(min_length=1, max_length=253)
    # Tolerance on `exp`/`nbf`: whole seconds, 1s to 87600h (checked by translation); Envoy's default 60s.
    clock_skew: Duration | None = None
    cache: JWTCache | None = None


class JWTProviders(Model):
    """GatewayExtension `jwt` (type JWT)."""

    # AllowMissingOrFailed (kgateway 2.5): a missing or failing token passes, without claims
    validation_mode: Literal["Strict", "AllowMissing", "AllowMissingOrFailed"] | None = None
    # Names are unique (kgateway: listType=map; translate/policies/jwt_auth.py says which is twice).
    providers: list[NamedJWTProvider] = Field(default_factory=list, max_length=32, json_schema_extra=field_rules(
        CEL("self.all(p, self.exists_one(q, q.name == p.name))", "provider names must be unique",
            JWT_CHECKS)))
    # kgateway's older name of providers
    jwt_providers: list[NamedJWTProvider] = Field(default_factory=list, max_length=32)

    @model_validator(mode="after")
    def _older_name(self) -> JWTProviders:
        return renamed(self, "providers", "jwt_providers")


# --- basicAuth -------------------------------------------------------------------------


class SecretReference(Model):
    name: str = Field(min_length=1)
    namespace: str | None = None
    key: str | None = Field(None, min_length=1)  # default .htpasswd


class BasicAuthPolicy(Model):
    """TrafficPolicy `basicAuth`: htpasswd SHA-1 users, inline or from a Secret."""

    users: list[str] = Field(default_factory=list, max_length=256)
    secret_ref: SecretReference | None = None
    disable: PolicyDisable | None = None


# --- apiKeyAuth ------------------------------------------------------------------------


class APIKeySource(Model):
    RULES = (at_least_one_of("header", "query", "cookie", checked_by="translate/policies/api_key_auth.py"),)

    header: str | None = Field(None, min_length=1, max_length=256)
    query: str | None = Field(None, min_length=1, max_length=256)
    cookie: str | None = Field(None, min_length=1, max_length=256)


class LabelSelector(Model):
    match_labels: dict[str, str]


class APIKeyAuth(Model):
    """TrafficPolicy `apiKeyAuth` (older name `apiKeyAuthentication`): keys from
    Secrets (each entry: client id -> key). `hideAPIKey` is the older, inverted
    spelling of `forwardCredential`."""

    RULES = (exactly_one_of("secret_ref", "secret_selector", "disable", checked_by="translate/policies/api_key_auth.py"),)

    key_sources: list[APIKeySource] = Field(default_factory=list, max_length=16)
    forward_credential: bool | None = None
    hide_api_key: bool | None = Field(None, alias="hideAPIKey")
    client_id_header: str | None = Field(None, min_length=1, max_length=256)
    secret_ref: SecretObjectReference | None = None
    secret_selector: LabelSelector | None = None
    disable: PolicyDisable | None = None

    @model_validator(mode="after")
    def _one_spelling(self) -> APIKeyAuth:
        if self.forward_credential is not None and self.hide_api_key is not None:
            raise ValueError("forwardCredential and hideAPIKey (its older, inverted name) cannot both be set; "
                             "use forwardCredential")
        return self


# --- rbac ------------------------------------------------------------------------------


class AuthorizationPolicy(Model):
    """Matches when any CEL expression is true, and (if set) the client is in allowedCIDRs."""

    RULES = (CEL("has(self.matchExpressions) || has(self.allowedCIDRs) || has(self.blockedCIDRs)",
                 "at least one of matchExpressions, allowedCIDRs, or blockedCIDRs must be specified",
                 "translate/policies/rbac.py"),)

    match_expressions: list[Annotated[str, Field(min_length=1, max_length=16384)]] = Field(
        default_factory=list, min_length=1, max_length=256)
    allowed_cidrs: list[str] = Field(default_factory=list, min_length=1, max_length=256, alias="allowedCIDRs")
    blocked_cidrs: list[str] = Field(default_factory=list, min_length=1, max_length=256, alias="blockedCIDRs")


class Authorization(Model):
    """TrafficPolicy `rbac` (kgateway shared.Authorization)."""

    policy: AuthorizationPolicy
    action: Literal["Allow", "Deny"] = "Allow"


# --- csrf ------------------------------------------------------------------------------


class CSRFPolicy(Model):
    """TrafficPolicy `csrf`: origin checks on state-changing requests (Envoy csrf)."""

    RULES = (at_most_one_of("percentage_enabled", "percentage_shadowed", checked_by="translate/policies/csrf.py"),)

    percentage_enabled: int | None = Field(None, ge=0, le=100)
    percentage_shadowed: int | None = Field(None, ge=0, le=100)
    additional_origins: list[StringMatcher] = Field(default_factory=list, max_length=16)


# --- acl -------------------------------------------------------------------------------


class ACLRule(Model):
    name: str | None = Field(None, max_length=256)
    cidrs: list[str] = Field(min_length=1, max_length=256)
    action: Literal["allow", "deny"]


class ACLResponseHeader(Model):
    name: str = Field(min_length=1, max_length=256)
    value: str = Field(max_length=4096)


class ACLDenyResponse(Model):
    """How a denied request is answered. The blocked-by header is named by
    `blockedByHeaderName` (kgateway's newest name) or `addBlockedByHeader` (older)."""

    status_code: int | None = Field(None, ge=100, le=599)
    headers: list[ACLResponseHeader] = Field(default_factory=list, max_length=16)
    blocked_by_header_name: str | None = Field(None, min_length=1, max_length=256)
    add_blocked_by_header: str | None = Field(None, min_length=1, max_length=256)

    RULES = (at_least_one_of("status_code", "headers", ("blocked_by_header_name", "add_blocked_by_header")),)

    @model_validator(mode="after")
    def _one_name(self) -> ACLDenyResponse:
        if self.blocked_by_header_name is not None and self.add_blocked_by_header is not None:
            raise ValueError("blockedByHeaderName and addBlockedByHeader (its older name) cannot both be set; "
                             "use blockedByHeaderName")
        return self


class ACLPolicy(Model):
    """TrafficPolicy `acl` (kgateway shared.ACLPolicy): client address rules, longest prefix wins."""

    default_action: Literal["allow", "deny"]
    rules: list[ACLRule] = Field(default_factory=list, max_length=256)
    deny_response: ACLDenyResponse | None = None


# --- oauth2 ----------------------------------------------------------------------------

# kgateway's HttpsUri and issuerURI patterns (oauth2.go): the CRD refuses http:// endpoints, which
# would carry the client secret, codes and tokens in the clear. translate/policies/oauth2.py
# refuses them too, but for a loopback host (lychgate run's local identity provider).
HTTPS_URI = (r"^https://([a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?"
             r"(:[0-9]{1,5})?(/[a-zA-Z0-9\-._~!$&'()*+,;=:@%]*)*/?(\?[a-zA-Z0-9\-._~!$&'()*+,;=:@%/?]*)?$")
ISSUER_URI = (r"^https://([a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?"
              r"(:[0-9]{1,5})?(/[a-zA-Z0-9\-._~!$&'()*+,;=:@%]*)*/?$")


def _https(pattern: str = HTTPS_URI) -> JsonDict:
    return field_rules(pattern=pattern)


class OAuth2Policy(Model):
    """TrafficPolicy `oauth2`: the OAuth2 GatewayExtension that logs users in."""

    extension_ref: NamespacedObjectReference


class OAuth2Credentials(Model):
    client_id: str = Field(min_length=1, alias="clientID")
    client_secret_ref: LocalObjectReference  # data key `client-secret`


class OAuth2CookieNames(Model):
    access_token: str | None = Field(None, min_length=1)
    id_token: str | None = Field(None, min_length=1, alias="idToken")


# kgateway's cookie domain pattern (oauth2.go): a lowercase DNS subdomain, no leading dot or port.
COOKIE_DOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9]))*$"


class OAuth2CookieConfig(Model):
    domain: str | None = Field(None, min_length=1, max_length=253, pattern=COOKIE_DOMAIN)
    names: OAuth2CookieNames | None = None
    same_site: Literal["Lax", "Strict", "None"] | None = None
    disable_access_token_set_cookie: bool | None = None
    disable_id_token_set_cookie: bool | None = Field(None, alias="disableIDTokenSetCookie")
    disable_refresh_token_set_cookie: bool | None = None


class OAuth2JWTProcessingConfig(Model):
    audiences: list[str] = Field(default_factory=list, min_length=1, max_length=32)
    claims_to_headers: list[JWTClaimToHeader] = Field(default_factory=list, min_length=1, max_length=32)


class OAuth2JWKSBackend(Model):
    backend_ref: BackendObjectReference


class OAuth2JWTConfig(Model):
    jwks_uri: str | None = Field(None, alias="jwksURI", json_schema_extra=_https())
    jwks_backend: OAuth2JWKSBackend | None = None  # kgateway's newer name of jwksBackendRef
    jwks_backend_ref: BackendObjectReference | None = None

    def keys_backend(self) -> BackendObjectReference | None:
        return self.jwks_backend.backend_ref if self.jwks_backend else self.jwks_backend_ref
    access_token: OAuth2JWTProcessingConfig | None = None
    id_token: OAuth2JWTProcessingConfig | None = Field(None, alias="idToken")


class OAuth2DenyRedirectMatcher(Model):
    headers: list[HeaderMatch] = Field(default_factory=list, min_length=1, max_length=16)


class OAuth2Provider(Model):
    """GatewayExtension `oauth2` (type OAuth2): an OpenID Connect / OAuth2 authorization-code login."""

    backend_ref: BackendRef
    authorization_endpoint: str | None = Field(None, json_schema_extra=_https())
    token_endpoint: str | None = Field(None, json_schema_extra=_https())
    redirect_uri: str | None = Field(None, alias="redirectURI")
    logout_path: str = Field("/logout", min_length=1)
    forward_access_token: bool | None = None
    scopes: list[str] = Field(default_factory=list)
    credentials: OAuth2Credentials
    issuer_uri: str | None = Field(None, alias="issuerURI", json_schema_extra=_https(ISSUER_URI))
    end_session_endpoint: str | None = Field(None, json_schema_extra=_https())
    cookies: OAuth2CookieConfig | None = None
    jwt: OAuth2JWTConfig | None = None
    deny_redirect: OAuth2DenyRedirectMatcher | None = None
