"""The index, 404s, health and metrics apps, and serve() on a real loopback port."""

from __future__ import annotations

import re

import aiohttp
import prometheus_client
import pytest
from admin_fixtures import FakePipeline
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from lychgate.admin import metrics
from lychgate.admin.server import (
    build_admin_app,
    build_health_app,
    build_metrics_app,
    serve,
)

Client = TestClient[web.Request, web.Application]


def links(html: str) -> list[str]:
    return [h.replace("&amp;", "&") for h in re.findall(r'href="([^"]+)"', html)]


async def test_index_links_every_endpoint(admin: Client) -> None:
    resp = await admin.get("/")
    assert resp.status == 200
    assert resp.content_type == "text/html"
    html = await resp.text()
    hrefs = links(html)
    for path in (
        "/debug/pprof",
        "/debug/pprof/profile",
        "/debug/pprof/heap",
        "/debug/pprof/threads",
        "/debug/pprof/tasks",
        "/logging",
        "/snapshots/krt",
        "/snapshots/xds",
    ):
        assert any(h.split("?")[0] == path for h in hrefs), path
    # Every link works (the CPU profile one is followed by the browser test: it takes seconds).
    for href in hrefs:
        if not href.startswith("/debug/pprof/profile"):
            resp = await admin.get(href)
            assert resp.status == 200, href


async def test_extra_routes_are_served_and_indexed(pipeline: FakePipeline) -> None:
    async def status(request: web.Request) -> web.Response:
        """Status conditions of every object, as lychgate get shows them."""
        return web.json_response({"ok": True})

    client: Client = TestClient(
        TestServer(build_admin_app(pipeline.providers(), [web.get("/status", status)]))
    )
    await client.start_server()
    try:
        html = await (await client.get("/")).text()
        assert 'href="/status"' in html
        assert "Status conditions of every object" in html
        assert (await (await client.get("/status")).json()) == {"ok": True}
    finally:
        await client.close()


async def test_unknown_path_points_to_index(admin: Client) -> None:
    resp = await admin.get("/debug/nothing")
    assert resp.status == 404
    assert (await resp.json())["index"] == "/"

    resp = await admin.get("/nope", headers={"Accept": "text/html"})
    assert resp.status == 404
    html = await resp.text()
    assert '<a href="/">/</a>' in html and "/nope" in html


async def test_wrong_method_is_405(admin: Client) -> None:
    resp = await admin.delete("/logging")
    assert resp.status == 405


async def test_healthz_and_readyz_flip(pipeline: FakePipeline) -> None:
    client: Client = TestClient(TestServer(build_health_app(pipeline.providers())))
    await client.start_server()
    try:
        resp = await client.get("/healthz")
        assert resp.status == 200 and (await resp.text()).strip() == "ok"

        resp = await client.get("/readyz")
        assert resp.status == 503
        assert "not ready" in await resp.text()

        pipeline.is_ready = True
        resp = await client.get("/readyz")
        assert resp.status == 200

        pipeline.is_ready = False
        assert (await client.get("/readyz")).status == 503
    finally:
        await client.close()


async def test_metrics_from_own_registry() -> None:
    assert metrics.REGISTRY is not prometheus_client.REGISTRY
    metrics.XDS_PUSHES.labels(
        type_url="type.googleapis.com/envoy.config.cluster.v3.Cluster", gateway="default/gw"
    ).inc()
    metrics.CONNECTED_PROXIES.labels(gateway="default/gw").set(2)
    metrics.ERRORS.labels(component="translate").inc()
    with metrics.TRANSLATION_DURATION.time():
        pass

    client: Client = TestClient(TestServer(build_metrics_app()))
    await client.start_server()
    try:
        resp = await client.get("/metrics")
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=")
        text = await resp.text()
        assert (
            'lychgate_xds_pushes_total{gateway="default/gw",'
            'type_url="type.googleapis.com/envoy.config.cluster.v3.Cluster"}' in text
        )
        assert 'lychgate_xds_connected_proxies{gateway="default/gw"} 2.0' in text
        assert 'lychgate_errors_total{component="translate"}' in text
        assert "lychgate_translation_duration_seconds_count" in text
        assert "process_resident_memory_bytes" in text or "python_info" in text

        resp = await client.get(
            "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        )
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        assert (await resp.text()).rstrip().endswith("# EOF")
    finally:
        await client.close()


def test_every_metric_is_documented() -> None:
    import ast
    import inspect
    import itertools

    tree = ast.parse(inspect.getsource(metrics))
    body = tree.body
    documented: set[str] = set()
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.Assign)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
        ):
            documented.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for name in (
        "REGISTRY",
        "TRANSLATION_DURATION",
        "SNAPSHOT_BYTES",
        "SNAPSHOT_RESOURCES",
        "XDS_PUSHES",
        "XDS_ACKS",
        "XDS_NACKS",
        "CONNECTED_PROXIES",
        "OBJECTS",
        "STATUS_WRITES",
        "ERRORS",
        "BLOCKED_SNAPSHOTS",
    ):
        assert name in documented, name


async def test_serve_binds_a_real_port(pipeline: FakePipeline) -> None:
    runner = await serve(build_admin_app(pipeline.providers()), "127.0.0.1:0")
    try:
        host, port = runner.addresses[0][:2]
        assert host == "127.0.0.1" and port > 0
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/") as resp,
        ):
            assert resp.status == 200
            assert "lychgate admin" in await resp.text()
    finally:
        await runner.cleanup()


async def test_serve_rejects_bad_address(pipeline: FakePipeline) -> None:
    with pytest.raises(ValueError, match="not HOST:PORT"):
        await serve(build_health_app(pipeline.providers()), "localhost")
