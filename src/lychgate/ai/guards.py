"""TrafficPolicy `ai.promptGuard`: guards on the prompt and on the model's answer.

kgateway's AIPromptGuard has `request` and `response`, each one object (a list
of them is also read, each item its own guard with its own custom response, in
the order listed). A request guard runs, as kgateway's extension ran it,
webhook -> regex -> moderation, each step able to reject and stop the rest; a
mask by the webhook is what the regex step sees. A response guard runs webhook
-> regex. Rejections use the guard's `customResponse` (newer API: `response`):
its message and status code, by default kgateway's "The request was rejected due
to inappropriate content" and 403 ("The response was rejected ..." for answers).

Texts guarded: every string `content` of the request's messages and every
`text` part of a content list, whatever the role (enrichment's messages
included); of an answer, each choice's message content, or for a stream each
choice's `delta.content` as it comes.

kgateway masked answers whatever the regex `action` said; an explicit REJECT on
a response guard is honoured here: a whole answer is replaced by the rejection,
a stream ends with it as its last event (what was already sent stays sent).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import aiohttp

from lychgate.ai.guard_moderation import (
    OPENAI_MODERATION_URL,
    Moderation,
    flagged,
    parse_moderation,
)
from lychgate.ai.guard_regex import MaskStream, RegexGuard, parse_regex
from lychgate.ai.guard_webhook import Webhook, ask, parse_webhook
from lychgate.ai.rejection import (
    REJECTED_STATUS,
    REQUEST_REJECTED,
    RESPONSE_REJECTED,
    GuardUnavailable,
    PolicyError,
    Rejection,
    guard_unavailable,
)

GUARD_TIMEOUT = 5.0  # seconds a webhook or the moderation service has to answer

# A streamed answer goes to the response webhook a sentence at a time, as in
# kgateway: at least MIN_SEGMENT characters up to the last sentence end, or
# MAX_SEGMENT characters when no sentence ends (so a stream without one is not
# held to its end).
SENTENCE_END = re.compile(r"[.?!;] +\n*|\n+")
MIN_SEGMENT = 50
MAX_SEGMENT = 2000


@dataclass(frozen=True)
class GuardIO:
    """What guards that ask a service get from the extension."""

    session: aiohttp.ClientSession | None = None
    headers: Mapping[str, str] | None = None  # the request's (request guards) or the answer's
    timeout: float = GUARD_TIMEOUT
    moderation_url: str = OPENAI_MODERATION_URL

    def http(self) -> aiohttp.ClientSession:
        if self.session is None:
            raise RuntimeError("a webhook or moderation guard needs the extension's aiohttp session")
        return self.session


@dataclass(frozen=True)
class RequestGuard:
    rejection: Rejection
    webhook: Webhook | None = None
    regex: RegexGuard | None = None
    moderation: Moderation | None = None


@dataclass(frozen=True)
class ResponseGuardSpec:
    rejection: Rejection
    webhook: Webhook | None = None
    regex: RegexGuard | None = None


def parse_prompt_guard(raw: Mapping[str, Any] | None, where: str = "promptGuard",
                       ) -> tuple[tuple[RequestGuard, ...], tuple[ResponseGuardSpec, ...]]:
    if not raw:
        return (), ()
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where}: must be an object with request and/or response")
    request = tuple(_request_guard(item, at) for item, at in _items(raw.get("request"), f"{where}.request"))
    response = tuple(_response_guard(item, at) for item, at in _items(raw.get("response"), f"{where}.response"))
    return request, response


def _items(raw: Any, where: str) -> list[tuple[Any, str]]:
    if not raw:
        return []
    if isinstance(raw, list):
        return [(item, f"{where}[{i}]") for i, item in enumerate(raw)]
    return [(raw, where)]


def _rejection(raw: Mapping[str, Any], where: str, message: str) -> Rejection:
    key = "customResponse" if "customResponse" in raw else "response"
    custom = raw.get(key) or {}
    if not isinstance(custom, Mapping):
        raise PolicyError(f"{where}.{key}: must be an object with message and/or statusCode")
    status = custom.get("statusCode") or REJECTED_STATUS
    if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
        raise PolicyError(f"{where}.{key}.statusCode: must be 200 to 599")
    text = custom.get("message") or message
    if not isinstance(text, str):
        raise PolicyError(f"{where}.{key}.message: must be a string")
    return Rejection(status, text)


def _request_guard(raw: Any, where: str) -> RequestGuard:
    if not isinstance(raw, Mapping) or not {"regex", "webhook", "moderation", "openAIModeration"} & set(raw):
        raise PolicyError(f"{where}: needs regex, webhook or moderation")
    webhook = parse_webhook(raw["webhook"], f"{where}.webhook") if raw.get("webhook") else None
    regex = parse_regex(raw["regex"], f"{where}.regex") if raw.get("regex") else None
    moderation = None
    # kgateway: moderation.openAIModeration; the later list form: openAIModeration.
    if raw.get("moderation"):
        mod = raw["moderation"]
        if not isinstance(mod, Mapping) or not mod.get("openAIModeration"):
            raise PolicyError(f"{where}.moderation.openAIModeration: required")
        moderation = parse_moderation(mod["openAIModeration"], f"{where}.moderation.openAIModeration")
    elif raw.get("openAIModeration"):
        moderation = parse_moderation(raw["openAIModeration"], f"{where}.openAIModeration")
    return RequestGuard(_rejection(raw, where, REQUEST_REJECTED), webhook, regex, moderation)


def _response_guard(raw: Any, where: str) -> ResponseGuardSpec:
    if not isinstance(raw, Mapping) or not {"regex", "webhook"} & set(raw):
        raise PolicyError(f"{where}: needs regex or webhook")
    webhook = parse_webhook(raw["webhook"], f"{where}.webhook") if raw.get("webhook") else None
    regex = parse_regex(raw["regex"], f"{where}.regex") if raw.get("regex") else None
    return ResponseGuardSpec(_rejection(raw, where, RESPONSE_REJECTED), webhook, regex)


# A text the guards read and may rewrite: (role, the dict holding it, its key).
Slot = tuple[str, dict[str, Any], str]


def _prompt_slots(chat: Mapping[str, Any]) -> list[Slot]:
    slots: list[Slot] = []
    messages = chat.get("messages")
    for msg in messages if isinstance(messages, list) else ():
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        role = role if isinstance(role, str) else ""
        content = msg.get("content")
        if isinstance(content, str):
            slots.append((role, msg, "content"))
        elif isinstance(content, list):
            slots.extend((role, part, "text") for part in content
                         if isinstance(part, dict) and part.get("type") == "text"
                         and isinstance(part.get("text"), str))
    return slots


def _answer_slots(answer: Mapping[str, Any]) -> list[Slot]:
    choices = answer.get("choices")
    slots: list[Slot] = []
    for choice in choices if isinstance(choices, list) else ():
        msg = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(msg, dict) and isinstance(msg.get("content"), str):
            slots.append((msg.get("role") or "assistant", msg, "content"))
    return slots


async def _webhook(hook: Webhook, kind: str, slots: list[Slot], io: GuardIO) -> Rejection | None:
    """Ask the webhook and apply its mask to the slots; a rejection if it rejects."""
    try:
        result = await ask(io.http(), hook, kind, [(r, c[k]) for r, c, k in slots],
                           io.headers or {}, io.timeout)
    except GuardUnavailable as err:
        return guard_unavailable(f"{kind} guard webhook", str(err), subject=kind)
    if isinstance(result, Rejection):
        return result
    for (_, container, key), text in zip(slots, result or (), strict=False):
        container[key] = text
    return None


def _regex(regex: RegexGuard, rejection: Rejection, slots: list[Slot]) -> Rejection | None:
    if regex.reject:
        if any(regex.contains(c[k]) for _, c, k in slots):
            return replace(rejection, detail="regex guard matched")
        return None
    for _, container, key in slots:
        container[key] = regex.mask(container[key])
    return None


async def _screen(guard: RequestGuard | ResponseGuardSpec, kind: str, slots: list[Slot],
                  io: GuardIO) -> Rejection | None:
    """A guard's webhook, then its regex, on the slots."""
    if guard.webhook and slots and (rejected := await _webhook(guard.webhook, kind, slots, io)):
        return rejected
    return _regex(guard.regex, guard.rejection, slots) if guard.regex else None


