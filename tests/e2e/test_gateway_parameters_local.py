"""GatewayParameters in local mode: selfManaged (the user runs Envoy) and ioUring."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lychgate.deploy.bootstrap import XdsTarget, bootstrap, io_uring_available
from lychgate.deploy.local import envoy_binary
from tests.harness import EchoBackends, Lychgate, free_port, gateway_yaml, service_yaml, wait_for

pytestmark = pytest.mark.e2e

ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: v1, port: 80}]}]
"""


def parameters(spec: str) -> str:
    return ("apiVersion: gateway.lychgate.dev/v1alpha1\nkind: GatewayParameters\n"
            f"metadata: {{name: params}}\nspec:\n{spec}\n")


def programmed(lg: Lychgate) -> dict[str, str]:
    conds = lg.status("Gateway", "gw").get("conditions", [])
    return next((c for c in conds if c["type"] == "Programmed"), {})


def test_self_managed_gateway_is_served_to_the_proxy_the_user_runs(
        lychgate: Lychgate, backends: EchoBackends, tmp_path: Path) -> None:
    lg = lychgate
    lg.write("svc.yaml", service_yaml("v1", 80, backends.start(pod="v1")))
    lg.write("params.yaml", parameters("  selfManaged: {}"))
    lg.write("gateway.yaml", gateway_yaml(parameters="params") + "---\n" + ROUTE)
    lg.start()
    waiting = wait_for(lambda: programmed(lg) or None, 15, "the Gateway's status")
    assert waiting["status"] == "False" and "self-managed" in waiting["message"], waiting
    assert not (lg.state / "proxies" / "default" / "gw" / "envoy.pid").exists()  # lychgate started no Envoy

    # The user's own Envoy, with the node id of the Gateway, gets its listeners over xDS.
    host, port = lg.xds.rsplit(":", 1)
    config = tmp_path / "own-envoy.json"
    config.write_text(json.dumps(bootstrap("default", "gw", XdsTarget(host, int(port)), admin_port=free_port())))
    log = (tmp_path / "own-envoy.log").open("wb")
    own = subprocess.Popen([envoy_binary(), "-c", str(config), "--disable-hot-restart", "--base-id",
                            str(free_port())], stdout=log, stderr=subprocess.STDOUT)
    try:
        address = lg.address()
        lg.wait_pod(address, "v1")
        assert not (lg.state / "proxies" / "default" / "gw" / "envoy.pid").exists()
    finally:
        own.terminate()
        own.wait(15)
        log.close()


def test_io_uring_where_the_kernel_allows_it(lychgate: Lychgate, backends: EchoBackends) -> None:
    lg = lychgate
    lg.write("svc.yaml", service_yaml("v1", 80, backends.start(pod="v1")))
    lg.write("params.yaml", parameters("  kube:\n    envoyContainer:\n      bootstrap:\n        ioUring: {enabled: true}"))
    lg.write("gateway.yaml", gateway_yaml(parameters="params") + "---\n" + ROUTE)
    lg.start()
    address = lg.address()
    lg.wait_pod(address, "v1")  # Envoy serves through the io_uring socket interface
    boot = json.loads((lg.state / "proxies" / "default" / "gw" / "bootstrap.json").read_text())
    wanted = io_uring_available()
    assert ("default_socket_interface" in boot) == wanted
    assert any("io_uring_options" in e["typed_config"] for e in boot["bootstrap_extensions"]) == wanted

    # Turned off: the proxy restarts with plain sockets and serves again.
    lg.write("params.yaml", parameters("  kube:\n    envoyContainer:\n      bootstrap:\n        ioUring: {enabled: false}"))
    wait_for(lambda: "default_socket_interface" not in json.loads(
        (lg.state / "proxies" / "default" / "gw" / "bootstrap.json").read_text()), 15, "the new bootstrap")
    lg.wait_pod(address, "v1")


def accepted(lg: Lychgate) -> dict[str, str]:
    conds = lg.status("Gateway", "gw").get("conditions", [])
    return next((c for c in conds if c["type"] == "Accepted"), {})


def test_an_overlay_is_checked_locally_by_the_object_it_would_make(
        lychgate: Lychgate, backends: EchoBackends) -> None:
    """Locally no Deployment is made, yet an overlay is not kept unread: the objects it would make
    in Kubernetes are checked, and one that is invalid refuses the parameters naming the field
    (as the same manifests would in a cluster), until it is fixed."""
    lg = lychgate
    valid = ("  kube:\n    deploymentOverlay:\n      metadata: {labels: {team: edge}}\n"
             "      spec: {template: {spec: {dnsPolicy: ClusterFirst}}}")
    lg.write("svc.yaml", service_yaml("v1", 80, backends.start(pod="v1")))
    lg.write("params.yaml", parameters(valid))
    lg.write("gateway.yaml", gateway_yaml(parameters="params") + "---\n" + ROUTE)
    lg.start()
    address = lg.address()
    lg.wait_pod(address, "v1")
    assert accepted(lg)["status"] == "True", accepted(lg)

    lg.write("params.yaml", parameters(valid.replace("dnsPolicy:", "dnsPolicyy:")))
    refused = wait_for(lambda: accepted(lg) if accepted(lg).get("status") == "False" else None, 15,
                       "the Gateway's Accepted=False")
    assert refused["reason"] == "InvalidParameters", refused
    assert ("GatewayParameters default/params: spec.kube.deploymentOverlay: the Deployment it makes is not a valid "
            "Kubernetes Deployment: spec.template.spec: Additional properties are not allowed ('dnsPolicyy' was "
            "unexpected)") in refused["message"], refused

    lg.write("params.yaml", parameters(valid))
    wait_for(lambda: accepted(lg).get("status") == "True", 15, "the Gateway accepted again")
    lg.wait_pod(lg.address(), "v1")
