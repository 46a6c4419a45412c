"""The policy examples do what their READMEs say, with their own servers and real Envoy.

Each example is copied with its fixed ports (echo 3000, services 9001/9002) and
address (127.0.2.x) replaced by free ones, so the test never collides with a
quickstart someone is running; everything else is the example as shipped.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lychgate.api.base import ObjectKey
from lychgate.controlplane import builtin_class
from lychgate.sources.files import FileSource
from lychgate.store import Store
from lychgate.translate.gateway import translate
from tests.harness import EchoBackends, Lychgate, free_port, wait_for
from tests.policies.test_oauth2 import ToGateway

EXAMPLES = Path(__file__).parent.parent.parent / "examples"
CASES = {"ext-auth": ("authz.py", 9001), "ext-proc": ("processor.py", 9002), "transformation": (None, None),
         "jwt-auth": (None, None), "basic-auth": (None, None), "api-key-auth": (None, None),
         "rbac": (None, None), "csrf": (None, None),
         "acl": (None, None), "oauth2": ("provider.py", 9003),
         "backends": (None, None)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_loads_and_every_policy_applies(name: str) -> None:
    store = Store()
    store.upsert(builtin_class())
    source = FileSource(EXAMPLES / name, store)
    source.load_all()
    assert source.all_problems() == []
    status = translate(store, lambda gw: "127.0.2.1").status
    policies = {k: v for k, v in status.items() if k.kind == "TrafficPolicy"}
    assert policies
    # An OIDC issuer is discovered by the running control plane (its example test logs
    # in); translated alone, here, the endpoints are still being discovered.
    pending = "DiscoveryPending"
    for key, st in policies.items():
        conds = {c["type"]: c for c in st["conditions"]}
        assert conds["Accepted"]["status"] == "True", (key, conds["Accepted"])
        assert conds["Applied"]["status"] == "True" or conds["Applied"]["reason"] == pending, (key, conds["Applied"])
    for key in (k for k in status if k.kind == "GatewayExtension"):
        assert all(c["status"] == "True" or c["reason"] == pending for c in status[key]["conditions"]), status[key]
    assert (EXAMPLES / name / "README.md").exists()


class Example:
    def __init__(self, name: str, root: Path, backends: EchoBackends) -> None:
        self.dir = root / name
        shutil.copytree(EXAMPLES / name, self.dir)
        echo = self.echo_port = backends.start("echo")
        self.address = f"127.0.{random.randint(100, 250)}.{random.randint(2, 250)}"
        script, port = CASES[name]
        self.server: subprocess.Popen[bytes] | None = None
        # 127.0.2.10 before 127.0.2.1: the longer address first.
        replacements = {"3000": str(echo), **{f"127.0.2.{n}": self.address for n in range(19, 0, -1)}}
        if script and port:
            server_port = free_port()
            replacements[str(port)] = str(server_port)
            self.server = subprocess.Popen([sys.executable, str(self.dir / script), "--port", str(server_port)],
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for path in self.dir.glob("*.yaml"):
            text = path.read_text()
            for old, new in replacements.items():
                text = text.replace(old, new)
            path.write_text(text)
        self.lg = Lychgate(root / "run")
        self.lg.start(directory=self.dir)
        self.lg.address(next(k.name for k in self._gateways()))

    def _gateways(self) -> list[ObjectKey]:
        return [ObjectKey("Gateway", o["metadata"]["namespace"], o["metadata"]["name"])
                for o in self.lg.objects("Gateway")]

    def curl(self, host: str, path: str, **kwargs: object) -> httpx.Response:
        headers = {"host": host, "connection": "close", **kwargs.pop("headers", {})}  # type: ignore[dict-item]
        return httpx.request(kwargs.pop("method", "GET"), f"http://{self.address}:8080{path}",  # type: ignore[arg-type]
                             headers=headers, timeout=5, **kwargs)  # type: ignore[arg-type]

    def close(self) -> None:
        self.lg.close()
        if self.server is not None:
            self.server.terminate()
            self.server.wait(5)


@pytest.fixture
def example(request: pytest.FixtureRequest, tmp_path: Path, backends: EchoBackends) -> Iterator[Example]:
    ex = Example(request.param, tmp_path, backends)
    yield ex
    ex.close()


def headers_seen(resp: httpx.Response) -> dict[str, list[str]]:
    return dict(json.loads(resp.text)["headers"])


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["ext-auth"], indirect=True)
def test_ext_auth_example(example: Example) -> None:
    host = "app.example.com"
    denied = wait_for(lambda: (r := example.curl(host, "/private")).status_code == 403 and r, 10, "auth to deny")
    assert denied.text == "forbidden: send Authorization: Bearer letmein\n"
    assert denied.headers["x-auth-reason"] == "missing or unknown bearer token"
    ok = example.curl(host, "/private", headers={"authorization": "Bearer letmein"})
    assert ok.status_code == 200 and headers_seen(ok)["X-User"] == ["ada"]
    assert "Authorization" not in headers_seen(ok)
    assert example.curl(host, "/public/page").status_code == 200
    out = example.lg.cli("get", "trafficpolicies").stdout
    assert out.split("\n")[0].split() == ["NAME", "ACCEPTED", "APPLIED", "TARGETS", "AGE"]
    assert "HTTPRoute/app:public" in out


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["ext-proc"], indirect=True)
def test_ext_proc_example(example: Example) -> None:
    host = "proc.example.com"
    resp = wait_for(lambda: (r := example.curl(host, "/hello")).headers.get("x-processed") == "true" and r,
                    10, "the processor to see responses")
    assert headers_seen(resp)["X-Processed-By"] == ["example"]
    blocked = example.curl(host, "/hello", headers={"x-block": "1"})
    assert blocked.status_code == 403 and blocked.text == "blocked by the external processor\n"
    plain = example.curl(host, "/plain")
    assert "x-processed" not in plain.headers and "X-Processed-By" not in headers_seen(plain)


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["transformation"], indirect=True)
def test_transformation_example(example: Example) -> None:
    host = "transform.example.com"
    resp = wait_for(lambda: (r := example.curl(host, "/orders?page=2", method="POST", content=b'{"user": {"name": "ada"}}',
                                               headers={"x-debug": "1"})).headers.get("x-asked-for") and r,
                    10, "the transformation to apply")
    assert resp.headers["x-asked-for"] == "/orders"
    out = json.loads(resp.text)
    assert out["request"] == {"path": "/orders", "page": "2"}
    assert out["backend"] == {"pod": "echo", "saw_user": "ada"}
    seen = out["original"]["headers"]
    assert seen["X-User"] == ["ada"] and seen["X-Order"] == ["POST /orders page 2"]
    assert seen["X-Client"][0].startswith("agent=python-httpx")
    assert "X-Debug" not in seen


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["jwt-auth"], indirect=True)
def test_jwt_auth_example(example: Example) -> None:
    spec = importlib.util.spec_from_file_location("mint", EXAMPLES / "jwt-auth" / "mint.py")
    assert spec is not None and spec.loader is not None
    mint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mint)
    host = "jwt.example.com"
    missing = wait_for(lambda: (r := example.curl(host, "/api/orders")).status_code == 401 and r, 10, "jwtAuth")
    assert missing.text == "Jwt is missing"
    ok = example.curl(host, "/api/orders", headers={"authorization": f"Bearer {mint.mint('ada')}"})
    assert ok.status_code == 200 and headers_seen(ok)["X-User"] == ["ada"]
    assert "Authorization" not in headers_seen(ok)
    other = example.curl(host, "/api/orders", headers={"authorization": f"Bearer {mint.mint('ada', 'other')}"})
    assert (other.status_code, other.text) == (403, "Audiences in Jwt are not allowed")
    assert example.curl(host, "/").status_code == 200


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["basic-auth"], indirect=True)
def test_basic_auth_example(example: Example) -> None:
    host = "basic.example.com"
    wait_for(lambda: example.curl(host, "/api").status_code == 401, 10, "basic auth to apply")
    alice = {"authorization": "Basic " + base64.b64encode(b"alice:wonderland").decode()}
    ok = example.curl(host, "/api", headers=alice)
    assert ok.status_code == 200 and headers_seen(ok)["X-Envoy-Basic-Auth-User"] == ["alice"]
    guess = {"authorization": "Basic " + base64.b64encode(b"alice:guess").decode()}
    assert example.curl(host, "/api", headers=guess).status_code == 401
    assert example.curl(host, "/").status_code == 200


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["api-key-auth"], indirect=True)
def test_api_key_auth_example(example: Example) -> None:
    host = "keys.example.com"
    missing = wait_for(lambda: (r := example.curl(host, "/api")).status_code == 401 and r, 10, "API keys")
    assert missing.text == "Client authentication failed."
    ok = example.curl(host, "/api", headers={"x-api-key": "key-frontend-1234"})
    assert ok.status_code == 200 and headers_seen(ok)["X-Client-Id"] == ["web-frontend"]
    assert "X-Api-Key" not in headers_seen(ok)
    by_query = example.curl(host, "/api?api_key=key-batch-5678")
    assert by_query.status_code == 200 and headers_seen(by_query)["X-Client-Id"] == ["batch-jobs"]


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["rbac"], indirect=True)
def test_rbac_example(example: Example) -> None:
    host = "rbac.example.com"
    denied = wait_for(lambda: (r := example.curl(host, "/api")).status_code == 403 and r, 10, "rbac to apply")
    assert denied.text == "RBAC: access denied"
    assert example.curl(host, "/api", headers={"x-role": "admin"}).status_code == 200
    assert example.curl(host, "/page", method="DELETE").status_code == 403
    assert example.curl(host, "/page").status_code == 200


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["csrf"], indirect=True)
def test_csrf_example(example: Example) -> None:
    host = "csrf.example.com"

    def post(origin: str) -> httpx.Response:
        return example.curl(host, "/api", method="POST", content=b"x=1", headers={"origin": origin})

    refused = wait_for(lambda: (r := post("https://evil.test")).status_code == 403 and r, 10, "csrf to apply")
    assert refused.text == "Invalid origin"
    assert post("https://shop.example.com").status_code == 200
    assert example.curl(host, "/api", headers={"origin": "https://evil.test"}).status_code == 200


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["acl"], indirect=True)
def test_acl_example(example: Example) -> None:
    host = "acl.example.com"
    wait_for(lambda: example.curl(host, "/api").status_code == 200, 10, "the route to serve loopback clients")
    url = f"http://{example.address}:8080/api"
    # 127.0.0.66: denied by the more specific rule (curl --interface 127.0.0.66)
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.66"), timeout=5) as client:
        denied = wait_for(lambda: (r := client.get(url, headers={"host": host})).status_code == 403 and r, 10,
                          "the quarantined address to be denied")
    assert denied.text == "access denied\n"


@pytest.mark.e2e
@pytest.mark.parametrize("example", ["oauth2"], indirect=True)
def test_oauth2_example(example: Example) -> None:
    # curl -k: the example's certificate is self-signed
    transport = ToGateway(example.address, verify=False)
    with httpx.Client(transport=transport, follow_redirects=True, timeout=10) as browser:
        page = wait_for(lambda: (r := browser.get("https://shop.example.com:8443/orders")).status_code == 200
                        and r, 15, "the login to complete")
        assert [r.status_code for r in page.history] == [302, 302, 302]
        assert headers_seen(page)["Authorization"][0].startswith("Bearer access-for-ada-")
        assert browser.get("https://shop.example.com:8443/other").history == []  # the session cookie
        out = browser.get("https://shop.example.com:8443/logout")
        assert out.text == "ada is signed out of the provider\n"
@pytest.mark.parametrize("example", ["backends"], indirect=True)
def test_backends_example(example: Example) -> None:
    echo = wait_for(lambda: (r := example.curl("echo.example.com", "/", headers={"accept-encoding": "gzip"}))
                    .status_code == 200 and r, 10, "the echo route")
    assert echo.headers["content-encoding"] == "gzip" and json.loads(echo.text)["pod"] == "echo"
    legacy = wait_for(lambda: (r := example.curl("legacy.example.com", "/v2/orders")).status_code == 200 and r,
                      10, "the static Backend")
    assert json.loads(legacy.text)["pod"] == "echo"
    retired = example.curl("legacy.example.com", "/v1/orders")
    assert (retired.status_code, retired.text) == (410, "v1 is retired; use /v2\n")
    egress = example.curl(f"localhost:{example.echo_port}", "/anything")
    assert egress.status_code == 200 and json.loads(egress.text)["path"] == "/anything"
    out = example.lg.cli("get", "backendconfigpolicies").stdout
    assert out.split("\n")[0].split() == ["NAME", "ACCEPTED", "ATTACHED", "TARGETS", "AGE"], out
    assert out.split("\n")[1].split()[:4] == ["echo", "True", "True", "Service/echo"], out