async def check_request(guards: Sequence[RequestGuard], chat: dict[str, Any], io: GuardIO) -> Rejection | None:
    """Run the request guards on the request body (masking it in place); the first
    rejection, or None when the prompt may go to the provider."""
    slots = _prompt_slots(chat)
    for g in guards:
        if rejected := await _screen(g, "request", slots, io):
            return rejected
        if g.moderation and slots:
            text = "\n".join(c[k] for _, c, k in slots)
            try:
                if await flagged(io.http(), g.moderation, text, io.headers or {}, io.moderation_url, io.timeout):
                    return replace(g.rejection, detail="moderation flagged the prompt")
            except GuardUnavailable as err:
                return guard_unavailable("moderation service", str(err))
    return None


async def check_answer(specs: Sequence[ResponseGuardSpec], answer: dict[str, Any],
                       io: GuardIO) -> Rejection | None:
    """Run the response guards on a whole chat.completion (masking it in place)."""
    slots = _answer_slots(answer)
    for spec in specs:
        if rejected := await _screen(spec, "response", slots, io):
            return rejected
    return None


class _Rejected(Exception):
    def __init__(self, rejection: Rejection) -> None:
        self.rejection = rejection


class _Stage(Protocol):
    async def push(self, text: str, final: bool) -> str: ...


