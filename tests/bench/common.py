"""Shared pieces of the benchmarks: manifests, a `lychgate run` process, probes,
process sampling, wrk and machine facts.

Everything listens and sends on loopback only (127.0.0.0/8). Each benchmark
uses its own Gateway addresses (127.0.5x.y) and free ports, so it can run
beside the test suite.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests import harness

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
OUT_DIR = DOCS / "benchmarks"
T = TypeVar("T")
# Where plots and profiles go: docs/benchmarks/, or a scratch directory with --no-write.
_ARTIFACTS: list[Path] = [OUT_DIR]


def set_artifact_dir(path: Path) -> None:
    _ARTIFACTS[0] = path


def artifact(name: str) -> Path:
    _ARTIFACTS[0].mkdir(parents=True, exist_ok=True)
    return _ARTIFACTS[0] / name


def doc_link(path: Path) -> str:
    """A path as docs/benchmarks.md links it (relative to docs/), else absolute."""
    try:
        return str(path.relative_to(DOCS))
    except ValueError:
        return str(path)

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MiB = 1024 * 1024

# Loopback addresses per benchmark, away from the tests' 127.0.1.x / 127.0.7.7.
ADDR_TRANSLATION = "127.0.50.{}"
ADDR_PROPAGATION = "127.0.51.1"
ADDR_STATUS = "127.0.52.{}"
ADDR_CHURN = "127.0.53.1"
ADDR_DATAPLANE = "127.0.54.{}"

SERVICE_POOL = 100  # routes share this many backend Services (route i -> svc-(i % 100))


# --- numbers -------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, int(-(-p * len(ordered) // 100)))  # ceil(p/100 * n)
    return ordered[min(rank, len(ordered)) - 1]


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values),
        "min": min(values),
    }


def thirds(values: list[float]) -> tuple[float, float]:
    """Medians of the first and the last third of a series (does memory stay flat?)."""
    if not values:
        return float("nan"), float("nan")
    third = max(1, len(values) // 3)
    return statistics.median(values[:third]), statistics.median(values[-third:])


def flat_limit(first_third: float) -> float:
    """How much a memory series (MiB) may grow and still count as flat: 10 MiB or 5 %."""
    return max(10.0, 0.05 * first_third)


def check(target: str, measured: float | None, limit: float, unit: str, op: str = "<=",
          note: str = "") -> dict[str, Any]:
    """One target and whether the measured figure meets it."""
    if measured is None or measured != measured:  # None or NaN: not measured
        ok = False
    elif op == "<=":
        ok = measured <= limit
    elif op == ">=":
        ok = measured >= limit
    elif op == "==":
        ok = measured == limit
    else:
        raise ValueError(op)
    return {"target": target, "measured": measured, "limit": limit, "unit": unit, "op": op,
            "pass": ok, "note": note}


# --- manifests -------------------------------------------------------------------


def gateway_yaml(name: str, address: str, port: int, namespace: str = "default") -> str:
    return f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  gatewayClassName: lychgate
  addresses: [{{type: IPAddress, value: {address}}}]
  listeners:
    - name: http
      protocol: HTTP
      port: {port}
      allowedRoutes: {{namespaces: {{from: All}}}}
"""


def service_yaml(name: str, backend_port: int, namespace: str = "default") -> str:
    """A Service (port 80) and the EndpointSlice that points it at a loopback backend port."""
    return harness.service_yaml(name, 80, backend_port, namespace)


def route_name(i: int, prefix: str = "r") -> str:
    return f"{prefix}-{i:05d}"


def route_host(name: str) -> str:
    return f"{name}.bench.test"


def route_yaml(name: str, gateway: str, backend: str, namespace: str = "default",
               variant: int = 0) -> str:
    """The benchmark route: 1 hostname, 2 matches, 1 backend.

    `variant` changes the second match only (for "one route changed" updates).
    """
    return f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  parentRefs: [{{name: {gateway}}}]
  hostnames: [{route_host(name)}]
  rules:
    - matches:
        - path: {{type: PathPrefix, value: /}}
        - path: {{type: Exact, value: /v/{name}/{variant}}}
          headers: [{{name: x-bench, value: "{variant}"}}]
      backendRefs: [{{name: {backend}, port: 80}}]
