"""Proxies come and go with Gateways; bad input never stops the rest."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.harness import (
    EchoBackends,
    Lychgate,
    envoy_pids,
    gateway_yaml,
    pid_alive,
    service_yaml,
    wait_for,
)

pytestmark = pytest.mark.e2e

ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}}}
spec:
  parentRefs: [{{name: {gateway}}}]
  hostnames: [{host}]
  rules:
    - backendRefs: [{{name: {backend}, port: 80}}]
"""


def test_broken_file_leaves_the_rest_serving(lychgate: Lychgate, backends: EchoBackends) -> None:
    lg = lychgate
    lg.write("svc.yaml", service_yaml("v1", 80, backends.start(pod="v1")))
    lg.write("gateway.yaml", gateway_yaml())
    lg.write("good.yaml", ROUTE.format(name="good", gateway="gw", host="good.example.com", backend="v1"))
    lg.write("bad.yaml", "apiVersion: v1\nkind: [unclosed\n")
    lg.write("mistyped.yaml", ROUTE.format(name="typo", gateway="gw", host="typo.example.com", backend="v1")
             .replace("port: 80", "port: eighty"))
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v1", host="good.example.com")
    problems = {p["file"]: p["message"] for p in lg.problems()}
    assert "cannot parse" in problems["bad.yaml"]
    assert "HTTPRoute default/typo" in problems["mistyped.yaml"]
    assert "spec.rules[0].backendRefs[0].port" in problems["mistyped.yaml"]
    out = lg.cli("get", "errors")
    assert "mistyped.yaml" in out.stdout and "backendRefs[0].port" in out.stdout
    # A valid route turned invalid keeps its last good version, like a rejected apply.
    lg.write("good.yaml", ROUTE.format(name="good", gateway="gw", host="good.example.com", backend="v1")
             .replace("rules:", "rulez:"))
    wait_for(lambda: "good.yaml" in {p["file"] for p in lg.problems()}, 5, "the edit to be rejected")
    assert lg.pod(addr, host="good.example.com") == "v1"
    assert lg.process is not None and lg.process.poll() is None


def test_two_gateways_run_two_envoys_on_the_same_port(lychgate: Lychgate, backends: EchoBackends) -> None:
    lg = lychgate
    lg.write("svc.yaml", service_yaml("one", 80, backends.start(pod="one"))
             + "---\n" + service_yaml("two", 80, backends.start(pod="two")))
    lg.write("gw1.yaml", gateway_yaml("first", 8080))
    lg.write("gw2.yaml", gateway_yaml("second", 8080))
    lg.write("r1.yaml", ROUTE.format(name="r1", gateway="first", host="example.com", backend="one"))
    lg.write("r2.yaml", ROUTE.format(name="r2", gateway="second", host="example.com", backend="two"))
    lg.start()
    a1, a2 = lg.address("first"), lg.address("second")
    assert a1 != a2
    lg.wait_pod(a1, "one")
    lg.wait_pod(a2, "two")
    proxies = lg.proxies()
    assert proxies["default/first"]["pid"] != proxies["default/second"]["pid"]
    assert proxies["default/first"]["admin"] != proxies["default/second"]["admin"]
    table = lg.cli("get", "gateways").stdout
    assert a1 in table and a2 in table and proxies["default/first"]["admin"] in table
    # Deleting a Gateway stops its Envoy.
    pid = proxies["default/second"]["pid"]
    lg.delete("gw2.yaml")
    wait_for(lambda: not pid_alive(pid), 10, "the second Envoy to stop")
    assert lg.pod(a1) == "one"


def test_log_level_from_gateway_parameters(lychgate: Lychgate, backends: EchoBackends) -> None:
    lg = lychgate
    params = """
        apiVersion: gateway.lychgate.dev/v1alpha1
        kind: GatewayParameters
        metadata: {{name: debug-params}}
        spec:
          kube:
            envoyContainer:
              bootstrap: {{logLevel: {level}}}
    """
    lg.write("params.yaml", params.format(level="debug"))
    lg.write("svc.yaml", service_yaml("v1", 80, backends.start(pod="v1")))
    lg.write("gateway.yaml", gateway_yaml(parameters="debug-params"))
    lg.write("route.yaml", ROUTE.format(name="r", gateway="gw", host="example.com", backend="v1"))
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v1")
    admin = lg.proxies()["default/gw"]["admin"]
    levels = httpx.post(f"http://{admin}/logging").text
    assert "router: debug" in levels
    # The spec's debug line layout: [time][thread][level][component] [source] message
    log_text = lg.cli("logs", "gw").stdout
    assert "][debug][" in log_text
    pid = lg.proxies()["default/gw"]["pid"]
    # Changing the level applies at run time: same Envoy process, new level.
    lg.write("params.yaml", params.format(level="error"))
    wait_for(lambda: "router: error" in httpx.post(f"http://{admin}/logging").text, 10, "level error")
    assert lg.proxies()["default/gw"]["pid"] == pid


def test_sigterm_leaves_no_envoy_behind(lychgate: Lychgate, backends: EchoBackends) -> None:
    lg = lychgate
    lg.write("svc.yaml", service_yaml("v1", 80, backends.start(pod="v1")))
    lg.write("gw1.yaml", gateway_yaml("first", 8080))
    lg.write("gw2.yaml", gateway_yaml("second", 9090))
    lg.start()
    lg.address("first")
    lg.address("second")
    pids = [p["pid"] for p in lg.proxies().values()]
    assert len(pids) == 2 and all(pid_alive(p) for p in pids)
    assert lg.stop(signal.SIGTERM) == 0
    assert not any(pid_alive(p) for p in pids)
    assert not (set(pids) & envoy_pids())


