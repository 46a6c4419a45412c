"""OpenID provider discovery for OAuth2 extensions that name only an `issuerURI`.

`<issuer>/.well-known/openid-configuration` tells the authorization, token and
end-session endpoints. Translation must not wait on the network, so lookup()
answers from a cache and, when the issuer is not known yet (or its entry is
old), starts a fetch on the control plane's event loop and says so
(Unresolved: the routes fail closed meanwhile). When the fetch ends, the
extensions that asked are poked in the store, and the next pass uses the
result. A failed fetch is retried with backoff; a known document is refreshed
in the background and kept in use meanwhile.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import httpx

from lychgate.api.base import ObjectKey
from lychgate.log import component_logger
from lychgate.store import Store
from lychgate.translate.policies.common import Unresolved

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


# Per store (one per control plane): what each issuer's discovery found.
_CACHES: weakref.WeakKeyDictionary[Store, dict[str, _Entry]] = weakref.WeakKeyDictionary()


def discovery_url(issuer: str) -> str:
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


def lookup(store: Store, issuer: str, asker: ObjectKey) -> dict[str, Any]:
    """The issuer's discovery document; raises Unresolved while it is not known."""
    entry = _CACHES.setdefault(store, {}).setdefault(issuer, _Entry())
    stale = entry.doc is not None and time.monotonic() - entry.fetched > REFRESH_S
    if entry.doc is None or stale:
        _start(entry, store, issuer, asker)
    if entry.doc is not None:
        return entry.doc
    if entry.error is not None:
        raise Unresolved("DiscoveryFailed", f"discovering the endpoints of issuer {issuer} failed "
                                            f"({entry.error}); retrying")
    raise Unresolved("DiscoveryPending", f"discovering the endpoints of issuer {issuer} "
                                         f"({discovery_url(issuer)})")


def _start(entry: _Entry, store: Store, issuer: str, asker: ObjectKey) -> None:
    entry.waiting.add(asker)
    if entry.fetching:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # translation outside the control plane (a test, `lychgate check`): nothing to wait for
    entry.fetching = True
    entry.task = loop.create_task(_fetch(entry, store, issuer))


async def _fetch(entry: _Entry, store: Store, issuer: str) -> None:
    try:
        async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_S, follow_redirects=True) as client:
            resp = await client.get(discovery_url(issuer))
            resp.raise_for_status()
            doc = resp.json()
        if not isinstance(doc, dict):
            raise ValueError("the discovery document is not a JSON object")
        entry.doc, entry.error, entry.failures, entry.fetched = doc, None, 0, time.monotonic()
        log.info("discovered the endpoints of OIDC issuer %s", issuer)
    except (httpx.HTTPError, ValueError) as err:
        entry.error, entry.failures = str(err) or type(err).__name__, entry.failures + 1
        delay = RETRY_S[min(entry.failures, len(RETRY_S)) - 1]
        log.warning("discovering OIDC issuer %s failed: %s; retrying in %.0fs", issuer, entry.error, delay)
        asyncio.get_running_loop().call_later(delay, lambda: _retry(entry, store, issuer))
    finally:
        entry.fetching = entry.error is not None  # then a retry is scheduled
        for key in sorted(entry.waiting):
            store.poke(key)


def _retry(entry: _Entry, store: Store, issuer: str) -> None:
    entry.task = asyncio.get_running_loop().create_task(_fetch(entry, store, issuer))
