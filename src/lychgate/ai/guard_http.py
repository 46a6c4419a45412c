"""The one HTTP exchange the webhook and moderation guards have: a JSON POST whose JSON
answer is used, or GuardUnavailable (and the guard fails closed)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from lychgate.ai.rejection import GuardUnavailable


async def post_json(session: aiohttp.ClientSession, url: str, payload: Any, headers: Mapping[str, str],
                    timeout: float, what: str) -> Any:
    """POST payload as JSON; the answer's JSON when the status is 200. `what` names the
    service in GuardUnavailable's message (for the log: never put credentials in it;
    aiohttp's exception texts name the URL at most)."""
    try:
        async with session.post(url, json=payload, headers=dict(headers),
                                timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            if resp.status != 200:
                raise GuardUnavailable(f"{what} answered HTTP {resp.status}")
            return json.loads(await resp.read())
    except (aiohttp.ClientError, TimeoutError, ValueError) as err:
        raise GuardUnavailable(f"{what}: {type(err).__name__} {err}") from None
