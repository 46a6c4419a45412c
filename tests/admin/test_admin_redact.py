"""lychgate.admin.redact on its own: what is hidden, and what stays visible."""

from __future__ import annotations

import copy
import json

from admin_fixtures import (
    CERT_PEM,
    KEY_TOKEN,
    PRIVATE_KEY_PEM,
    b64,
    envoy_secret_resources,
    tls_secret,
)

from lychgate.admin.redact import REDACTED, is_kubernetes_secret, redact


def test_kubernetes_tls_secret() -> None:
    secret = tls_secret()
    original = copy.deepcopy(secret)
    out = redact(secret)
    assert secret == original  # input untouched
    assert out["data"] == {"tls.crt": REDACTED, "tls.key": REDACTED}
    assert out["metadata"]["name"] == "gw-tls"
    assert out["type"] == "kubernetes.io/tls"
    assert KEY_TOKEN not in json.dumps(out)


def test_string_data_and_list_item_shape() -> None:
    item = {
        "metadata": {"name": "basic", "namespace": "ns"},
        "type": "kubernetes.io/basic-auth",
        "stringData": {"username": "admin", "password": "hunter2"},
    }
    assert is_kubernetes_secret(item)
    assert redact(item)["stringData"] == {"username": REDACTED, "password": REDACTED}


def test_configmap_data_is_not_a_secret() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}
    assert redact(cm) == cm


def test_secrets_nested_in_a_list() -> None:
    out = redact({"items": [tls_secret(), {"kind": "Service", "spec": {"ports": [80]}}]})
    assert out["items"][0]["data"]["tls.key"] == REDACTED
    assert out["items"][1] == {"kind": "Service", "spec": {"ports": [80]}}


def test_envoy_secrets_snake_and_camel_case() -> None:
    snake, camel, tickets, generic = redact(envoy_secret_resources())
    assert snake["tls_certificate"] == {
        "certificate_chain": {"inline_string": CERT_PEM},
        "private_key": {"inline_string": REDACTED},
    }
    assert camel["tlsCertificate"]["privateKey"] == {"inlineBytes": REDACTED}
    assert camel["tlsCertificate"]["certificateChain"] == {"inlineBytes": b64(CERT_PEM)}
    assert tickets["session_ticket_keys"]["keys"] == [{"inline_bytes": REDACTED}]
    assert generic["generic_secret"]["secret"] == {"inline_string": REDACTED}


def test_private_key_inside_listener_transport_socket() -> None:
    listener = {
        "name": "https",
        "filter_chains": [
            {
                "transport_socket": {
                    "name": "envoy.transport_sockets.tls",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                        "common_tls_context": {
                            "tls_certificates": [
                                {
                                    "certificate_chain": {"filename": "/etc/tls/tls.crt"},
                                    "private_key": {"filename": "/etc/tls/tls.key"},
                                    "password": {"inline_string": "pass-SECRET"},
                                }
                            ]
                        },
                    },
                }
            }
        ],
    }
    out = redact(listener)
    cert = out["filter_chains"][0]["transport_socket"]["typed_config"]["common_tls_context"][
        "tls_certificates"
    ][0]
    # Where a key lives is not secret and helps debugging; what it is, is.
    assert cert["private_key"] == {"filename": "/etc/tls/tls.key"}
    assert cert["password"] == {"inline_string": REDACTED}
    assert "pass-SECRET" not in json.dumps(out)


def test_private_key_scalar_and_pem_anywhere() -> None:
    out = redact(
        {
            "private_key": "whatever",
            "ir": {"listeners": [{"tls": {"key": PRIVATE_KEY_PEM, "cert": CERT_PEM}}]},
            "blob": b64(PRIVATE_KEY_PEM),
            "rsa": "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----",
        }
    )
    assert out["private_key"] == REDACTED
    assert out["ir"]["listeners"][0]["tls"] == {"key": REDACTED, "cert": CERT_PEM}
    assert out["blob"] == REDACTED
    assert out["rsa"] == REDACTED


def test_plain_data_unchanged() -> None:
    data = {"a": [1, 2, {"b": None, "c": "LS0tLS1CRUdJTi"}], "d": True}
    assert redact(data) == data


def test_api_keys_and_htpasswd_users() -> None:
    """What apiKeyAuth and basicAuth put in a route (Envoy's per-route config) and in the IR."""
    route = {"typedPerFilterConfig": {
        "envoy.filters.http.api_key_auth": {"config": {
            "credentials": [{"key": "k-123", "client": "web"}], "keySources": [{"header": "x-api-key"}]}},
        "envoy.filters.http.basic_auth": {"config": {"users": {"inlineString": "alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="}}},
    }}
    ir_policy = {"basic_auth": {"htpasswd": "alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="},
                 "api_key_auth": {"credentials": [["k-123", "web"]], "client_id_header": "x-client-id"}}
    text = json.dumps(redact([route, ir_policy]))
    assert "k-123" not in text and "W6ph5Mm5" not in text
    assert "x-api-key" in text and "x-client-id" in text  # where the keys are looked for stays visible
