"""A route's TrafficPolicy `ai` applied to one request and its answer: what the AI
extension calls, with no Envoy or gRPC in it.

On the request (the client's OpenAI Chat Completions body, parsed), in this order:

1. `defaults` (defaults.py): fields set when the client left them out, or always
   with `override: true`;
2. `promptEnrichment` (enrichment.py): messages prepended and appended;
3. `promptGuard.request` (guards.py): webhook -> regex -> moderation, on the
   enriched prompt, each able to mask it or reject it.

This is kgateway's order: its transformation filter (defaults, enrichment) ran
before its AI extension (guards), so guards see the prompt the provider will get.
`apply_request` returns the body to send on, or a `Rejection` to answer with.

On the answer, `ResponseGuard` runs `promptGuard.response` (webhook -> regex):
`check()` on a whole chat.completion, or `feed()` on each chat.completion.chunk of
a stream and `finish()` at its end.

The settings are compiled once per `RouteSettings` object (regexes, parsed default
values; see `compile_policy`): the extension keeps the objects of its config and
passes the same one for every request of a route. A setting that cannot be applied
raises PolicyError from compile_policy (for the control plane to report) and makes
the route answer 500 (fail closed) in the extension.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from lychgate.ai.config import RouteSettings
from lychgate.ai.defaults import FieldDefault, apply_defaults, parse_defaults
from lychgate.ai.enrichment import Enrichment, enrich, parse_enrichment
from lychgate.ai.guard_moderation import OPENAI_MODERATION_URL
from lychgate.ai.guards import (
    GUARD_TIMEOUT,
    AnswerStream,
    GuardIO,
    RequestGuard,
    ResponseGuardSpec,
    check_answer,
    check_request,
    parse_prompt_guard,
)
from lychgate.ai.rejection import PolicyError, Rejection


@dataclass(frozen=True)
class CompiledPolicy:
    defaults: tuple[FieldDefault, ...] = ()
    enrichment: Enrichment | None = None
    request: tuple[RequestGuard, ...] = ()
    response: tuple[ResponseGuardSpec, ...] = ()


# id(settings) -> (the settings, weakly; what they compiled to). An entry leaves with its object.
_compiled: dict[int, tuple[weakref.ref[RouteSettings], CompiledPolicy | PolicyError]] = {}


def compile_policy(settings: RouteSettings) -> CompiledPolicy:
    """The settings, parsed and compiled; PolicyError (naming the field) if they cannot
    be applied. Cached per settings object."""
    key = id(settings)
    hit = _compiled.get(key)
    if hit is None or hit[0]() is not settings:
        try:
            result: CompiledPolicy | PolicyError = CompiledPolicy(
                parse_defaults(settings.defaults),
                parse_enrichment(settings.prompt_enrichment),
                *parse_prompt_guard(settings.prompt_guard))
        except PolicyError as err:
            result = err

        def forget(_: object, key: int = key) -> None:
            _compiled.pop(key, None)

        hit = (weakref.ref(settings, forget), result)
        _compiled[key] = hit
    if isinstance(hit[1], PolicyError):
        raise hit[1]
    return hit[1]


def _invalid(err: PolicyError) -> Rejection:
    return Rejection(500, "The route's AI policy could not be applied", type="server_error",
                     code="ai_policy_invalid", detail=str(err))


async def apply_request(settings: RouteSettings, chat: dict[str, Any], *,
                        headers: Mapping[str, str] | None = None,
                        session: aiohttp.ClientSession | None = None,
                        timeout: float = GUARD_TIMEOUT,
                        moderation_url: str = OPENAI_MODERATION_URL) -> dict[str, Any] | Rejection:
    """Defaults, enrichment and the request guards on the request body (edited in place
    and returned), or the Rejection to answer instead. `headers`: the client's request
    headers (forwardHeaderMatches, Passthrough moderation token); `session`: the
    extension's aiohttp session, needed only by webhook and moderation guards."""
    try:
        policy = compile_policy(settings)
    except PolicyError as err:
        return _invalid(err)
    apply_defaults(policy.defaults, chat)
    enrich(policy.enrichment, chat)
    if policy.request:
        io = GuardIO(session, headers, timeout, moderation_url)
        if (rejected := await check_request(policy.request, chat, io)) is not None:
            return rejected
    return chat


class ResponseGuard:
    """`promptGuard.response` on one answer. `headers`: the provider's response headers
    (forwardHeaderMatches of the response webhook); `active` is False when the route
    guards no answers, and the extension can leave the answer alone."""

    def __init__(self, settings: RouteSettings, *, headers: Mapping[str, str] | None = None,
                 session: aiohttp.ClientSession | None = None, timeout: float = GUARD_TIMEOUT) -> None:
        self._invalid: Rejection | None = None
        self._invalid_sent = False
        specs: tuple[ResponseGuardSpec, ...] = ()
        try:
            specs = compile_policy(settings).response
        except PolicyError as err:
            self._invalid = _invalid(err)
        self.active = bool(specs) or self._invalid is not None
        self._specs = specs
        self._io = GuardIO(session, headers, timeout)
        self._stream: AnswerStream | None = None

    @property
    def rejection(self) -> Rejection | None:
        """Why a stream was ended, once feed() or finish() ended it."""
        return self._invalid or (self._stream.rejection if self._stream else None)

    async def check(self, answer: dict[str, Any]) -> dict[str, Any] | Rejection:
        """A whole chat.completion: masked in place and returned, or the Rejection."""
        if self._invalid is not None:
            return self._invalid
        rejected = await check_answer(self._specs, answer, self._io)
        return answer if rejected is None else rejected

    async def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """One chat.completion.chunk of a stream -> the chunks to send now: the chunk with
        its text guarded, or the rejection's error body as the stream's last event
        (send it as `data: {...}`, then end the stream; `rejection` says why)."""
        if self._invalid is not None:
            first, self._invalid_sent = not self._invalid_sent, True
            return [self._invalid.body()] if first else []
        if self._stream is None:
            self._stream = AnswerStream(self._specs, self._io)
        return await self._stream.feed(chunk)

    async def finish(self) -> list[dict[str, Any]]:
        """The end of the stream -> a last chunk with any text still held, or []."""
        return await self._stream.finish() if self._stream else []
