"""A control plane without proxies, for the many-proxies benchmark:
`python -m tests.bench.xds_controller DIR XDS_PORT`.

Everything of `lychgate run` that the proxies see runs as in local mode (files
→ FileSource → Store, the control loop, the ADS server on loopback), but no
Envoy is started: the benchmark's own delta-xDS clients connect instead, so the
process's CPU and memory are the controller's alone. Prints "ready" once the
first pass has built every snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
from pathlib import Path

from lychgate.controlplane import ControlPlane, builtin_class
from lychgate.settings import Settings
from lychgate.sources.files import FileSource
from lychgate.xds.cache import SnapshotCache
from lychgate.xds.server import AdsServer, start_server
from tests.no_proxies import NoProxies


async def main(directory: Path, port: int) -> None:
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    cache = SnapshotCache()
    ads = AdsServer(cache)
    server, _ = await start_server(ads, f"127.0.0.1:{port}")
    with tempfile.TemporaryDirectory(prefix="lychgate-bench-xds-") as state:
        cp = ControlPlane(Settings(state_dir=Path(state)), NoProxies(), cache=cache, ads=ads)  # type: ignore[arg-type]
        source = FileSource(directory, cp.store)
        cp.store.upsert(builtin_class())
        source.load_all()
        await cp.sync_once()
        print("ready", flush=True)
        tasks = [asyncio.create_task(cp.run(stop)), asyncio.create_task(source.watch(stop))]
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await server.stop(grace=1)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