class _WebhookStage:
    def __init__(self, hook: Webhook, io: GuardIO) -> None:
        self.hook, self.io, self.held = hook, io, ""

    async def push(self, text: str, final: bool) -> str:
        self.held += text
        cut = len(self.held) if final or len(self.held) >= MAX_SEGMENT else _sentences(self.held)
        if not cut:
            return ""
        segment, self.held = self.held[:cut], self.held[cut:]
        slots: list[Slot] = [("assistant", {"content": segment}, "content")]
        if rejected := await _webhook(self.hook, "response", slots, self.io):
            raise _Rejected(rejected)
        return str(slots[0][1]["content"])


def _sentences(text: str) -> int:
    """Where the held text can be cut for the webhook: after its last sentence end, when
    that leaves at least MIN_SEGMENT characters; else 0 (wait for more)."""
    if len(text) < MIN_SEGMENT:
        return 0
    end = 0
    for m in SENTENCE_END.finditer(text, MIN_SEGMENT - 1):
        end = m.end()
    return end


class _RegexStage:
    def __init__(self, regex: RegexGuard, rejection: Rejection) -> None:
        self.stream, self.rejection = MaskStream(regex), rejection

    async def push(self, text: str, final: bool) -> str:
        out = self.stream.push(text, final)
        if out is None:
            raise _Rejected(replace(self.rejection, detail="regex guard matched the streamed answer"))
        return out


class AnswerStream:
    """A streamed answer (chat.completion.chunk dicts) through the response guards.

    Each chunk goes out as it comes, its `delta.content` replaced by what the guards
    let through so far (possibly ""): text a pattern may still be matching, or a
    sentence the webhook has not seen yet, waits and goes out in a later chunk; a
    choice's `finish_reason` releases the rest of its text in that chunk."""

    def __init__(self, specs: Sequence[ResponseGuardSpec], io: GuardIO) -> None:
        self.specs, self.io = specs, io
        self.rejection: Rejection | None = None
        self._choices: dict[int, list[_Stage]] = {}
        self._finished: set[int] = set()
        self._last: dict[str, Any] = {}

    def _stages(self) -> list[_Stage]:
        stages: list[_Stage] = []
        for spec in self.specs:
            if spec.webhook:
                stages.append(_WebhookStage(spec.webhook, self.io))
            if spec.regex:
                stages.append(_RegexStage(spec.regex, spec.rejection))
        return stages

    async def _push(self, index: int, text: str, final: bool) -> str:
        if index in self._finished:
            return text
        for stage in self._choices.setdefault(index, self._stages()):
            text = await stage.push(text, final)
        if final:
            self._finished.add(index)
        return text

    async def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """The chunks to send for this one: the chunk itself, or the rejection's error
        body as the stream's last event (after which nothing more is sent)."""
        if self.rejection is not None:
            return []
        choices = chunk.get("choices")
        try:
            for choice in choices if isinstance(choices, list) else ():
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta")
                content = delta.get("content") if isinstance(delta, dict) else None
                final = choice.get("finish_reason") is not None
                if not isinstance(content, str) and not final:
                    continue
                out = await self._push(int(choice.get("index") or 0), content or "", final)
                if isinstance(content, str) or out:
                    choice["delta"] = {**(delta if isinstance(delta, dict) else {}), "content": out}
        except _Rejected as r:
            self.rejection = r.rejection
            return [r.rejection.body()]
        self._last = chunk
        return [chunk]

    async def finish(self) -> list[dict[str, Any]]:
        """At the end of the stream: a last chunk with the text still held for choices
        that never had a finish_reason (usually nothing)."""
        if self.rejection is not None:
            return []
        rest = []
        try:
            for index in sorted(set(self._choices) - self._finished):
                if out := await self._push(index, "", True):
                    rest.append({"index": index, "delta": {"content": out}, "finish_reason": None})
        except _Rejected as r:
            self.rejection = r.rejection
            return [r.rejection.body()]
        if not rest:
            return []
        head: dict[str, Any] = {k: self._last[k] for k in ("id", "created", "model", "system_fingerprint")
                                if k in self._last}
        return [{**head, "object": "chat.completion.chunk", "choices": rest}]
