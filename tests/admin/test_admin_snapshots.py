"""/snapshots/krt and /snapshots/xds: filters, messages and redaction over HTTP."""

from __future__ import annotations

from typing import Any

from admin_fixtures import (
    CERT_PEM,
    HMAC_TOKEN,
    KEY_TOKEN,
    PRIVATE_KEY_PEM,
    TICKET_KEY,
    FakePipeline,
    b64,
    proxy,
)
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from lychgate.admin.server import AdminProviders, build_admin_app

Client = TestClient[web.Request, web.Application]


def names(data: dict[str, Any], collection: str) -> list[tuple[str, str]]:
    items = data["collections"][collection]["items"]
    return [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items]


def assert_no_secret_material(body: str) -> None:
    for secret in (
        KEY_TOKEN,
        PRIVATE_KEY_PEM,
        b64(PRIVATE_KEY_PEM),
        TICKET_KEY,
        HMAC_TOKEN,
        "BEGIN PRIVATE KEY",
    ):
        assert secret not in body, secret


async def test_krt_whole_snapshot(admin: Client) -> None:
    resp = await admin.get("/snapshots/krt")
    assert resp.status == 200
    assert resp.content_type == "application/json"
    text = await resp.text()
    assert "\n  " not in text  # compact unless ?pretty
    data = await resp.json()
    assert data["synced"] is True
    assert set(data["collections"]) == {"HTTPRoute", "Gateway", "Secret", "RouteBindings"}
    assert data["collections"]["Secret"]["synced"] is False


async def test_krt_pretty(admin: Client) -> None:
    text = await (await admin.get("/snapshots/krt?pretty")).text()
    assert '\n  "collections": {' in text


async def test_krt_filters(admin: Client) -> None:
    data = await (await admin.get("/snapshots/krt?kind=httproute")).json()
    assert list(data["collections"]) == ["HTTPRoute"]
    assert len(data["collections"]["HTTPRoute"]["items"]) == 3

    data = await (await admin.get("/snapshots/krt?kind=HTTPRoute&namespace=default")).json()
    assert names(data, "HTTPRoute") == [("default", "a"), ("default", "b")]

    data = await (await admin.get("/snapshots/krt?name=a")).json()
    assert names(data, "HTTPRoute") == [("default", "a"), ("team", "a")]
    # Items without metadata match on their top-level name/namespace.
    assert data["collections"]["RouteBindings"]["items"] == [
        {"name": "a", "namespace": "default", "listener": "http"}
    ]
    assert "Gateway" not in data["collections"]

    data = await (await admin.get("/snapshots/krt?kind=Gateway&namespace=nowhere")).json()
    assert data["collections"] == {}


async def test_krt_redacts_tls_secret(admin: Client) -> None:
    text = await (await admin.get("/snapshots/krt?pretty")).text()
    assert_no_secret_material(text)
    data = await (await admin.get("/snapshots/krt?kind=Secret")).json()
    secret, kindless = data["collections"]["Secret"]["items"]
    assert kindless["data"] == {"password": "[redacted]"}
    assert secret["data"] == {"tls.crt": "[redacted]", "tls.key": "[redacted]"}
    annotations = secret["metadata"]["annotations"]
    assert annotations["kubectl.kubernetes.io/last-applied-configuration"] == "[redacted]"
    assert annotations["team"] == "edge"


async def test_xds_without_proxies_says_so(admin: Client) -> None:
    resp = await admin.get("/snapshots/xds")
    assert resp.status == 200
    data = await resp.json()
    assert data["proxies"] == []
    assert "no proxy is connected" in data["message"]


async def test_xds_with_only_disconnected_proxies_says_so(
    admin: Client, pipeline: FakePipeline
) -> None:
    pipeline.proxies = [proxy("default/gw", connected=False)]
    data = await (await admin.get("/snapshots/xds")).json()
    assert "no proxy is connected" in data["message"]
    assert len(data["proxies"]) == 1


async def test_xds_filters_and_redacts(admin: Client, pipeline: FakePipeline) -> None:
    pipeline.proxies = [proxy("default/gw"), proxy("team/other")]
    text = await (await admin.get("/snapshots/xds?pretty")).text()
    assert_no_secret_material(text)
    data = await (await admin.get("/snapshots/xds")).json()
    assert "message" not in data
    assert [p["gateway"] for p in data["proxies"]] == ["default/gw", "team/other"]

    data = await (await admin.get("/snapshots/xds?gateway=team/other")).json()
    assert [p["gateway"] for p in data["proxies"]] == ["team/other"]

    data = await (await admin.get("/snapshots/xds?gateway=default/nope")).json()
    assert data["proxies"] == []
    assert "default/gw" in data["message"] and "team/other" in data["message"]

    data = await (await admin.get("/snapshots/xds?gateway=default/gw&type=Listener")).json()
    (types,) = [p["types"] for p in data["proxies"]]
    assert list(types) == ["type.googleapis.com/envoy.config.listener.v3.Listener"]


async def test_xds_secret_resources_keep_structure(admin: Client, pipeline: FakePipeline) -> None:
    pipeline.proxies = [proxy("default/gw")]
    data = await (await admin.get("/snapshots/xds?type=Secret")).json()
    state = next(iter(data["proxies"][0]["types"].values()))
    assert state["version_sent"] == "def" and state["nack"]["error"] == "bad key"
    snake, camel, tickets, generic = state["resources"]
    assert snake["tls_certificate"]["private_key"] == {"inline_string": "[redacted]"}
    # Certificates are public and useful when debugging: they stay.
    assert snake["tls_certificate"]["certificate_chain"] == {"inline_string": CERT_PEM}
    assert camel["tlsCertificate"]["privateKey"] == {"inlineBytes": "[redacted]"}
    assert tickets["session_ticket_keys"] == {"keys": [{"inline_bytes": "[redacted]"}]}
    assert generic["generic_secret"] == {"secret": {"inline_string": "[redacted]"}}
    assert snake["name"] == "default/gw-tls"


async def test_provider_failure_is_a_500_with_reason() -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("store not started")

    providers = AdminProviders(krt=broken, xds=broken, ready=lambda: True)
    client: Client = TestClient(TestServer(build_admin_app(providers)))
    await client.start_server()
    try:
        for path in ("/snapshots/krt", "/snapshots/xds"):
            resp = await client.get(path)
            assert resp.status == 500
            assert "store not started" in (await resp.json())["error"]
    finally:
        await client.close()