def test_a_killed_envoy_is_restarted(lychgate: Lychgate, backends: EchoBackends) -> None:
    lg = lychgate
    lg.write("svc.yaml", service_yaml("v1", 80, backends.start(pod="v1")))
    lg.write("gateway.yaml", gateway_yaml())
    lg.write("route.yaml", ROUTE.format(name="r", gateway="gw", host="example.com", backend="v1"))
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v1")
    pid = lg.proxies()["default/gw"]["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: lg.proxies()["default/gw"]["pid"] not in (None, pid), 15, "a new Envoy")
    lg.wait_pod(addr, "v1", timeout=15)
    assert lg.proxies()["default/gw"]["restarts"] == 1


def test_port_in_use_is_reported_on_the_listener(lychgate: Lychgate, backends: EchoBackends) -> None:
    """A listener whose port is taken says so and names the fix; the other listener serves."""
    import socket

    lg = lychgate
    lg.write("svc.yaml", service_yaml("v1", 80, backends.start(pod="v1")))
    lg.write("gateway.yaml", """
        apiVersion: gateway.networking.k8s.io/v1
        kind: Gateway
        metadata: {name: gw}
        spec:
          gatewayClassName: lychgate
          addresses: [{type: IPAddress, value: 127.0.7.7}]
          listeners:
            - {name: free, protocol: HTTP, port: 8080}
            - {name: busy, protocol: HTTP, port: 8181}
    """)
    lg.write("route.yaml", ROUTE.format(name="r", gateway="gw", host="example.com", backend="v1"))
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.7.7", 8181))
    blocker.listen()
    try:
        lg.start()
        lg.wait_pod("127.0.7.7", "v1")

        def busy_condition() -> dict[str, str] | None:
            listeners = lg.status("Gateway", "gw").get("listeners", [])
            busy = next((l for l in listeners if l["name"] == "busy"), None)
            conds = {c["type"]: c for c in busy["conditions"]} if busy else {}
            prog = conds.get("Programmed")
            return prog if prog and prog["status"] == "False" else None

        cond = wait_for(busy_condition, 15, "the busy listener to report its port")
        assert "8181" in cond["message"] and "choose another listener port" in cond["message"]
    finally:
        blocker.close()
    # Once the port is free, the listener is offered again and comes up.
    wait_for(lambda: lg.pod("127.0.7.7", port=8181) == "v1", 20, "the freed port to serve")


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_a_thousand_rapid_edits_end_in_the_final_state(lychgate: Lychgate, backends: EchoBackends) -> None:
    """1,000 edits of one route file as fast as they can be written: the last one
    wins, and no process, file descriptor or memory is left behind."""
    lg = lychgate
    for name in ("v1", "v2"):
        lg.write(f"svc-{name}.yaml", service_yaml(name, 80, backends.start(pod=name)))
    lg.write("gateway.yaml", gateway_yaml())
    lg.write("route.yaml", ROUTE.format(name="r", gateway="gw", host="example.com", backend="v1"))
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v1")
    assert lg.process is not None
    pid = lg.process.pid
    envoys = envoy_pids(parent=pid)
    assert len(envoys) == 1
    fds, rss = _fds(pid), _rss_kib(pid)
    deadline = time.monotonic() + 60
    for i in range(1000):  # bounded in count and time
        if time.monotonic() > deadline:
            break
        backend = "v2" if i % 2 else "v1"
        lg.write("route.yaml", ROUTE.format(name="r", gateway="gw", host=f"h{i}.example.com", backend=backend))
    lg.wait_pod(addr, "v2", host="h999.example.com", timeout=15)
    assert lg.pod(addr, host="h998.example.com") == 404  # only the final state is served
    time.sleep(1)
    assert envoy_pids(parent=pid) == envoys  # the proxy was never restarted
    assert _fds(pid) <= fds + 5
    assert _rss_kib(pid) - rss < 30 * 1024  # under 30 MiB of growth over 1,000 edits


def test_control_plane_restart_keeps_proxies_serving(lychgate: Lychgate, backends: EchoBackends) -> None:
    """The control plane dies (SIGKILL) while its proxy serves: traffic goes on
    from the proxy's last configuration; a new control plane adopts the same
    Envoy, which resyncs and follows new edits."""
    import threading

    lg = lychgate
    for name in ("v1", "v2"):
        lg.write(f"svc-{name}.yaml", service_yaml(name, 80, backends.start(pod=name)))
    lg.write("gateway.yaml", gateway_yaml())
    lg.write("route.yaml", ROUTE.format(name="r", gateway="gw", host="example.com", backend="v1"))
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v1")
    pid = lg.proxies()["default/gw"]["pid"]
    failures: list[object] = []
    answered = [0]
    stop = threading.Event()

    def probe() -> None:  # bounded: stops when told, or after 60 s
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                result = lg.pod(addr)
            except httpx.HTTPError as err:
                result = err
            if result == "v1":
                answered[0] += 1
            else:
                failures.append(result)
            time.sleep(0.01)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        lg.stop(signal.SIGKILL)
        time.sleep(1)
        assert pid_alive(pid)  # the proxy outlives its control plane
        lg.start()
        wait_for(lambda: lg.proxies().get("default/gw", {}).get("pid") == pid, 15, "the Envoy to be adopted")
        lg.address()
        time.sleep(0.5)
    finally:
        stop.set()
        prober.join()
    assert failures == [], f"{len(failures)} failed requests during the restart (of {answered[0] + len(failures)})"
    assert answered[0] > 50
    lg.write("route.yaml", ROUTE.format(name="r", gateway="gw", host="example.com", backend="v2"))
    lg.wait_pod(addr, "v2")  # resynced: edits flow to the adopted proxy again
    assert lg.proxies()["default/gw"]["pid"] == pid