"""


def path_route_yaml(name: str, gateway: str, host: str, path: str, backend: str,
                    namespace: str = "default") -> str:
    """One PathPrefix route in a shared hostname (for the 10,000 path routes case)."""
    return f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  parentRefs: [{{name: {gateway}}}]
  hostnames: [{host}]
  rules:
    - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]
      backendRefs: [{{name: {backend}, port: 80}}]
"""


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary name and rename: the watcher never sees half a file."""
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


# --- ports and waiting -----------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_free_on(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port_on(host: str) -> int:
    """A port free on `host` (a Gateway address) and on 127.0.0.1."""
    for _ in range(50):
        port = free_port()
        if port_free_on(host, port):
            return port
    raise RuntimeError(f"no free port on {host}")


def wait_for(check_fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05) -> T:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check_fn()
            if result:
                return result
        except Exception as err:
            last = err
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last error: {last!r}")


# --- HTTP probing ------------------------------------------------------------------


class Probe:
    """A keep-alive HTTP/1.1 client to one address (stdlib only, low overhead)."""

    def __init__(self, host: str, port: int, timeout: float = 2.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.conn: http.client.HTTPConnection | None = None

    def get(self, host_header: str, path: str = "/", headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """(status, body); status 0 with the error text when the connection failed."""
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request("GET", path, headers={"host": host_header, **(headers or {})})
                resp = self.conn.getresponse()
                body = resp.read()
                if resp.getheader("connection", "").lower() == "close":
                    self.close()
                return resp.status, body
            except (OSError, http.client.HTTPException) as err:
                self.close()
                # A keep-alive connection the server had closed fails before
                # anything is sent; any client retries that once. A second
                # failure is a real one.
                if attempt == 1 or not isinstance(err, http.client.RemoteDisconnected | BrokenPipeError |
                                                  ConnectionResetError):
                    return 0, repr(err).encode()
        return 0, b"unreachable"

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def pod_of(body: bytes) -> str | None:
    try:
        return str(json.loads(body).get("pod"))
    except (ValueError, AttributeError):
        return None


class BackgroundProber:
    """Requests to a few existing routes in a loop; counts every answer that is not 200.

    Bounded: it stops at stop() or after max_seconds, whichever comes first.
    """

    def __init__(self, address: str, port: int, hosts: list[str], interval: float = 0.01,
                 max_seconds: float = 3600, paths: list[str] | None = None) -> None:
        """`paths`: the path to ask each host for (default /)."""
        self.address, self.port, self.hosts = address, port, hosts
        self.paths = paths or ["/"] * len(hosts)
        self.interval, self.max_seconds = interval, max_seconds
        self.total = 0
        self.failures: list[tuple[float, str, int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bg-prober")

    def start(self) -> BackgroundProber:
        self._thread.start()
        return self

    def _run(self) -> None:
        probes = [Probe(self.address, self.port) for _ in self.hosts]
        deadline = time.monotonic() + self.max_seconds
        i = 0
        while not self._stop.is_set() and time.monotonic() < deadline:
            k = i % len(self.hosts)
            status, body = probes[k].get(self.hosts[k], self.paths[k])
            self.total += 1
            if status != 200:
                self.failures.append((time.time(), self.hosts[k] + self.paths[k], status,
                                      body[:200].decode(errors="replace")))
            i += 1
            self._stop.wait(self.interval)
        for p in probes:
            p.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


# --- processes ----------------------------------------------------------------------


@dataclass
class ProcSample:
    t: float  # seconds since the sampler started
    rss: int  # bytes (VmRSS)
    hwm: int  # bytes (VmHWM, the peak so far)
    cpu: float  # percent of one core over the last interval


def read_status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc/<pid>/stat."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Sampler:
    """Samples VmRSS, VmHWM and CPU of some processes every `interval` seconds."""

    def __init__(self, pids: dict[str, int], interval: float = 1.0, max_seconds: float = 3600) -> None:
        self.pids = pids
        self.interval, self.max_seconds = interval, max_seconds
        self.samples: dict[str, list[ProcSample]] = {k: [] for k in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="sampler")

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        start = time.monotonic()
        last = {k: (start, self._cpu(pid)) for k, pid in self.pids.items()}
        while not self._stop.is_set() and time.monotonic() - start < self.max_seconds:
            self._stop.wait(self.interval)
            now = time.monotonic()
            for k, pid in self.pids.items():
                try:
                    cpu = self._cpu(pid)
                    t0, c0 = last[k]
                    self.samples[k].append(ProcSample(
                        now - start, read_status_kb(pid, "VmRSS"), read_status_kb(pid, "VmHWM"),
                        100.0 * (cpu - c0) / max(now - t0, 1e-9)))
                    last[k] = (now, cpu)
                except (OSError, ValueError):
                    pass

    @staticmethod
    def _cpu(pid: int) -> float:
        try:
            return cpu_seconds(pid)
        except (OSError, ValueError):
            return 0.0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


class LychgateProc(harness.Lychgate):
    """The tests' `lychgate run` process, read through a raw keep-alive HTTP probe
    (lower and steadier latency than httpx when polling every few milliseconds)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.root = root
        self._api = Probe("127.0.0.1", int(self.admin.rsplit(":", 1)[1]), timeout=60)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def write(self, name: str, text: str) -> Path:
        path = self.manifests / name
        write_atomic(path, text)
        return path

    def start(self, *extra: str, directory: Path | None = None, timeout: float = 120) -> LychgateProc:
        super().start(*extra, directory=directory, timeout=timeout)
        return self

    def api(self, path: str) -> Any:
        status, body = self._api.get("127.0.0.1", path)
        if status != 200:
            raise RuntimeError(f"admin API {path}: {status} {body[:200]!r}")
        return json.loads(body)

    def objects(self, kind: str, namespace: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        q = f"/api/v1/objects?kind={kind}"
        if namespace:
            q += f"&namespace={namespace}"
        if name:
            q += f"&name={name}"
        return list(self.api(q)["items"])

    def proxies(self) -> dict[str, dict[str, Any]]:
        return {p["gateway"]: p for p in self.api("/api/v1/proxies")["items"]}

    def wait_programmed(self, gateway: str, namespace: str = "default", timeout: float = 60) -> None:
        def ok() -> bool:
            items = self.objects("Gateway", namespace, gateway)
            conds = (items[0].get("status") or {}).get("conditions", []) if items else []
            return any(c["type"] == "Programmed" and c["status"] == "True" for c in conds)

        wait_for(ok, timeout, f"Gateway {namespace}/{gateway} to be programmed", interval=0.1)

    def envoy_pid(self, gateway: str, namespace: str = "default") -> int | None:
        p = self.proxies().get(f"{namespace}/{gateway}")
        return int(p["pid"]) if p and p.get("pid") else None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self._api.close()
        return super().stop(sig) if self.process is not None else 0


@contextlib.contextmanager
def lychgate_process(prefix: str) -> Iterator[LychgateProc]:
    with tempfile.TemporaryDirectory(prefix=f"lychgate-bench-{prefix}-") as tmp:
        lg = LychgateProc(Path(tmp))
        try:
            yield lg
        finally:
            lg.stop()


class EchoProcs:
    """`lychgate echo` backends, each its own process (not competing with the probes' GIL)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, pod: str) -> int:
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "lychgate", "echo", "--port", str(port), "--pod", pod],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
        )
        self.procs.append(proc)
        probe = Probe("127.0.0.1", port)
        wait_for(lambda: probe.get("x")[0] == 200, 20, f"echo backend {pod}")
        probe.close()
        return port

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# --- wrk ----------------------------------------------------------------------------

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not m:
        raise ValueError(text)
    return float(m.group(1)) * _UNITS[m.group(2)]


@dataclass
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    non2xx: int
    socket_errors: int
    raw: str = field(repr=False, default="")
    control_plane_cpu: float = 0.0  # share of one core the control plane used meanwhile
    envoy_us: float = 0.0  # the proxy's own CPU per request (µs), where measured


def wrk(url: str, host: str, seconds: int, connections: int = 32, threads: int = 1) -> WrkResult:
    """wrk bounded by -d and a hard subprocess timeout; loopback URLs only."""
    assert re.match(r"http://127\.\d+\.\d+\.\d+:\d+/", url), url
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", "--timeout", "2s",
           "-H", f"Host: {host}", url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    reqs = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx_m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    err_m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = sum(int(g) for g in err_m.groups()) if err_m else 0
    return WrkResult(rps, p50, p99, reqs, int(non2xx_m.group(1)) if non2xx_m else 0, errors, out)


# --- machine facts ------------------------------------------------------------------


def _cmd(*args: str) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine_facts() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = next((l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("model name")), "?")
    mhz = next((l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("cpu MHz")), "?")
    try:
        from lychgate.deploy.local import envoy_binary

        envoy = _cmd(envoy_binary(), "--version")
        envoy = envoy.split("version:", 1)[-1].strip() if envoy else "?"
    except Exception as err:
        envoy = f"unavailable ({err})"
    try:
        from importlib.metadata import version

        lychgate_version = version("lychgate")
    except Exception:
        lychgate_version = "?"
    commit = _cmd("git", "-C", str(REPO), "rev-parse", "--short", "HEAD")
    dirty = bool(_cmd("git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "src"))
    return {
        "cpu_model": model,
        "cpu_mhz": mhz,
        "nproc": _cmd("nproc") or str(os.cpu_count()),
        "free": subprocess.run(["free", "-m"], capture_output=True, text=True, timeout=20).stdout.rstrip(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "envoy": envoy,
        "lychgate": lychgate_version,
        "commit": commit + (" + uncommitted changes in src/" if dirty else ""),
        "wrk": (_cmd("wrk", "--version") or _wrk_version_fallback()).splitlines()[0] if _which("wrk") else "not installed",
        "nginx": _nginx_version(),
    }


def _which(name: str) -> bool:
    import shutil

    return shutil.which(name) is not None


def _wrk_version_fallback() -> str:
    try:
        proc = subprocess.run(["wrk", "--version"], capture_output=True, text=True, timeout=10)
        return (proc.stdout + proc.stderr).strip() or "wrk"
    except (OSError, subprocess.TimeoutExpired):
        return "wrk"


def _nginx_version() -> str:
    import shutil

    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        return "not installed"
    proc = subprocess.run([nginx, "-v"], capture_output=True, text=True, timeout=10)
    return (proc.stderr or proc.stdout).strip().removeprefix("nginx version: ")


class MachineLoad:
    """CPU the rest of the machine used while a benchmark ran (other people's tests, say).

    Machine busy time (/proc/stat) minus this process and its reaped children
    (utime+stime+cutime+cstime of /proc/self/stat): valid when every process the
    benchmark started has been waited for, which each benchmark does.
    """

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.busy0, self.self0 = self._busy(), self._self()

    @staticmethod
    def _busy() -> float:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
        return (user + nice + system + irq + softirq + steal) / CLK_TCK

    @staticmethod
    def _self() -> float:
        raw = Path("/proc/self/stat").read_text()
        f = raw[raw.rindex(")") + 2:].split()
        return sum(int(x) for x in f[11:15]) / CLK_TCK

    def result(self) -> dict[str, float]:
        wall = time.monotonic() - self.t0
        busy, mine = self._busy() - self.busy0, self._self() - self.self0
        other = max(0.0, busy - mine)
        return {"wall_s": wall, "machine_busy_cores": busy / wall, "benchmark_cores": mine / wall,
                "other_cores": other / wall, "loadavg": Path("/proc/loadavg").read_text().split()[0]}


def safe_plots(fn: Callable[..., list[str]], *args: Any) -> list[str]:
    """Plots are a convenience: a plotting error must not lose the figures."""
    try:
        return fn(*args)
    except Exception as err:
        log(f"plot failed: {err!r}")
        return []


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)
