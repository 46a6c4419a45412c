"""`lychgate get` for every kind `lychgate run` reads, against a real control plane (and
the real Envoy of its Gateway): each kind by each of its kubectl names, with the columns
that say whether it works."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lychgate import cli, cli_get
from lychgate.api.registry import BY_KIND
from tests.harness import Lychgate, wait_for

pytestmark = pytest.mark.e2e

EVERY_KIND = Path(__file__).with_name("every_kind.yaml")
# The object of each kind in every_kind.yaml (GatewayClass: the built-in one).
NAMES = {
    "Namespace": "other", "Service": "app", "EndpointSlice": "app-local", "Secret": "token",
    "ConfigMap": "settings", "Pod": "vllm-1", "GatewayClass": "lychgate", "Gateway": "gw",
    "ListenerSet": "extra", "HTTPRoute": "app", "GRPCRoute": "rpc", "TLSRoute": "secure",
    "TCPRoute": "stream", "UDPRoute": "dgram", "ReferenceGrant": "let-default-in",
    "BackendTLSPolicy": "app-tls", "GatewayParameters": "edge", "TrafficPolicy": "app-timeout",
    "GatewayExtension": "auth", "InferencePool": "llama", "ListenerPolicy": "access-log",
    "HTTPListenerPolicy": "old-style", "Backend": "outside", "BackendConfigPolicy": "app-lb",
    "DirectResponse": "gone",
}
# What the columns must say about them (a row, split on runs of spaces).
ROWS = {
    "Gateway": ["gw", "lychgate", r"127\.\d+\.\d+\.\d+", "8080,8443,9000,9001", "True", "True", r"127\.0\.0\.1:\d+"],
    "GatewayClass": ["lychgate", "gateway.lychgate.dev/lychgate", "True"],
    "ListenerSet": ["extra", "gw", "8081", "True", "True"],
    "HTTPRoute": ["app", "app.example.com", "gw/http=True"],
    "GRPCRoute": ["rpc", "rpc.example.com", "gw/http=True"],
    "TLSRoute": ["secure", "tls.example.com", "gw/tls=True"],
    "TCPRoute": ["stream", "gw/tcp=True"],
    "UDPRoute": ["dgram", "gw/udp=True"],
    "TrafficPolicy": ["app-timeout", "True", "True", "HTTPRoute/app"],
    "BackendTLSPolicy": ["app-tls", r"False \(NoValidCACertificate\)", r"False \(InvalidCACertificateRef\)",
                         "Service/app"],
    "GatewayExtension": ["auth", "extAuth", "True", "True"],
    "InferencePool": ["llama", "app=vllm", "8000", "<none>"],
    "Pod": ["vllm-1", "True", "Running", r"10\.1\.0\.1"],
    "Service": ["app", "ClusterIP", "<none>", "80/TCP"],
    "EndpointSlice": ["app-local", "IPv4", "3000", r"127\.0\.0\.1"],
    "Secret": ["token", "Opaque", "1"],
    "ConfigMap": ["settings", "2"],
    "ReferenceGrant": ["let-default-in", "HTTPRoute/default", "Service"],
    "Namespace": ["other", "Active"],
    "GatewayParameters": ["edge"],
    "DirectResponse": ["gone", "410"],
    "Backend": ["outside", "Static", "True"],
    "ListenerPolicy": ["access-log", "True", "True", "Gateway/gw"],
    "HTTPListenerPolicy": ["old-style", "True", "True", "Gateway/gw"],
    "BackendConfigPolicy": ["app-lb", "True", "True", "Service/app"],
}


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> object:
    lg = Lychgate(tmp_path_factory.mktemp("get"))
    shutil.copy(EVERY_KIND, lg.manifests / "every_kind.yaml")
    lg.start()
    lg.address("gw")  # programmed: its Envoy has the configuration
    wait_for(lambda: any(c.get("type") == "Accepted" and c.get("status") == "True"
                         for p in lg.status("TCPRoute", "stream").get("parents", []) for c in p["conditions"]),
             20, "the routes' status")
    yield lg
    lg.close()


def get(lg: Lychgate, *args: str) -> str:
    result = CliRunner().invoke(cli.app, ["get", *args], env={"LYCHGATE_ADMIN_ADDRESS": lg.admin})
    assert result.exit_code == 0, result.output
    return result.output


def row(output: str, name: str) -> list[str]:
    """The cells of the row of `name` (columns are two or more spaces apart)."""
    found = [re.split(r"\s{2,}", line.strip()) for line in output.splitlines()[1:]]
    return next(r for r in found if r[0] == name)


@pytest.mark.parametrize("kind", sorted(BY_KIND))
def test_every_kind_by_every_kubectl_name(running: Lychgate, kind: str) -> None:
    entry = cli_get.TABLE[kind]
    scope = ("-n", "other") if kind == "ReferenceGrant" else ()
    for name in (*entry.names, kind):
        out = get(running, name, *scope)
        header = out.splitlines()[0].split()
        assert header == ["NAME", *[c.header for c in entry.columns], "AGE"], (name, out)
        cells = row(out, NAMES[kind])
        for want, got in zip(ROWS[kind], cells, strict=False):
            assert re.fullmatch(want, got), f"{name}: {got!r} is not {want!r} in\n{out}"
        assert len(cells) == len(ROWS[kind]) + 1, out  # + AGE
    one = get(running, entry.plural, NAMES[kind], *scope, "-o", "json")
    assert f'"name": "{NAMES[kind]}"' in one


def test_get_all_lists_every_kind_but_data(running: Lychgate) -> None:
    out = get(running, "all")
    for kind, name in NAMES.items():
        entry = cli_get.TABLE[kind]
        shown = f"{entry.resource}/{name}"
        if kind in cli_get.NOT_IN_ALL or kind == "ReferenceGrant":
            assert shown not in out, out  # Secrets and ConfigMaps; the grant is in namespace other
        else:
            assert shown in out, f"{shown} missing from\n{out}"
    assert "httproute.gateway.networking.k8s.io/app" in out
    everywhere = get(running, "all", "-A")
    assert "referencegrant.gateway.networking.k8s.io/let-default-in" in everywhere


def test_unknown_kind_names_the_known_ones(running: Lychgate) -> None:
    result = CliRunner().invoke(cli.app, ["get", "widgets"], env={"LYCHGATE_ADMIN_ADDRESS": running.admin})
    assert result.exit_code == 2
    assert "tlsroutes" in result.output and "listenersets" in result.output and "all" in result.output
