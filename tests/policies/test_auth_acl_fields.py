"""apiKeyAuth / acl / requestMirror as translation reads them: kgateway's names old and
new, the refusals, and how ACLs of several policies combine. No Envoy."""

from __future__ import annotations

import pytest

from lychgate import ir
from lychgate.api.registry import ManifestError
from tests.policies.test_translate import routes, run, tp

SECRET = """---
apiVersion: v1
kind: Secret
metadata: {name: keys}
stringData: {client1: k-123}
"""
GATEWAY = "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]"


def policy_of(t: object, route: str = "r/one") -> ir.RoutePolicy:
    p = routes(t)[route].policy  # type: ignore[arg-type]
    assert p is not None
    return p


@pytest.mark.parametrize(("body", "error"), [
    ("  apiKeyAuth: {secretRef: {name: keys}}\n  apiKeyAuthentication: {secretRef: {name: keys}}",
     "apiKeyAuth and apiKeyAuthentication are two names of one field and cannot both be set; use apiKeyAuth"),
    ("  apiKeyAuth: {secretRef: {name: keys}, hideAPIKey: true, forwardCredential: false}",
     "forwardCredential and hideAPIKey (its older, inverted name) cannot both be set"),
    ("  acl: {defaultAction: allow}\n  httpAcl: {defaultAction: deny}",
     "acl and httpAcl are two names of one field"),
    ("  acl: {defaultAction: deny, denyResponse: {blockedByHeaderName: a, addBlockedByHeader: b}}",
     "blockedByHeaderName and addBlockedByHeader (its older name) cannot both be set"),
    ("  acl: {defaultAction: deny, denyResponse: {}}",
     "at least one of statusCode, headers, blockedByHeaderName must be set"),
    ("  requestMirror: {}", "at least one of disableShadowHostSuffixAppend, hostRewriteLiteral must be set"),
])
def test_shapes_kgateway_refuses_are_refused(body: str, error: str) -> None:
    with pytest.raises(ManifestError, match=error.replace("(", r"\(").replace(")", r"\)")):
        run(tp("p", body))


def test_api_key_authentication_is_api_key_auth_with_hide_api_key_inverted() -> None:
    old = policy_of(run(SECRET + tp("p", "  apiKeyAuthentication: {secretRef: {name: keys}, hideAPIKey: false}")))
    new = policy_of(run(SECRET + tp("p", "  apiKeyAuth: {secretRef: {name: keys}, forwardCredential: true}")))
    assert old.api_key_auth == new.api_key_auth
    assert old.api_key_auth is not None and old.api_key_auth.forward_credential
    hidden = policy_of(run(SECRET + tp("p", "  apiKeyAuthentication: {secretRef: {name: keys}, hideAPIKey: true}")))
    assert hidden.api_key_auth is not None and not hidden.api_key_auth.forward_credential


def test_acl_of_one_tier_merges_and_the_route_tier_replaces_the_gateway() -> None:
    t = run(tp("gw-acl", "  acl:\n    defaultAction: deny\n    rules: [{name: g, cidrs: [172.16.0.0/12], action: allow}]",
               GATEWAY)
            + tp("a", "  acl:\n    defaultAction: allow\n    rules: [{name: a, cidrs: [10.0.0.0/8], action: deny}]")
            + tp("b", "  acl:\n    defaultAction: allow\n    denyResponse: {statusCode: 451, headers: [{name: X-B, value: '1'}]}\n"
                      "    rules: [{name: b, cidrs: [10.1.0.0/16, 10.0.0.0/8], action: allow}]"))
    acl = policy_of(t).acl
    assert acl == ir.Acl(rules=(("10.1.0.0/16", True, "b"), ("10.0.0.0/8", False, "a")), default_allow=True,
                         deny_status=451, deny_headers=(("x-b", "1"),))
    other = policy_of(t, "other/0").acl  # no route-tier ACL: the Gateway's applies
    assert other == ir.Acl(rules=(("172.16.0.0/12", True, "g"),), default_allow=False)


def test_acl_policies_disagreeing_on_a_single_setting_do_not_merge() -> None:
    t = run(tp("a", "  acl:\n    defaultAction: allow\n    rules: [{name: a, cidrs: [10.0.0.0/8], action: deny}]")
            + tp("b", "  acl:\n    defaultAction: deny\n    rules: [{name: b, cidrs: [10.1.0.0/16], action: allow}]"))
    assert policy_of(t).acl == ir.Acl(rules=(("10.0.0.0/8", False, "a"),), default_allow=True)


def test_http_acl_and_add_blocked_by_header_are_the_older_names() -> None:
    t = run(tp("p", "  httpAcl:\n    defaultAction: deny\n    denyResponse: {addBlockedByHeader: X-Blocked-By}"))
    assert policy_of(t).acl == ir.Acl(rules=(), default_allow=False, blocked_by_header="x-blocked-by")


def test_request_mirror_settings_reach_the_route() -> None:
    t = run(tp("p", "  requestMirror: {disableShadowHostSuffixAppend: true, hostRewriteLiteral: shadow.example.com}"))
    assert policy_of(t).request_mirror == ir.RequestMirror(keep_host=True, host="shadow.example.com")


def test_headers_from_secret_in_kgateway_earlier_shape() -> None:
    t = run("""---
apiVersion: v1
kind: Secret
metadata: {name: backend-creds}
stringData: {api-key: my-secret-api-key, tenant-id: tenant-abc}
""" + tp("p", """  headerModifiers:
    request: {remove: [X-Request-Id]}
    requestHeadersFromSecret:
      - {secretRef: {name: backend-creds}, header: X-Api-Key, key: api-key}
    responseHeadersFromSecret:
      - {secretRef: {name: backend-creds}, header: X-Tenant-Id, key: tenant-id}"""))
    p = policy_of(t)
    assert p.request_headers == ir.HeaderOps(set=(("x-api-key", "my-secret-api-key"),), remove=("x-request-id",))
    assert p.response_headers == ir.HeaderOps(set=(("x-tenant-id", "tenant-abc"),))
