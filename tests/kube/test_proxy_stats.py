"""GatewayParameters `kube.stats`: the proxy's metrics, scraped as Prometheus would.

The proxy objects carry the scrape configuration (port http-monitoring 9091,
prometheus.io annotations) and pass Kubernetes' own schemas; a real Envoy runs
the ConfigMap's bootstrap and answers /metrics in Prometheus' text format,
keeping only the stats the matcher lets through.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lychgate.api.lychgate import GatewayParameters
from lychgate.api.registry import ManifestError, parse
from lychgate.deploy.local import envoy_binary
from lychgate.deploy.manifests import ADMIN_PORT, BOOTSTRAP_FILE, ProxyContext, proxy_objects
from lychgate.xds.replicas import LOCAL_CLUSTER
from tests.harness import free_port, wait_for
from tests.kube.helpers import gateway, gateway_parameters

CTX = ProxyContext(xds_host="lychgate.lychgate-system.svc")


def objects(stats: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    params = parse(gateway_parameters(**({"stats": stats} if stats is not None else {})))
    assert isinstance(params, GatewayParameters)
    gw = parse(gateway(port=80))
    return {o["kind"]: o for o in proxy_objects(gw, params, (80,), CTX)}  # type: ignore[arg-type]


def test_scrape_configuration_only_when_enabled() -> None:
    for stats in (None, {"enabled": False}):
        pod = objects(stats)["Deployment"]["spec"]["template"]
        assert "prometheus.io/scrape" not in pod["metadata"].get("annotations", {})
        assert all(p["containerPort"] != 9091 for p in pod["spec"]["containers"][0]["ports"])
    pod = objects({"enabled": True})["Deployment"]["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "9091"
    assert pod["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    assert {"name": "http-monitoring", "containerPort": 9091, "protocol": "TCP"} in pod["spec"]["containers"][0]["ports"]


def test_objects_match_the_kubernetes_schemas() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    for obj in objects({"enabled": True, "enableStatsRoute": True}).values():
        kv.validate(obj, "1.33.0", strict=True)


def test_matcher_needs_exactly_one_list() -> None:
    with pytest.raises(ManifestError, match="exactly one of inclusionList, exclusionList must be set"):
        objects({"matcher": {}})
    with pytest.raises(ManifestError, match="exactly one of exact, prefix"):
        objects({"matcher": {"inclusionList": [{"prefix": "a", "suffix": "b"}]}})


@pytest.mark.parametrize("field", ["inclusionList", "exclusionList"])
def test_an_empty_list_is_refused_at_apply_and_on_load(field: str) -> None:
    """Envoy refuses a stats matcher with an empty list (ListStringMatcher needs a pattern), and
    the proxy would not start: lychgate's CRD refuses `[]` (kgateway's lets it through), and so
    does loading it, naming the field."""
    from tests.unit.test_kgateway_rules import crd_errors

    manifest = gateway_parameters(stats={"enabled": True, "matcher": {field: []}})
    assert any(e.startswith(f"spec.kube.stats.matcher.{field}") for e in crd_errors(manifest)), crd_errors(manifest)
    with pytest.raises(ManifestError, match=f"spec.kube.stats.matcher.{field}"):
        parse(manifest)


@pytest.fixture
def envoy(tmp_path: Path) -> Iterator[Any]:
    processes: list[subprocess.Popen[bytes]] = []
    ports: dict[str, int] = {}

    def run(stats: dict[str, Any]) -> str:
        config = tmp_path / "envoy.json"
        boot = json.loads(objects(stats)["ConfigMap"]["data"][BOOTSTRAP_FILE])
        # No control plane runs here: without xDS Envoy starts its static listeners at once
        # (with it, they wait for the first configuration, 15 s when none answers). The local
        # cluster's members come over ADS: it goes too.
        del boot["dynamic_resources"], boot["cluster_manager"]
        boot["static_resources"]["clusters"] = [
            c for c in boot["static_resources"]["clusters"] if c["name"] != LOCAL_CLUSTER]
        # In its pod Envoy has these ports to itself; here they go to free loopback ports,
        # so that another Envoy on the machine cannot answer in its place.
        admin = boot["admin"]["address"]["socket_address"]
        assert admin["port_value"] == ADMIN_PORT
        ports["admin"] = admin["port_value"] = free_port()
        for listener in boot["static_resources"]["listeners"]:
            address = listener["address"]["socket_address"]
            address["address"], address["port_value"] = "127.0.0.1", free_port()
            ports[listener["name"]] = address["port_value"]
        for cluster in boot["static_resources"]["clusters"]:  # the metrics listener's way to the admin
            for group in cluster.get("load_assignment", {}).get("endpoints", []):
                for endpoint in group["lb_endpoints"]:
                    address = endpoint["endpoint"]["address"]["socket_address"]
                    if address["port_value"] == ADMIN_PORT:
                        address["port_value"] = ports["admin"]
        config.write_text(json.dumps(boot))
        checked = subprocess.run([envoy_binary(), "--mode", "validate", "-c", str(config)],
                                 capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        log = (tmp_path / "envoy.log").open("wb")
        processes.append(subprocess.Popen([envoy_binary(), "-c", str(config), "--disable-hot-restart",
                                           "--base-id", str(ports["lychgate_metrics"])], stdout=log, stderr=log))
        return f"http://127.0.0.1:{ports['lychgate_metrics']}"

    run.ports = ports  # type: ignore[attr-defined]
    yield run
    for p in processes:
        p.terminate()
        p.wait(10)


@pytest.mark.e2e
def test_envoy_serves_metrics_with_the_matcher(envoy: Any) -> None:
    base = envoy({"enabled": True, "enableStatsRoute": True,
                  "matcher": {"inclusionList": [{"prefix": "server."}, {"exact": "cluster_manager.cluster_added"}]}})
    metrics = wait_for(lambda: (r := httpx.get(f"{base}/metrics")).status_code == 200 and r.text, 20, "/metrics")
    names = {line.split("{")[0].split(" ")[0] for line in metrics.splitlines() if line and not line.startswith("#")}
    assert "envoy_server_live" in names and "envoy_cluster_manager_cluster_added" in names
    assert all(n.startswith("envoy_server_") or n == "envoy_cluster_manager_cluster_added" for n in names)
    assert "server.live:" in httpx.get(f"{base}/stats").text  # enableStatsRoute: Envoy's plain /stats
    assert httpx.get(f"{base}/config_dump").status_code == 404  # nothing else of the admin interface
    assert json.loads(httpx.get(f"http://127.0.0.1:{envoy.ports['admin']}/server_info").text)["state"]  # admin stays local
