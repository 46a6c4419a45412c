"""basicAuth and apiKeyAuth end to end: real Envoy, htpasswd and API-key Secrets."""

from __future__ import annotations

import base64
import hashlib

import pytest

from tests.policies.conftest import Stack
from tests.policies.servers import body_of
from tests.policies.test_attachment import policy, ref
from tests.policies.test_fail_closed import assert_closed, own_backend

pytestmark = pytest.mark.e2e


def sha(password: str) -> str:
    return "{SHA}" + base64.b64encode(hashlib.sha1(password.encode()).digest()).decode()


def basic(user: str, password: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def secret(name: str, entries: dict[str, str], labels: str = "") -> str:
    data = ", ".join(f"{k}: {base64.b64encode(v.encode()).decode()}" for k, v in entries.items())
    return f"""
apiVersion: v1
kind: Secret
metadata: {{name: {name}{f", labels: {labels}" if labels else ""}}}
data: {{{data}}}
"""


def test_basic_auth_inline_users(stack: Stack) -> None:
    stack.write("basic-inline.yaml", stack.route("basic-inline", "basic-inline.example.com"),
                policy("basic-inline", ref("basic-inline"),
                       f"  basicAuth:\n    users: ['alice:{sha('wonderland')}', 'bob:{sha('builder')}']"))
    denied = stack.wait("basic-inline.example.com", lambda r: r.status_code == 401, what="basic auth to apply")
    assert denied.text == "User authentication failed. Missing username and password."
    assert stack.get("basic-inline.example.com", headers=basic("alice", "wrong")).status_code == 401
    ok = stack.get("basic-inline.example.com", headers=basic("bob", "builder"))
    assert ok.status_code == 200
    assert body_of(ok)["headers"]["x-envoy-basic-auth-user"] == "bob"


def test_basic_auth_secret_fails_closed_until_it_exists(stack: Stack) -> None:
    backend, rules = own_backend(stack, "basic-secret-app")
    stack.write("basic-secret.yaml", stack.route("basic-secret", "basic-secret.example.com", rules),
                policy("basic-secret", ref("basic-secret"), "  basicAuth:\n    secretRef: {name: basic-users}"))
    assert_closed(stack, "basic-secret", "basic-secret.example.com", backend, "SecretNotFound",
                  "Secret default/basic-users not found")
    stack.write("basic-users.yaml", secret("basic-users", {".htpasswd": f"carol:{sha('s3cret')}\n"}))
    stack.wait("basic-secret.example.com", lambda r: r.status_code == 401, what="the Secret to let basicAuth apply")
    ok = stack.get("basic-secret.example.com", headers=basic("carol", "s3cret"))
    assert ok.status_code == 200 and ok.headers["x-backend"] == "basic-secret-app"
    assert stack.applied("basic-secret")["status"] == "True"


def test_api_keys_from_selected_secrets(stack: Stack) -> None:
    stack.write("keys.yaml",
                secret("keys-team-a", {"client-a": "k-123"}, "{api-keys: shop}"),
                secret("keys-team-b", {"client-b": "k-456"}, "{api-keys: shop}"),
                secret("keys-other", {"client-x": "k-999"}, "{api-keys: other}"),
                stack.route("keys", "keys.example.com"),
                policy("keys", ref("keys"), """  apiKeyAuth:
    secretSelector: {matchLabels: {api-keys: shop}}
    keySources: [{header: x-api-key}, {query: api_key}]
    clientIdHeader: x-client-id"""))
    missing = stack.wait("keys.example.com", lambda r: r.status_code == 401, what="API keys to be required")
    assert missing.text == "Client authentication failed."
    ok = stack.get("keys.example.com", headers={"x-api-key": "k-123"})
    assert ok.status_code == 200
    seen = body_of(ok)["headers"]
    assert seen["x-client-id"] == "client-a"
    assert "x-api-key" not in seen  # forwardCredential unset: the key stays at the gateway
    by_query = stack.get("keys.example.com", "/orders?api_key=k-456")
    assert by_query.status_code == 200 and body_of(by_query)["headers"]["x-client-id"] == "client-b"
    assert "api_key" not in body_of(by_query)["path"]
    assert stack.get("keys.example.com", headers={"x-api-key": "k-999"}).status_code == 401  # not selected
    assert stack.get("keys.example.com", headers={"x-api-key": "nope"}).status_code == 401


def test_api_key_secret_missing_fails_closed(stack: Stack) -> None:
    backend, rules = own_backend(stack, "keys-missing-app")
    stack.write("keys-missing.yaml", stack.route("keys-missing", "keys-missing.example.com", rules),
                policy("keys-missing", ref("keys-missing"), "  apiKeyAuth:\n    secretRef: {name: no-such-keys}"))
    assert_closed(stack, "keys-missing", "keys-missing.example.com", backend, "SecretNotFound",
                  "Secret default/no-such-keys not found")


def test_api_key_authentication_older_names(stack: Stack) -> None:
    """kgateway's api-key-auth.yaml: `apiKeyAuthentication` with `hideAPIKey: false`
    (forward the key), and a cookie source."""
    stack.write("keys-old.yaml", secret("keys-old", {"client1": "k-123"}),
                stack.route("keys-old", "keys-old.example.com"),
                policy("keys-old", ref("keys-old"), """  apiKeyAuthentication:
    keySources: [{header: api-key}, {cookie: session-key}]
    hideAPIKey: false
    clientIdHeader: x-client-id
    secretRef: {name: keys-old}"""))
    stack.wait("keys-old.example.com", lambda r: r.status_code == 401, what="API keys to be required")
    ok = stack.get("keys-old.example.com", headers={"api-key": "k-123"})
    assert ok.status_code == 200
    seen = body_of(ok)["headers"]
    assert seen["api-key"] == "k-123" and seen["x-client-id"] == "client1"  # hideAPIKey: false forwards it
    by_cookie = stack.get("keys-old.example.com", headers={"cookie": "session-key=k-123"})
    assert by_cookie.status_code == 200 and body_of(by_cookie)["headers"]["x-client-id"] == "client1"
    assert stack.get("keys-old.example.com", headers={"cookie": "session-key=k-000"}).status_code == 401


def test_api_key_secret_update_applies_live(stack: Stack) -> None:
    """kgateway's secret-update scenario: the Secret changes, the new key works, the old is refused."""
    host = "keys-update.example.com"
    stack.write("keys-update-secret.yaml", secret("keys-update", {"client1": "k-old"}))
    stack.write("keys-update.yaml", stack.route("keys-update", host),
                policy("keys-update", ref("keys-update"), """  apiKeyAuth:
    forwardCredential: true
    secretRef: {name: keys-update}"""))
    stack.wait(host, lambda r: r.status_code == 200, headers={"api-key": "k-old"}, what="the first key")
    stack.write("keys-update-secret.yaml", secret("keys-update", {"client1": "k-new"}))
    stack.wait(host, lambda r: r.status_code == 200, headers={"api-key": "k-new"}, what="the new key")
    assert stack.get(host, headers={"api-key": "k-old"}).status_code == 401

