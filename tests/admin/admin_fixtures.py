"""Test data for the admin server tests: fake pipeline state and secret material."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from lychgate.admin.server import AdminProviders

# Key material that must never appear in any response. Not a real key: the
# redaction works on field names and PEM markers, not on key validity.
KEY_TOKEN = "NOTAREALKEYbutSECRETmaterial0123456789"
PRIVATE_KEY_PEM = (
    f"-----BEGIN PRIVATE KEY-----\nMIIEv{KEY_TOKEN}QIBADANBgkq\n-----END PRIVATE KEY-----\n"
)
CERT_PEM = "-----BEGIN CERTIFICATE-----\nMIIBcertificateisPUBLIC\n-----END CERTIFICATE-----\n"
TICKET_KEY = base64.b64encode(b"session-ticket-key-SECRET-80-bytes" * 2).decode()
HMAC_TOKEN = "hmac-SECRET-value-42"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def tls_secret() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": "gw-tls",
            "namespace": "default",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": (
                    '{"data":{"tls.key":"' + b64(PRIVATE_KEY_PEM) + '"}}'
                ),
                "team": "edge",
            },
        },
        "data": {"tls.crt": b64(CERT_PEM), "tls.key": b64(PRIVATE_KEY_PEM)},
    }


def envoy_secret_resources() -> list[dict[str, Any]]:
    """Envoy Secret resources as the xDS server renders them (proto JSON)."""
    return [
        {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
            "name": "default/gw-tls",
            "tls_certificate": {
                "certificate_chain": {"inline_string": CERT_PEM},
                "private_key": {"inline_string": PRIVATE_KEY_PEM},
            },
        },
        {
            # protobuf's MessageToDict default: camelCase and base64 bytes.
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
            "name": "default/gw-tls-bytes",
            "tlsCertificate": {
                "certificateChain": {"inlineBytes": b64(CERT_PEM)},
                "privateKey": {"inlineBytes": b64(PRIVATE_KEY_PEM)},
            },
        },
        {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
            "name": "tickets",
            "session_ticket_keys": {"keys": [{"inline_bytes": TICKET_KEY}]},
        },
        {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
            "name": "oauth-hmac",
            "generic_secret": {"secret": {"inline_string": HMAC_TOKEN}},
        },
    ]


def kindless_secret() -> dict[str, Any]:
    """A Secret as a list item: no kind, no apiVersion, and here not even a type."""
    return {
        "metadata": {"name": "db", "namespace": "default"},
        "data": {"password": b64(HMAC_TOKEN)},
    }


def route(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"parentRefs": [{"name": "gw"}]},
    }


def krt_snapshot() -> dict[str, Any]:
    return {
        "synced": True,
        "collections": {
            "HTTPRoute": {
                "synced": True,
                "items": [route("default", "a"), route("default", "b"), route("team", "a")],
            },
            "Gateway": {
                "synced": True,
                "items": [
                    {
                        "apiVersion": "gateway.networking.k8s.io/v1",
                        "kind": "Gateway",
                        "metadata": {"name": "gw", "namespace": "default"},
                    }
                ],
            },
            # List items from the API server carry no kind; the collection name says Secret.
            "Secret": {"synced": False, "items": [tls_secret(), kindless_secret()]},
            "RouteBindings": {
                "synced": True,
                "items": [{"name": "a", "namespace": "default", "listener": "http"}],
            },
        },
    }


def proxy(gateway: str, *, connected: bool = True) -> dict[str, Any]:
    listener = "type.googleapis.com/envoy.config.listener.v3.Listener"
    secret = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
    return {
        "node": {"id": f"{gateway.replace('/', '.')}-7d9f", "cluster": gateway},
        "gateway": gateway,
        "connected": connected,
        "types": {
            listener: {
                "version_sent": "abc",
                "version_acked": "abc",
                "nack": None,
                "resources": [
                    {"name": "http", "address": {"socket_address": {"port_value": 8080}}}
                ],
            },
            secret: {
                "version_sent": "def",
                "version_acked": "ccc",
                "nack": {"version": "def", "error": "bad key", "at": "2026-01-01T00:00:00Z"},
                "resources": envoy_secret_resources(),
            },
        },
    }


@dataclass
class FakePipeline:
    """Mutable pipeline state behind the providers, so tests can change it mid-test."""

    krt: dict[str, Any] = field(default_factory=krt_snapshot)
    proxies: list[dict[str, Any]] = field(default_factory=list)
    is_ready: bool = False

    def providers(self) -> AdminProviders:
        return AdminProviders(
            krt=lambda: self.krt,
            xds=lambda: {"proxies": self.proxies},
            ready=lambda: self.is_ready,
        )
