"""jwtAuth: validate JWTs with the providers of a JWT GatewayExtension (Envoy jwt_authn).

The GatewayExtension (`spec.jwt`) lists providers, OR-ed: a request passes when
a token verifies against any of them. `validationMode: AllowMissing` lets
requests without a token through (a token that is present must still verify);
`AllowMissingOrFailed` lets through a token that fails too, without its claims
(kgateway's mode for trying a policy on live traffic: it authenticates nobody).
Keys come inline, from a ConfigMap (data key `jwks`) in the extension's
namespace, or from a remote JWKS URL served by a Service or static Backend.
A ConfigMap or Service that is missing leaves the extension unresolved, and
the routes of policies using it answer 500 (jwtAuth is a security field).
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlsplit

from lychgate import ir
from lychgate.api.auth import RemoteJWKS
from lychgate.api.core import ConfigMap
from lychgate.api.policy import GatewayExtension
from lychgate.store import Store
from lychgate.translate.policies import extension_backend
from lychgate.translate.policies.ext_auth import ExtensionField, check_switch
from lychgate.translate.policies.extensions import (
    SERVICES,
    VALIDATORS,
    check_backend,
    cluster_name,
    lookup,
    use_service,
)
from lychgate.translate.policies.fields import register
from lychgate.translate.values import (
    CompileContext,
    Invalid,
    Unresolved,
    duration_ms,
    header_name,
)

JWT = "JWT"


def validate(ext: GatewayExtension) -> None:
    spec = ext.spec.jwt
    assert spec is not None
    if not spec.providers:
        raise Invalid("spec.jwt.providers", "at least one provider is required")
    seen: set[str] = set()
    for i, p in enumerate(spec.providers):
        path = f"spec.jwt.providers[{i}]"
        if p.name in seen:
            raise Invalid(f"{path}.name", f"{p.name!r} is used by two providers")
        seen.add(p.name)
        src = p.token_source
        if src is not None:
            if (src.header is None) == (src.query_parameter is None):
                raise Invalid(f"{path}.tokenSource", "exactly one of header or queryParameter must be set")
            if src.header is not None:
                header_name(src.header.header, f"{path}.tokenSource.header.header")
        for j, claim in enumerate(p.claims_to_headers):
            header_name(claim.header, f"{path}.claimsToHeaders[{j}].header")
        if p.clock_skew is not None:
            _clock_skew(p.clock_skew, f"{path}.clockSkew")
        jwks = p.jwks
        if (jwks.local is None) == (jwks.remote is None):
            raise Invalid(f"{path}.jwks", "exactly one of local or remote must be set")
        if jwks.local is not None:
            if (jwks.local.inline is None) == (jwks.local.config_map_ref is None):
                raise Invalid(f"{path}.jwks.local", "exactly one of inline or configMapRef must be set")
            if jwks.local.inline is not None:
                _keys(jwks.local.inline, f"{path}.jwks.local.inline")
        if jwks.remote is not None:
            url = urlsplit(jwks.remote.url)
            if url.scheme not in ("http", "https") or not url.hostname:
                raise Invalid(f"{path}.jwks.remote.url", f"{jwks.remote.url!r} is not an http(s) URL with a host")
            check_backend(jwks.remote.backend_ref, f"{path}.jwks.remote.backendRef")
            _remote_fetch(jwks.remote, f"{path}.jwks.remote")


MAX_CLOCK_SKEW_S = 87600 * 3600  # kgateway's bound: ten years


def _clock_skew(value: str, path: str) -> int:
    """clockSkew in whole seconds, as kgateway bounds it (1s..87600h, no fraction of a second)."""
    ms = duration_ms(value, path, 1)
    if ms % 1000:
        raise Invalid(path, f"{value!r} has a fraction of a second; Envoy counts whole seconds")
    if not 1 <= ms // 1000 <= MAX_CLOCK_SKEW_S:
        raise Invalid(path, f"{value!r} is outside 1s..87600h")
    return ms // 1000


def _remote_fetch(remote: RemoteJWKS, path: str) -> dict[str, Any]:
    """How the keys are fetched (ir.JwtProvider fields); raises Invalid naming the field."""
    def ms(value: str | None, label: str) -> int | None:
        return duration_ms(value, f"{path}.{label}", 1) if value is not None else None

    out: dict[str, Any] = {"cache_ms": ms(remote.cache_duration, "cacheDuration"),
                           "fetch_timeout_ms": ms(remote.timeout, "timeout")}
    if remote.async_fetch is not None:
        fetch = remote.async_fetch
        out["async_fetch"] = ir.JwksAsyncFetch(bool(fetch.fast_listener), ms(
            fetch.failed_refetch_duration, "asyncFetch.failedRefetchDuration"))
    if remote.retry_policy is not None:
        back_off = remote.retry_policy.back_off
        base = ms(back_off.base_interval, "retryPolicy.backOff.baseInterval") if back_off else None
        top = ms(back_off.max_interval, "retryPolicy.backOff.maxInterval") if back_off else None
        if base is not None and top is not None and top < base:
            raise Invalid(f"{path}.retryPolicy.backOff.maxInterval", "must be at least baseInterval")
        # kgateway: one retry unless numRetries says otherwise
        out["fetch_retry"] = ir.ServiceRetry(remote.retry_policy.num_retries or 1, base, top)
    return out


def _keys(text: str, path: str) -> str:
    """A JWKS as Envoy reads it: a key set as is, a single JWK wrapped in a set, a PEM
    public key turned into a JWK (Envoy's local_jwks takes JSON only)."""
    if text.lstrip().startswith("-----BEGIN"):
        return json.dumps({"keys": [_pem_jwk(text, path)]})
    try:
        value = json.loads(text)
    except ValueError:
        raise Invalid(path, "is neither JSON (a JWKS or a JWK) nor a PEM public key") from None
    if isinstance(value, dict) and isinstance(value.get("keys"), list):
        return text
    if isinstance(value, dict) and "kty" in value:
        return json.dumps({"keys": [value]})
    raise Invalid(path, "a JSON JWKS needs a `keys` list (or be one JWK with `kty`)")


def jwt_service(store: Store, namespace: str, name: str) -> tuple[ir.ExtensionService, list[ir.Cluster]]:
    ext = lookup(store, namespace, name, JWT)
    spec = ext.spec.jwt
    assert spec is not None
    providers, clusters = [], []
    for i, p in enumerate(spec.providers):
        path = f"GatewayExtension {namespace}/{name} spec.jwt.providers[{i}]"
        local = remote_url = remote_cluster = None
        fetch: dict[str, Any] = {}
        if p.jwks.local is not None:
            local = _local_keys(store, ext, p.jwks.local.inline, p.jwks.local.config_map_ref, path)
        elif p.jwks.remote is not None:
            remote = p.jwks.remote
            res = extension_backend.resolve(store, "GatewayExtension", namespace, remote.backend_ref,
                                            "a JWKS server")
            if res.cluster is None:
                raise Unresolved(res.reason, f"{path}.jwks.remote.backendRef: {res.message}")
            remote_cluster = f"{cluster_name(ext)}/jwks/{p.name}"
            tls = None
            url = urlsplit(remote.url)
            if url.scheme == "https" and res.cluster.tls is None:
                # A JWKS URL is often a public identity provider: verify it with the system's CAs.
                tls = ir.UpstreamTLS(sni=url.hostname or "", ca=None, sans=(("Hostname", url.hostname or ""),))
            clusters.append(ir.Cluster(name=remote_cluster, endpoints=res.cluster.endpoints,
                                       tls=tls or res.cluster.tls))
            remote_url = remote.url
            fetch = _remote_fetch(remote, path)
        src = p.token_source
        cache = (p.cache.size, p.cache.max_token_size) if p.cache is not None else None
        providers.append(ir.JwtProvider(
            name=f"{namespace}/{name}/{p.name}", issuer=p.issuer, audiences=tuple(p.audiences),
            header=src.header.header if src and src.header else None,
            prefix=src.header.prefix if src and src.header else None,
            query=src.query_parameter if src else None,
            claims_to_headers=tuple((c.name, c.header) for c in p.claims_to_headers),
            forward=bool(p.forward_token), local_jwks=local,
            remote_url=remote_url, remote_cluster=remote_cluster, **fetch,
            clock_skew_s=_clock_skew(p.clock_skew, f"{path}.clockSkew") if p.clock_skew is not None else None,
            cache=cache,
        ))
    service = ir.JwtService(name=f"{namespace}/{name}", providers=tuple(providers),
                            allow_missing=spec.validation_mode == "AllowMissing",
                            allow_failed=spec.validation_mode == "AllowMissingOrFailed")
    return service, clusters


def _local_keys(store: Store, ext: GatewayExtension, inline: str | None, ref: Any, path: str) -> str:
    if inline is not None:
        return _keys(inline, f"{path}.jwks.local.inline")
    cm = store.get(ConfigMap, ext.namespace, ref.name)
    if cm is None:
        raise Unresolved("ConfigMapNotFound", f"{path}.jwks.local.configMapRef: ConfigMap "
                                              f"{ext.namespace}/{ref.name} not found")
    if "jwks" not in cm.data:
        raise Unresolved("InvalidConfigMap", f"{path}.jwks.local.configMapRef: ConfigMap "
                                             f"{ext.namespace}/{ref.name} has no data key jwks")
    try:
        return _keys(cm.data["jwks"], f"ConfigMap {ext.namespace}/{ref.name} data.jwks")
    except Invalid as err:
        raise Unresolved("InvalidConfigMap", str(err)) from None


class JwtAuthField(ExtensionField):
    name, attr, security = "jwtAuth", "jwt_auth", True

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if check_switch(value, path):
            return {"jwt_auth": None}
        service = use_service(ctx, JWT, value["extensionRef"])
        assert isinstance(service, ir.JwtService)
        return {"jwt_auth": ir.JwtAuthRoute(service)}


VALIDATORS[JWT] = validate
SERVICES[JWT] = jwt_service
register(JwtAuthField())


def _b64(number: int, size: int | None = None) -> str:
    raw = number.to_bytes(size or (number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


_CURVES = {"secp256r1": ("P-256", 32), "secp384r1": ("P-384", 48), "secp521r1": ("P-521", 66)}


def _pem_jwk(text: str, path: str) -> dict[str, str]:
    """A PEM public key (RSA or EC, as kgateway takes them) as a JWK."""
    # cryptography (8 MiB of the controller's memory) loads with the first such key.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    try:
        key = serialization.load_pem_public_key(text.strip().encode())
    except ValueError:
        raise Invalid(path, "is not a PEM public key (-----BEGIN PUBLIC KEY-----)") from None
    if isinstance(key, rsa.RSAPublicKey):
        numbers = key.public_numbers()
        return {"kty": "RSA", "n": _b64(numbers.n), "e": _b64(numbers.e)}
    if isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name in _CURVES:
        crv, size = _CURVES[key.curve.name]
        point = key.public_numbers()
        return {"kty": "EC", "crv": crv, "x": _b64(point.x, size), "y": _b64(point.y, size)}
    raise Invalid(path, "only RSA and EC (P-256, P-384, P-521) public keys can verify tokens")
