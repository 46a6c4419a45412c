"""The Gateway API `options` map of TLS: a Gateway listener's `tls.options` and a
BackendTLSPolicy's `spec.options`, read as kgateway reads them.

Keys are taken under `gateway.lychgate.dev/` and, so that kgateway manifests work
unchanged, `kgateway.dev/` (same names, same values); keys under any other prefix
belong to someone else and are left alone. An unknown key under ours, or a value
Envoy would refuse, is an `OptionError` naming the key: the listener or policy is
refused instead of serving TLS other than asked.

The names Envoy accepts for cipher suites, curves and signature algorithms were
measured with `envoy --mode validate` on the Envoy this project runs (BoringSSL);
tests/unit/test_tls_options.py checks the lists against that Envoy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from lychgate import ir

PREFIXES = ("gateway.lychgate.dev/", "kgateway.dev/")
VERSIONS = ("1.0", "1.1", "1.2", "1.3")
# kgateway's value for "no ALPN at all" (otherwise a listener offers h2 and http/1.1).
ALPN_NONE = "allow-empty"

# TLS 1.2-and-older suites (TLS 1.3's are not configurable in BoringSSL): IANA and OpenSSL names.
CIPHER_SUITES = frozenset({
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_PSK_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-PSK-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_PSK_WITH_AES_128_CBC_SHA", "ECDHE-PSK-AES128-CBC-SHA",
    "TLS_ECDHE_PSK_WITH_AES_256_CBC_SHA", "ECDHE-PSK-AES256-CBC-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA", "DES-CBC3-SHA",
    "TLS_PSK_WITH_AES_128_CBC_SHA", "PSK-AES128-CBC-SHA",
    "TLS_PSK_WITH_AES_256_CBC_SHA", "PSK-AES256-CBC-SHA",
})
# Curve names and the group each is (Envoy refuses a list naming one group twice).
CURVE_GROUPS = {"X25519": "X25519", "x25519": "X25519", "X25519MLKEM768": "X25519MLKEM768", "MLKEM1024": "MLKEM1024",
                "P-256": "P-256", "prime256v1": "P-256", "P-384": "P-384", "secp384r1": "P-384",
                "P-521": "P-521", "secp521r1": "P-521"}
ECDH_CURVES = frozenset(CURVE_GROUPS)
SIGNATURE_ALGORITHMS = frozenset({
    "ecdsa_secp256r1_sha256", "ecdsa_secp384r1_sha384", "ecdsa_secp521r1_sha512", "ecdsa_sha1",
    "rsa_pss_rsae_sha256", "rsa_pss_rsae_sha384", "rsa_pss_rsae_sha512",
    "rsa_pkcs1_sha256", "rsa_pkcs1_sha384", "rsa_pkcs1_sha512", "rsa_pkcs1_sha1",
    "ed25519", "mldsa44", "mldsa65", "mldsa87",
})
# A SHA-256 certificate fingerprint: 64 hex digits, bare or as 32 colon-separated pairs.
_HASH = re.compile(r"[0-9A-Fa-f]{64}|[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){31}")

Side = Literal["listener", "backend"]


class OptionError(ValueError):
    """A TLS option that cannot be honoured; the message names the key."""


@dataclass(frozen=True)
class TLSOptions:
    """What an options map asks for. `alpn` None: the defaults of whoever uses it."""

    params: ir.TLSParams | None = None
    alpn: tuple[str, ...] | None = None
    sans: tuple[str, ...] = ()
    certificate_hashes: tuple[str, ...] = ()


def _list(key: str, value: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(","))
    if not all(items):
        raise OptionError(f"{key}: {value!r} is not a comma-separated list of names")
    return items


def _names(known: frozenset[str], what: str, groups: bool = False) -> Callable[[str, str], tuple[str, ...]]:
    """A list of names from `known`; `groups`: BoringSSL's equal-preference groups
    `[A|B]` of cipher suites too, when each member is known."""
    def ok(item: str) -> bool:
        if groups and item.startswith("[") and item.endswith("]"):
            return all(m in known for m in item[1:-1].split("|"))
        return item in known

    def parse(key: str, value: str) -> tuple[str, ...]:
        items = _list(key, value)
        unknown = [v for v in items if not ok(v)]
        if unknown:
            raise OptionError(f"{key}: Envoy knows no {what} {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return items
    return parse


def _curves(key: str, value: str) -> tuple[str, ...]:
    items = _names(ECDH_CURVES, "curve")(key, value)
    groups = [CURVE_GROUPS[c] for c in items]
    twice = sorted({g for g in groups if groups.count(g) > 1})
    if twice:
        raise OptionError(f"{key}: names {', '.join(twice)} more than once (Envoy refuses that)")
    return items


def _version(key: str, value: str) -> str:
    if value not in VERSIONS:
        raise OptionError(f"{key}: {value!r} is not a TLS version; use one of {', '.join(VERSIONS)}")
    return value


def _hashes(key: str, value: str) -> tuple[str, ...]:
    # kgateway also separates fingerprints with "-" (a YAML-list look); a fingerprint has none.
    items = tuple(h.strip() for part in value.split(",") for h in part.split("-") if h.strip())
    bad = [h for h in items if not _HASH.fullmatch(h)]
    if bad or not items:
        raise OptionError(f"{key}: {', '.join(bad) or repr(value)} is not a SHA-256 certificate fingerprint "
                          "(64 hex digits, optionally as colon-separated pairs)")
    return items


def _alpn(key: str, value: str) -> tuple[str, ...]:
    return () if value.strip() == ALPN_NONE else _list(key, value)


_PARSERS: dict[str, Callable[[str, str], object]] = {
    "alpn-protocols": _alpn,
    "cipher-suites": _names(CIPHER_SUITES, "cipher suite", groups=True),
    "ecdh-curves": _curves,
    "signature-algorithms": _names(SIGNATURE_ALGORITHMS, "signature algorithm"),
    "min-tls-version": _version,
    "max-tls-version": _version,
    "verify-subject-alt-names": _list,
    "verify-certificate-hash": _hashes,
}
# A BackendTLSPolicy's names come from validation.hostname / subjectAltNames: more
# names through an option would widen what is trusted (kgateway refuses it too).
_LISTENER_ONLY = frozenset({"verify-subject-alt-names"})


def parse(options: Mapping[str, str], side: Side, path: str) -> TLSOptions:
    """The TLS options of `options` (keys under PREFIXES); `path` prefixes messages."""
    values: dict[str, object] = {}
    errors: list[str] = []
    for key in sorted(options):
        prefix = next((p for p in PREFIXES if key.startswith(p)), None)
        if prefix is None:
            continue
        name = key.removeprefix(prefix)
        where = f"{path}[{key}]"
        if name not in _PARSERS or (side == "backend" and name in _LISTENER_ONLY):
            known = sorted(n for n in _PARSERS if side == "listener" or n not in _LISTENER_ONLY)
            errors.append(f"{where}: unknown TLS option; known: {', '.join(known)}")
            continue
        if name in values:
            errors.append(f"{where}: set twice (under {' and '.join(PREFIXES)})")
            continue
        try:
            values[name] = _PARSERS[name](where, options[key])
        except OptionError as e:
            errors.append(str(e))
    low, high = values.get("min-tls-version"), values.get("max-tls-version")
    if isinstance(low, str) and isinstance(high, str) and high < low:
        errors.append(f"{path}: max-tls-version {high} is below min-tls-version {low}")
    if errors:
        raise OptionError("; ".join(errors))
    return _options(values, side)


def _options(values: Mapping[str, object], side: Side) -> TLSOptions:
    def names(name: str) -> tuple[str, ...]:
        v = values.get(name, ())
        assert isinstance(v, tuple)
        return v

    low, high = values.get("min-tls-version"), values.get("max-tls-version")
    assert low is None or isinstance(low, str)
    assert high is None or isinstance(high, str)
    if side == "backend" and low == "1.3" and high is None:
        high = "1.3"  # Envoy's client maximum defaults to 1.2: a 1.3 minimum alone would be no range at all
    params = ir.TLSParams(min_version=low, max_version=high, cipher_suites=names("cipher-suites"),
                          ecdh_curves=names("ecdh-curves"), signature_algorithms=names("signature-algorithms"))
    alpn = values.get("alpn-protocols")
    assert alpn is None or isinstance(alpn, tuple)
    return TLSOptions(params=params if params != ir.TLSParams() else None, alpn=alpn,
                      sans=names("verify-subject-alt-names"), certificate_hashes=names("verify-certificate-hash"))
