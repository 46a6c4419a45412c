"""OIDC discovery trusts what the proxy trusts: a real HTTPS provider on loopback whose
certificate a private CA signed, named by a BackendTLSPolicy on the provider's Service."""

from __future__ import annotations

import asyncio
import ssl
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from lychgate.api.registry import parse
from lychgate.store import Store
from lychgate.translate.policies.oauth2 import oauth2_service
from lychgate.translate.values import Unresolved
from tests.certs import CA
from tests.e2e.test_backend_tls import _ca_configmap
from tests.harness import free_port, service_yaml
from tests.policies.test_oauth2 import client_secret, issuer_extension

IDP_NAME = "idp.example.com"  # the certificate's only name: not the issuer URL's host (127.0.0.1)


@pytest.fixture
async def provider() -> AsyncIterator[tuple[CA, str, int]]:
    """(the private CA, the issuer URL, its port): discovery over HTTPS."""
    ca = CA("provider CA")
    port = free_port()

    async def discovery(request: web.Request) -> web.Response:
        base = f"https://{IDP_NAME}:{port}"
        return web.json_response({"issuer": base, "authorization_endpoint": f"{base}/authorize",
                                  "token_endpoint": f"{base}/token"})

    app = web.Application()
    app.router.add_get("/.well-known/openid-configuration", discovery)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    cert, key = ca.issue(IDP_NAME, [IDP_NAME])
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "c.pem").write_bytes(cert)
        (Path(tmp) / "k.pem").write_bytes(key)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(Path(tmp) / "c.pem", Path(tmp) / "k.pem")
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    yield ca, f"https://127.0.0.1:{port}", port
    await runner.cleanup()


def tls_policy(hostname: str) -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: idp, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: idp}}]
  validation:
    caCertificateRefs: [{{group: "", kind: ConfigMap, name: backend-ca}}]
    hostname: {hostname}
"""


def store_of(*texts: str) -> Store:
    store = Store()
    for text in texts:
        for doc in yaml.safe_load_all(text):
            if doc:
                store.upsert(parse(doc))
    return store


async def discovered(store: Store) -> str:
    """The token endpoint once discovery has ended; its error when it failed."""
    for _ in range(100):
        try:
            service, _ = oauth2_service(store, "default", "login")
            return service.token_endpoint
        except Unresolved as err:
            if "failed" in str(err):
                return str(err)
        await asyncio.sleep(0.05)
    raise AssertionError("discovery did not end")


def objects(ca: CA, issuer: str, port: int) -> list[str]:
    return [service_yaml("idp", port, port), _ca_configmap(ca), client_secret("idp-secret", "s3cret"),
            issuer_extension("login", issuer, "idp", port, "idp-secret")]


async def test_discovery_trusts_the_backend_tls_policy(provider: tuple[CA, str, int]) -> None:
    ca, issuer, port = provider
    store = store_of(*objects(ca, issuer, port), tls_policy(IDP_NAME))
    assert await discovered(store) == f"https://{IDP_NAME}:{port}/token"


async def test_discovery_without_the_policy_uses_the_system_trust(provider: tuple[CA, str, int]) -> None:
    ca, issuer, port = provider
    assert "CERTIFICATE_VERIFY_FAILED" in await discovered(store_of(*objects(ca, issuer, port)))


async def test_discovery_checks_the_policy_hostname(provider: tuple[CA, str, int]) -> None:
    ca, issuer, port = provider
    store = store_of(*objects(ca, issuer, port), tls_policy("other.example.com"))
    error = await discovered(store)
    assert "certificate names idp.example.com, not other.example.com" in error, error
