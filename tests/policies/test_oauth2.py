"""oauth2 end to end: a real HTTP client (following redirects, keeping cookies) logs
in through real Envoy and an OpenID provider stand-in speaking the authorization-code
flow (discovery, /authorize redirect, /token with the client secret and PKCE), then
logs out.

Over HTTPS, as a browser would: Envoy marks its session cookies Secure, so a client
on plain HTTP never sends them back (and goes round the login loop forever)."""

from __future__ import annotations

import base64
import ssl
import textwrap
from collections.abc import Iterator

import httpx
import pytest

from tests.certs import CA
from tests.harness import free_port, gateway_yaml, wait_for
from tests.policies.conftest import Stack, condition
from tests.policies.servers import OidcProvider, body_of
from tests.policies.test_attachment import policy, ref
from tests.policies.test_fail_closed import assert_closed, own_backend

pytestmark = pytest.mark.e2e


HTTPS_PORT = 8443


class ToGateway(httpx.HTTPTransport):
    """Sends requests for *.example.com to the gateway's HTTPS listener (keeping their Host
    and SNI), others as addressed: the client sees the provider and the gateway as a
    browser would."""

    def __init__(self, address: str, verify: ssl.SSLContext | bool) -> None:
        super().__init__(verify=verify)
        self.address = address

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host.endswith(".example.com"):
            # A copy: the client files cookies under the request it sent (the name, not the address).
            request = httpx.Request(request.method, request.url.copy_with(host=self.address, port=HTTPS_PORT),
                                    headers=request.headers, stream=request.stream,
                                    extensions={**request.extensions, "sni_hostname": request.url.host})
        return super().handle_request(request)


@pytest.fixture(scope="module")
def ca(stack: Stack) -> Iterator[CA]:
    """The stack's Gateway gets an HTTPS listener with a certificate for *.example.com."""
    authority = CA()
    cert, key = authority.issue("*.example.com", ["*.example.com"])
    https = ("\n    - name: https\n      protocol: HTTPS\n      port: 8443\n"
             "      tls: {certificateRefs: [{name: serving}]}")
    stack.lg.write("00-gateway.yaml", gateway_yaml(extra_listeners=https).rstrip("\n")
                   + f"\n  addresses: [{{type: IPAddress, value: {stack.addr}}}]\n")
    stack.write("serving.yaml", f"""
apiVersion: v1
kind: Secret
metadata: {{name: serving}}
type: kubernetes.io/tls
data:
  tls.crt: {base64.b64encode(cert).decode()}
  tls.key: {base64.b64encode(key).decode()}
""")
    yield authority


def oauth2_extension(name: str, service: str, port: int, secret: str, client_id: str, where: str) -> str:
    """An OAuth2 GatewayExtension; `where` says where the provider's endpoints are."""
    return f"""
apiVersion: gateway.lychgate.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: {name}}}
spec:
  type: OAuth2
  oauth2:
    backendRef: {{name: {service}, port: {port}}}
{textwrap.indent(where, "    ")}
    scopes: [openid, email]
    forwardAccessToken: true
    credentials:
      clientID: {client_id}
      clientSecretRef: {{name: {secret}}}
"""


def extension(name: str, idp: OidcProvider, service: str, secret: str) -> str:
    """Endpoints set explicitly, as the provider's discovery document lists them."""
    found = httpx.get(f"{idp.base}/.well-known/openid-configuration", timeout=5).json()
    where = "\n".join(f"{field}: {found[key]}" for field, key in (
        ("authorizationEndpoint", "authorization_endpoint"), ("tokenEndpoint", "token_endpoint"),
        ("endSessionEndpoint", "end_session_endpoint")))
    return oauth2_extension(name, service, idp.port, secret, idp.client_id, where)


def issuer_extension(name: str, issuer: str, service: str, port: int, secret: str) -> str:
    """Only the issuer: lychgate discovers the endpoints."""
    return oauth2_extension(name, service, port, secret, "discovered-client", f"issuerURI: {issuer}")


def client_secret(name: str, value: str) -> str:
    return f"""
apiVersion: v1
kind: Secret
metadata: {{name: {name}}}
data: {{client-secret: {base64.b64encode(value.encode()).decode()}}}
"""


def browser(stack: Stack, ca: CA) -> httpx.Client:
    context = ssl.create_default_context()
    context.load_verify_locations(cadata=ca.pem.decode())
    return httpx.Client(transport=ToGateway(stack.addr, context), follow_redirects=True, timeout=10)


