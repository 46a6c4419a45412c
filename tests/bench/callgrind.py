"""Envoy's instructions per request under callgrind: the measure of the *_cost scripts.

One Envoy (one worker) runs a static bootstrap under valgrind's callgrind;
requests go over one keep-alive connection until it answers, 200 more warm it
up, the counters are zeroed, `requests` are sent and the counters dumped. The
total over all threads divided by `requests`: deterministic up to a few
hundred instructions, so it tells apart what wrk on a shared machine cannot.
"""

from __future__ import annotations

import glob
import http.client
import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lychgate.deploy.local import envoy_binary

Send = Callable[[http.client.HTTPConnection], int]  # sends one request, returns its status


def instructions_per_request(directory: Path, name: str, bootstrap: dict[str, Any], port: int, requests: int,
                             send_one: Send, env: dict[str, str] | None = None) -> float:
    config = directory / f"{name}.json"
    config.write_text(json.dumps(bootstrap))
    out, log = directory / f"{name}.callgrind", directory / f"{name}.log"
    envoy = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", envoy_binary(),
                              "-c", str(config), "--concurrency", "1", "--disable-hot-restart",
                              "--base-id", str(port), "-l", "error"],
                             stderr=log.open("w"), env=env)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def send(n: int) -> None:
            for _ in range(n):
                status = send_one(conn)
                if status != 200:
                    raise RuntimeError(f"{name}: answered {status}")

        deadline = time.monotonic() + 300
        while True:
            try:
                send(1)
                break
            except OSError:
                conn.close()
                if time.monotonic() > deadline or envoy.poll() is not None:
                    raise RuntimeError(f"{name}: Envoy did not start: {log.read_text()[-2000:]}") from None
                time.sleep(1)
        send(200)
        subprocess.run(["callgrind_control", "-z", str(envoy.pid)], capture_output=True, check=True)
        send(requests)
        subprocess.run(["callgrind_control", "-d", str(envoy.pid)], capture_output=True, check=True)
        total = 0
        for dump in glob.glob(f"{out}.*"):
            found = re.search(r"^(?:summary|totals): (\d+)", Path(dump).read_text(), re.M)
            total += int(found.group(1)) if found else 0
        return total / requests
    finally:
        envoy.terminate()
        envoy.wait(60)
