"""The chart's scrape configuration for Gateway proxies: an optional Prometheus Operator PodMonitor."""

from __future__ import annotations

from collections.abc import Callable

from _helm_support import NAMESPACE, Rendered

from lychgate.deploy import ai_container, manifests, mcp_container, stats


def test_no_pod_monitor_by_default(defaults: Rendered) -> None:
    assert defaults.maybe("PodMonitor") is None


def test_pod_monitor_selects_the_proxies_metrics_port(render: Callable[..., Rendered]) -> None:
    out = render({"proxyMetrics": {"podMonitor": {"enabled": True, "interval": "15s",
                                                  "labels": {"release": "prom"}}}})
    monitor = out.one("PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["metadata"]["labels"]["release"] == "prom"
    spec = monitor["spec"]
    assert spec["namespaceSelector"] == {"any": True}  # Gateways live in any namespace
    # What the deployer puts on every proxy Pod and its metrics port (deploy/manifests.py, deploy/stats.py).
    assert spec["selector"]["matchLabels"] == {manifests.MANAGED_BY_LABEL: manifests.MANAGED_BY}
    assert spec["podMetricsEndpoints"] == [
        {"port": stats.PORT_NAME, "path": "/metrics", "interval": "15s"},
        {"port": ai_container.METRICS_PORT_NAME, "path": "/metrics", "interval": "15s"},  # the AI extension's
        {"port": mcp_container.METRICS_PORT_NAME, "path": "/metrics", "interval": "15s"},  # the MCP relay's
    ]