def test_login_with_the_authorization_code_flow_and_logout(stack: Stack, ca: CA) -> None:
    idp = stack.servers.oidc("shop-client", "s3cret-value")
    stack.service("oidc", idp.port)
    stack.write("oauth2.yaml",
                client_secret("shop-oidc", idp.client_secret),
                extension("shop-login", idp, "oidc", "shop-oidc"),
                stack.route("oauth2", "oauth.example.com"),
                policy("oauth2", ref("oauth2"), "  oauth2:\n    extensionRef: {name: shop-login}"))
    stack.wait("oauth.example.com", lambda r: r.status_code == 302, what="oauth2 to redirect to the provider")
    with browser(stack, ca) as b:
        first = b.get("https://oauth.example.com/orders?page=2", follow_redirects=False)
        location = httpx.URL(first.headers["location"])
        assert str(location).startswith(f"{idp.base}/authorize?")
        assert location.params["client_id"] == "shop-client"
        assert location.params["redirect_uri"] == "https://oauth.example.com/oauth2/redirect"
        assert location.params["scope"] == "openid email"

        page = b.get("https://oauth.example.com/orders?page=2")
        assert page.status_code == 200, page.text
        assert [r.status_code for r in page.history] == [302, 302, 302]  # to the provider, back, to the page
        assert body_of(page)["path"] == "/orders?page=2"  # where the user was going
        assert idp.logins == 1
        token = idp.tokens[-1]
        assert body_of(page)["headers"]["authorization"] == f"Bearer {token}"  # forwardAccessToken
        assert idp.token_requests[-1]["code_verifier"]  # PKCE
        # Logged in: the cookies carry the session, no more trips to the provider.
        again = b.get("https://oauth.example.com/other")
        assert again.status_code == 200 and again.history == [] and idp.logins == 1

        out = b.get("https://oauth.example.com/logout")
        assert out.text == "logged out at the provider\n" and idp.logouts == 1  # end-session endpoint
        after = b.get("https://oauth.example.com/orders", follow_redirects=False)
        assert after.status_code == 302 and after.headers["location"].startswith(f"{idp.base}/authorize?")
    assert stack.applied("oauth2")["status"] == "True"
    ext = stack.status("GatewayExtension", "shop-login")
    assert all(c["status"] == "True" for c in ext["conditions"])


def test_missing_client_secret_fails_closed(stack: Stack) -> None:
    idp = stack.servers.oidc("closed-client", "x")
    stack.service("oidc-closed", idp.port)
    backend, rules = own_backend(stack, "oauth2-closed-app")
    stack.write("oauth2-closed.yaml",
                extension("closed-login", idp, "oidc-closed", "no-such-secret"),
                stack.route("oauth2-closed", "oauth-closed.example.com", rules),
                policy("oauth2-closed", ref("oauth2-closed"), "  oauth2:\n    extensionRef: {name: closed-login}"))
    assert_closed(stack, "oauth2-closed", "oauth-closed.example.com", backend, "SecretNotFound",
                  "Secret default/no-such-secret not found")
    ext = stack.status("GatewayExtension", "closed-login")
    assert condition(ext["conditions"], "ResolvedRefs")["reason"] == "SecretNotFound"



def test_endpoints_discovered_from_the_issuer(stack: Stack, ca: CA) -> None:
    idp = stack.servers.oidc("discovered-client", "d1scovered")
    stack.service("oidc-discovered", idp.port)
    stack.write("oauth2-discovered.yaml",
                client_secret("discovered-oidc", idp.client_secret),
                issuer_extension("discovered-login", idp.base, "oidc-discovered", idp.port, "discovered-oidc"),
                stack.route("oauth2-discovered", "discovered.example.com"),
                policy("oauth2-discovered", ref("oauth2-discovered"),
                       "  oauth2:\n    extensionRef: {name: discovered-login}"))
    stack.wait("discovered.example.com", lambda r: r.status_code == 302, what="discovery to complete")
    with browser(stack, ca) as b:
        page = b.get("https://discovered.example.com/home")
        assert page.status_code == 200 and body_of(page)["path"] == "/home"
        assert str(page.history[0].headers["location"]).startswith(f"{idp.base}/authorize?")  # discovered
        assert b.get("https://discovered.example.com/logout").text == "logged out at the provider\n"


def test_issuer_that_cannot_be_discovered_fails_closed(stack: Stack) -> None:
    dead = free_port()  # nothing answers the discovery request
    stack.service("oidc-dead", dead)
    backend, rules = own_backend(stack, "oauth2-dead-app")
    stack.write("oauth2-dead.yaml",
                client_secret("dead-oidc", "x"),
                issuer_extension("dead-login", f"http://127.0.0.1:{dead}", "oidc-dead", dead, "dead-oidc"),
                stack.route("oauth2-dead", "oauth-dead.example.com", rules),
                policy("oauth2-dead", ref("oauth2-dead"), "  oauth2:\n    extensionRef: {name: dead-login}"))
    # DiscoveryPending while the first fetch runs, DiscoveryFailed once it has failed
    wait_for(lambda: stack.applied("oauth2-dead")["reason"] == "DiscoveryFailed", 10, "discovery to fail")
    assert_closed(stack, "oauth2-dead", "oauth-dead.example.com", backend, "DiscoveryFailed",
                  f"discovering the endpoints of issuer http://127.0.0.1:{dead} failed")
