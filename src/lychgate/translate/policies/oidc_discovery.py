"""OpenID provider discovery for OAuth2 extensions that name only an `issuerURI`.

`<issuer>/.well-known/openid-configuration` tells the authorization, token and
end-session endpoints. Translation must not wait on the network, so lookup()
answers from a cache and, when the issuer is not known yet (or its entry is
old), starts a fetch on the control plane's event loop and says so
(Unresolved: the routes fail closed meanwhile). When the fetch ends, the
extensions that asked are poked in the store, and the next pass uses the
result. A failed fetch is retried with backoff; a known document is refreshed
in the background and kept in use meanwhile.

The fetch trusts what the proxy trusts on its way to the provider: the TLS of
the extension's backend (a BackendTLSPolicy on the provider's Service: its CA,
its hostname asked for by SNI and checked with its subjectAltNames), else the
system's CAs and the issuer's host name.
"""

from __future__ import annotations

import asyncio
import ssl
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.log import component_logger
from lychgate.store import Store
from lychgate.translate.values import Unresolved

if TYPE_CHECKING:
    import httpx

log = component_logger("translate")

REFRESH_S = 15 * 60.0
RETRY_S = (1.0, 2.0, 5.0, 10.0, 30.0)
FETCH_TIMEOUT_S = 5.0


@dataclass
class _Entry:
    doc: dict[str, Any] | None = None
    error: str | None = None
    fetched: float = 0.0
    failures: int = 0
    fetching: bool = False
    task: asyncio.Task[None] | None = None  # kept: the loop holds tasks only weakly
    waiting: set[ObjectKey] = field(default_factory=set)  # extensions to poke when it ends


# Per store (one per control plane): what each issuer's discovery found, per trust.
_CACHES: weakref.WeakKeyDictionary[Store, dict[tuple[str, ir.UpstreamTLS | None], _Entry]] = \
    weakref.WeakKeyDictionary()


def discovery_url(issuer: str) -> str:
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


def lookup(store: Store, issuer: str, asker: ObjectKey, tls: ir.UpstreamTLS | None = None) -> dict[str, Any]:
    """The issuer's discovery document, fetched with `tls` (the proxy's TLS to the
    provider; None: the system's CAs); raises Unresolved while it is not known."""
    entry = _CACHES.setdefault(store, {}).setdefault((issuer, tls), _Entry())
    stale = entry.doc is not None and time.monotonic() - entry.fetched > REFRESH_S
    if entry.doc is None or stale:
        _start(entry, store, issuer, asker, tls)
    if entry.doc is not None:
        return entry.doc
    if entry.error is not None:
        raise Unresolved("DiscoveryFailed", f"discovering the endpoints of issuer {issuer} failed "
                                            f"({entry.error}); retrying")
    raise Unresolved("DiscoveryPending", f"discovering the endpoints of issuer {issuer} "
                                         f"({discovery_url(issuer)})")


def _start(entry: _Entry, store: Store, issuer: str, asker: ObjectKey, tls: ir.UpstreamTLS | None) -> None:
    entry.waiting.add(asker)
    if entry.fetching:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # translation outside the control plane (a test, `lychgate check`): nothing to wait for
    entry.fetching = True
    entry.task = loop.create_task(_fetch(entry, store, issuer, tls))


def _context(tls: ir.UpstreamTLS, scratch: Path) -> ssl.SSLContext:
    """The proxy's trust as an SSL context; names are checked by _check_names."""
    context = ssl.create_default_context(cadata=tls.ca) if tls.ca else ssl.create_default_context()
    context.check_hostname = False
    if not tls.verify:
        context.verify_mode = ssl.CERT_NONE
    if tls.client_certificate is not None:  # the Gateway's own certificate (spec.tls.backend)
        (scratch / "cert.pem").write_text(tls.client_certificate.chain)
        (scratch / "key.pem").write_text(tls.client_certificate.key)
        context.load_cert_chain(scratch / "cert.pem", scratch / "key.pem")
    return context


def _name_matches(pattern: str, name: str) -> bool:
    pattern, name = pattern.lower().rstrip("."), name.lower().rstrip(".")
    if pattern.startswith("*."):
        return "." in name and name.split(".", 1)[1] == pattern[2:]
    return pattern == name


def _check_names(tls: ir.UpstreamTLS, resp: httpx.Response) -> None:
    """The certificate must carry one of the names the proxy checks (as Envoy's SAN matchers do)."""
    if not tls.verify:
        return
    stream = resp.extensions.get("network_stream")
    ssl_object = stream.get_extra_info("ssl_object") if stream is not None else None
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    if not cert:
        raise ValueError("the provider's certificate could not be read")
    sans = cert.get("subjectAltName", ())
    dns = [v for k, v in sans if k == "DNS"]
    uris = [v for k, v in sans if k == "URI"]
    for kind, want in tls.sans:
        if (kind == "URI" and want in uris) or (kind != "URI" and any(_name_matches(d, want) for d in dns)):
            return
    raise ValueError(f"the provider's certificate names {', '.join(dns + uris) or 'nothing'}, "
                     f"not {', '.join(v for _, v in tls.sans)}")


async def _get(issuer: str, tls: ir.UpstreamTLS | None) -> httpx.Response:
    import httpx  # with its CLI's rich and click, 7 MiB a controller without OIDC does without

    url = discovery_url(issuer)
    if tls is None or not url.startswith("https:"):
        async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_S, follow_redirects=True) as client:
            return await client.get(url)
    with tempfile.TemporaryDirectory(prefix="lychgate-oidc-") as scratch:
        async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_S, verify=_context(tls, Path(scratch))) as client:
            # No redirects: a redirect elsewhere would leave the provider this trust is for.
            resp = await client.get(url, extensions={"sni_hostname": tls.sni} if tls.sni else {})
            _check_names(tls, resp)
            return resp


async def _fetch(entry: _Entry, store: Store, issuer: str, tls: ir.UpstreamTLS | None) -> None:
    import httpx  # see _get

    try:
        resp = await _get(issuer, tls)
        resp.raise_for_status()
        doc = resp.json()
        if not isinstance(doc, dict):
            raise ValueError("the discovery document is not a JSON object")
        entry.doc, entry.error, entry.failures, entry.fetched = doc, None, 0, time.monotonic()
        log.info("discovered the endpoints of OIDC issuer %s", issuer)
    except (httpx.HTTPError, ValueError, ssl.SSLError) as err:
        entry.error, entry.failures = str(err) or type(err).__name__, entry.failures + 1
        delay = RETRY_S[min(entry.failures, len(RETRY_S)) - 1]
        log.warning("discovering OIDC issuer %s failed: %s; retrying in %.0fs", issuer, entry.error, delay)
        asyncio.get_running_loop().call_later(delay, lambda: _retry(entry, store, issuer, tls))
    finally:
        entry.fetching = entry.error is not None  # then a retry is scheduled
        for key in sorted(entry.waiting):
            store.poke(key)


def _retry(entry: _Entry, store: Store, issuer: str, tls: ir.UpstreamTLS | None) -> None:
    entry.task = asyncio.get_running_loop().create_task(_fetch(entry, store, issuer, tls))
