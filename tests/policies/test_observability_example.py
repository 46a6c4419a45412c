"""examples/observability does what docs/observability.md says, with its own collector and real Envoy.

The example is copied with its fixed ports (echo 3000, collector 4317), address
(127.0.2.4) and error log path replaced by free ones; everything else is as shipped.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from lychgate.controlplane import builtin_class
from lychgate.sources.files import FileSource
from lychgate.store import Store
from lychgate.translate.gateway import translate
from tests.harness import EchoBackends, Lychgate, free_port, wait_for

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "observability"


def test_example_loads_and_its_policy_applies() -> None:
    store = Store()
    store.upsert(builtin_class())
    source = FileSource(EXAMPLE, store)
    source.load_all()
    assert source.all_problems() == []
    status = translate(store, lambda gw: "127.0.2.4").status
    policy = next(st for key, st in status.items() if key.kind == "ListenerPolicy")
    conds = {c["type"]: c for c in policy["conditions"]}
    assert conds["Accepted"]["status"] == "True" and conds["Applied"]["status"] == "True", conds
    assert (EXAMPLE / "README.md").exists()


@pytest.mark.e2e
def test_observability_example(tmp_path: Path, backends: EchoBackends) -> None:
    root = tmp_path / "observability"
    shutil.copytree(EXAMPLE, root)
    address = f"127.0.{random.randint(100, 250)}.{random.randint(2, 250)}"
    collector_port, errors = free_port(), tmp_path / "errors.json"
    replacements = {"3000": str(backends.start("echo")), "127.0.2.4": address, "4317": str(collector_port),
                    "/tmp/lychgate-observe-errors.json": str(errors)}
    for path in root.glob("*.yaml"):
        text = path.read_text()
        for old, new in replacements.items():
            text = text.replace(old, new)
        path.write_text(text)
    printed = tmp_path / "collector.out"
    collector = subprocess.Popen([sys.executable, str(root / "collector.py"), "--port", str(collector_port)],
                                 stdout=printed.open("wb"), stderr=subprocess.STDOUT)
    lg = Lychgate(tmp_path / "run")
    try:
        lg.start(directory=root)
        lg.address("observe")

        def curl(host: str, path: str, **headers: str) -> httpx.Response:
            return httpx.get(f"http://{address}:8080{path}", headers={"host": host, "connection": "close", **headers},
                             timeout=5)

        assert curl("app.example.com", "/healthz").status_code == 200  # answered by Envoy
        assert curl("nowhere.example.com", "/missing").status_code == 404

        def exported() -> bool:
            for i in range(5):  # Envoy sends spans five at a time (or every 5 s)
                assert curl("app.example.com", f"/hello/{i}", **{"x-tenant": "acme"}).status_code == 200
            out = printed.read_text()
            return "log  GET app.example.com/hello/4 -> 200" in out and "span observe-gateway" in out

        wait_for(exported, 20, "the collector to print log records and spans")
        out = printed.read_text()
        assert "tenant=acme" in out and "-> 200" in out

        # Envoy writes its access logs out every second.
        shown = wait_for(lambda: (s := lg.cli("logs", "observe", "--access").stdout) and "/hello/4" in s and s,
                         10, "lychgate logs --access to show the requests")
        assert '"GET /hello/4 HTTP/1.1" 200' in shown and '"GET /missing HTTP/1.1" 404 NR' in shown
        wait_for(errors.exists, 10, "the JSON error log")
        records = [json.loads(line) for line in errors.read_text().splitlines()]
        assert [(r["path"], r["status"], r["flags"]) for r in records] == [("/missing", 404, "NR")]
    finally:
        lg.close()
        collector.terminate()
        collector.wait(5)
