"""Many MCP servers as one: what the relay does with each JSON-RPC message of a client.

kgateway's (agentgateway's) rules. With several targets, tools, prompts, resource names
and resource template names are `<target>_<name>` (a target's name has no `_`, so the
first `_` splits); with one target nothing is renamed. Resource URIs are never rewritten.

- `initialize` goes to every target with the client's own parameters; the answer names
  the gateway, offers what any target offers (tools, prompts, resources, completions,
  logging; with one target its capabilities as they are) and the lowest protocol version.
- Lists are the union over the targets, each target's pages followed (`nextCursor`, at
  most PAGES) and returned as one page; a target without the method adds nothing.
- `tools/call`, `prompts/get` and `completion/complete` for a prompt go to the owner by
  name, unprefixed; `resources/read`, `resources/subscribe`, `resources/unsubscribe` and
  completion for a resource go to the target that listed the URI, else to each target in
  turn until one has it. `logging/setLevel` goes to all. `ping` is answered here. Any
  other request is forwarded when there is one target and refused (-32601) otherwise.
- Notifications go to every target, except `notifications/cancelled`, which goes to the
  targets the cancelled request went to. A target's requests to the client (sampling,
  elicitation, roots) reach it with ids `lychgate:<target>:<their id>`, so its answer
  finds its way back.
- A target that is down is logged, counted and listed in the answer's
  `_meta["lychgate.dev/unavailable"]`; the others keep serving; its tools answer a
  JSON-RPC error saying so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp

import lychgate
from lychgate.mcp import metrics
from lychgate.mcp.config import Backend, Target
from lychgate.mcp.sessions import Held, SessionState, TargetSession
from lychgate.mcp.upstream import (
    Link,
    Message,
    SessionGone,
    Sink,
    SSELink,
    StreamableLink,
    TargetDown,
    connect,
    key,
)

log = logging.getLogger("lychgate.mcp")
T = TypeVar("T")

SEPARATOR = "_"
UNAVAILABLE = "lychgate.dev/unavailable"
REQUEST_PREFIX = "lychgate:"  # ids of the targets' requests to the client
PAGES = 100  # pages of one target's list followed at most
OWNERS = 10_000  # resource URIs whose target is remembered
CAPABILITIES = ("tools", "prompts", "resources", "completions", "logging")  # what the relay can aggregate

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
SESSION_NOT_FOUND = -32001  # what the SDK's servers answer with their 404


def error(request_id: Any, code: int, message: str, data: Any = None) -> Message:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": err}


def _encode(message: Message) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


@dataclass
class Session:
    """One client's session as one request sees it."""

    backend: Backend
    state: SessionState
    links: dict[str, Link]  # the targets serving it, in the Backend's order
    unavailable: list[str] = field(default_factory=list)  # down at initialize, since, or not part of it

    @property
    def single(self) -> bool:
        return len(self.backend.targets) == 1

    def name(self, target: str, name: str) -> str:
        return name if self.single else f"{target}{SEPARATOR}{name}"

    def owner(self, name: str) -> tuple[str, str] | None:
        """The target a client-side name belongs to, and the target's own name for it."""
        if self.single:
            return self.backend.targets[0].name, name
        target, sep, rest = name.partition(SEPARATOR)
        return (target, rest) if sep and any(t.name == target for t in self.backend.targets) else None


class Gateway:
    def __init__(self, http: aiohttp.ClientSession, held: Held) -> None:
        self.http = http
        self.held = held
        self._owners: dict[tuple[str, str], str] = {}  # (backend, resource URI) -> target
        self._inflight: dict[tuple[str, str], set[str]] = {}  # (session nonce, request id) -> targets
        self._calls: dict[tuple[str, str], asyncio.Task[Any]] = {}  # the tasks answering those requests
        self._cancelled: set[tuple[str, str]] = set()  # requests the client cancelled
        self._turns: dict[tuple[str, str], int] = {}  # (backend, target) -> sessions opened (replica turns)

    # --- sessions -------------------------------------------------------------------------

    async def initialize(self, backend: Backend, message: Message, body: bytes,
                         sink: Sink) -> tuple[SessionState | None, Message]:
        """A new session on every target; None and an error naming them when none answers."""
        request_id = message.get("id")

        async def one(name: str) -> tuple[Link, Message] | str:
            target = self._replica(backend, next(t for t in backend.targets if t.name == name))
            try:
                link, answer = await connect(self.http, target, body, request_id, _to_client(name, sink))
            except (TargetDown, SessionGone) as err:
                return self._down(backend, name, err)
            if "error" in answer:
                await link.close()
                return self._down(backend, name, answer["error"].get("message", "initialize failed"))
            metrics.up(backend.id, name)
            return link, answer["result"]

        names = [t.name for t in backend.targets]
        outcomes = dict(zip(names, await asyncio.gather(*(one(n) for n in names)), strict=True))
        answered = {n: o for n, o in outcomes.items() if not isinstance(o, str)}
        down = {n: o for n, o in outcomes.items() if isinstance(o, str)}
        if not answered:
            reasons = ", ".join(f"{n} ({r})" for n, r in down.items()) or "it has none"
            return None, error(request_id, INTERNAL_ERROR,
                               f"no target of MCP Backend {backend.id} is available: {reasons}",
                               {"backend": backend.id, UNAVAILABLE: list(down)})
        results = [result for _, result in answered.values()]
        version = min(str(r.get("protocolVersion", "")) for r in results)
        state = SessionState(backend.id, version, {
            n: TargetSession("" if isinstance(link, SSELink) else link.session_id, link.version,
                             (link.target.host, link.target.port) if _replicated(backend, n) else None)
            for n, (link, _) in answered.items()}, tuple(down))
        for name, (link, _) in answered.items():
            if isinstance(link, SSELink):
                self.held.put(state.nonce, backend.id, name, link)
        result: Message = {
            "protocolVersion": version,
            "capabilities": results[0].get("capabilities", {}) if len(backend.targets) == 1
            else _capabilities([r.get("capabilities", {}) for r in results]),
            "serverInfo": {"name": "lychgate", "title": f"lychgate MCP gateway ({backend.id})",
                           "version": lychgate.__version__},
        }
        instructions = [f"{n}: {r['instructions']}" if len(backend.targets) > 1 else r["instructions"]
                        for n, (_, r) in answered.items() if r.get("instructions")]
        if instructions:
            result["instructions"] = "\n\n".join(instructions)
        return state, {"jsonrpc": "2.0", "id": request_id, "result": _flag(result, list(down))}

    def _replica(self, backend: Backend, target: Target) -> Target:
        """A Service target at the replica a new session opens on: the next one, in turn."""
        if len(target.replicas) < 2:
            return target
        turn = self._turns.get((backend.id, target.name), 0)
        self._turns[(backend.id, target.name)] = turn + 1
        return target.on(target.replicas[turn % len(target.replicas)])

    def session(self, backend: Backend, state: SessionState) -> Session | None:
        """The session an id stands for, with the Backend as configured now; None: unknown here."""
        if state.backend != backend.id:
            return None
        links: dict[str, Link] = {}
        for target in backend.targets:
            own = state.targets.get(target.name)
            if own is None:
                continue
            if target.protocol == "SSE":
                held = self.held.get(state.nonce, target.name)
                if held is not None and not held.closed.is_set():
                    links[target.name] = held
            else:
                at = target.on(own.replica) if own.replica is not None else target
                links[target.name] = StreamableLink(self.http, at, own.session_id, own.version)
        if not links:
            return None
        return Session(backend, state, links, [t.name for t in backend.targets if t.name not in links])

    async def close(self, session: Session) -> None:
        """End the session on every target."""
        await asyncio.gather(*(link.close() for link in session.links.values() if not isinstance(link, SSELink)))
        await self.held.drop(session.state.nonce)

    async def listen(self, session: Session, sink: Sink) -> None:
        """The targets' messages outside requests, until every target's stream ends."""
        await asyncio.gather(*(link.listen(_to_client(name, sink)) for name, link in session.links.items()))

    # --- messages -------------------------------------------------------------------------

    async def handle(self, session: Session, message: Message, body: bytes, sink: Sink) -> Message | None:
        """The answer to a client's message (None for notifications and answers, and for a
        request the client cancelled: it expects no answer)."""
        method = message.get("method")
        if not isinstance(method, str):
            await self._answer_target(session, message)
            return None
        metrics.REQUESTS.labels(session.backend.id, method).inc()
        if "id" not in message:
            await self._notify(session, message, body)
            return None
        call = (session.state.nonce, key(message["id"]))
        task = asyncio.current_task()
        if task is not None:
            self._calls[call] = task
        try:
            return await self._request(session, message, body, sink)
        except asyncio.CancelledError:
            if task is None or call not in self._cancelled:
                raise
            task.uncancel()
            return None
        finally:
            self._calls.pop(call, None)
            self._cancelled.discard(call)

    async def _request(self, session: Session, message: Message, body: bytes, sink: Sink) -> Message:
        method = message["method"]
        request_id = message["id"]
        params = message.get("params") or {}
        if method == "ping":
            return {"jsonrpc": "2.0", "id": request_id, "result": {}}
        if method in LISTS:
            return await self._list(session, message, sink)
        if method == "tools/call":
            return await self._call(session, message, body, sink)
        if method == "prompts/get":
            return await self._owned(session, message, body, sink, "prompt", ("name",))
        if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            return await self._by_uri(session, message, body, sink, str(params.get("uri", "")))
        if method == "completion/complete":
            ref = params.get("ref") or {}
            if ref.get("type") == "ref/prompt":
                return await self._owned(session, message, body, sink, "prompt", ("ref", "name"))
            return await self._by_uri(session, message, body, sink, str(ref.get("uri", "")))
        if method == "logging/setLevel":
            await self._everywhere(session, message, body, sink)
            return {"jsonrpc": "2.0", "id": request_id, "result": _flag({}, session.unavailable)}
        if session.single:
            return await self._forward(session, session.backend.targets[0].name, body, request_id, sink)
        return error(request_id, METHOD_NOT_FOUND,
                     f"{method} is not served across the targets of MCP Backend {session.backend.id}")

    async def _forward(self, session: Session, target: str, body: bytes, request_id: Any, sink: Sink) -> Message:
        """A request to one target (TargetDown or SessionGone when it cannot answer)."""
        link = session.links.get(target)
        if link is None:
            raise TargetDown("not available in this session")
        inflight = self._inflight.setdefault((session.state.nonce, key(request_id)), set())
        inflight.add(target)
        try:
            answer = await link.request(body, request_id, _to_client(target, sink))
        except TargetDown as err:
            self._down(session.backend, target, err)
            session.unavailable.append(target)
            raise
        finally:
            inflight.discard(target)
            if not inflight:
                self._inflight.pop((session.state.nonce, key(request_id)), None)
        metrics.up(session.backend.id, target)
        return answer

    async def _everywhere(self, session: Session, message: Message, body: bytes,
                          sink: Sink) -> dict[str, Message]:
        """The request to every target of the session; the answers of those that answered."""
        outcomes = await _each(session, lambda target: self._forward(session, target, body, message["id"], sink))
        return {n: o for n, o in outcomes.items() if not isinstance(o, BaseException)}

    async def _list(self, session: Session, message: Message, sink: Sink) -> Message:
        method = message["method"]
        field_, named = LISTS[method]

        async def pages(target: str) -> list[Any]:
            items: list[Any] = []
            params = {k: v for k, v in (message.get("params") or {}).items() if k != "cursor"}
            for _ in range(PAGES):
                request = {"jsonrpc": "2.0", "id": message["id"], "method": method, "params": params}
                answer = await self._forward(session, target, _encode(request), message["id"], sink)
                result = answer.get("result")
                if not isinstance(result, dict):
                    break  # an error: most often, the target does not have the method
                items.extend(result.get(field_, ()))
                if not result.get("nextCursor"):
                    break
                params = {**params, "cursor": result["nextCursor"]}
            return items

        outcomes = await _each(session, pages)
        merged: list[Any] = []
        for target, items in outcomes.items():
            if isinstance(items, BaseException):
                continue
            for item in items:
                if "uri" in item or "uriTemplate" in item:
                    self._own(session.backend.id, str(item.get("uri") or item.get("uriTemplate")), target)
                merged.append({**item, "name": session.name(target, item["name"])} if named else item)
        return {"jsonrpc": "2.0", "id": message["id"], "result": _flag({field_: merged}, session.unavailable)}

    def _unprefixed(self, session: Session, message: Message, body: bytes, path: tuple[str, ...],
                    what: str) -> tuple[str, bytes] | Message:
        """The owning target and the message with the target's own name; or the error to answer."""
        holder: Any = message.get("params") or {}
        for step in path[:-1]:
            holder = holder.get(step) or {}
        name = str(holder.get(path[-1], ""))
        owner = session.owner(name)
        if owner is None:
            return error(message.get("id"), INVALID_PARAMS, f"Unknown {what}: {name}")
        target, own = owner
        if target not in session.links:
            return error(message.get("id"), INTERNAL_ERROR,
                         f"{what} {name}: MCP target {target} of Backend {session.backend.id} is unavailable",
                         {"backend": session.backend.id, "target": target, UNAVAILABLE: [target]})
        if session.single:
            return target, body  # nothing renamed: the client's bytes as they came
        holder[path[-1]] = own
        return target, _encode(message)

    async def _owned(self, session: Session, message: Message, body: bytes, sink: Sink, what: str,
                     path: tuple[str, ...]) -> Message:
        routed = self._unprefixed(session, message, body, path, what)
        if isinstance(routed, dict):
            return routed
        target, out = routed
        try:
            return await self._forward(session, target, out, message["id"], sink)
        except TargetDown as err:
            return self._unavailable(session, message, target, err)

    async def _call(self, session: Session, message: Message, body: bytes, sink: Sink) -> Message:
        routed = self._unprefixed(session, message, body, ("name",), "tool")
        if isinstance(routed, dict):
            return routed
        target, out = routed
        tool = str(message["params"]["name"])
        start = time.perf_counter()
        try:
            answer = await self._forward(session, target, out, message["id"], sink)
        except TargetDown as err:
            metrics.tool_call(session.backend.id, target, tool, "unavailable", time.perf_counter() - start)
            return self._unavailable(session, message, target, err)
        result = answer.get("result")
        failed = not isinstance(result, dict) or bool(result.get("isError"))
        metrics.tool_call(session.backend.id, target, tool, "error" if failed else "ok", time.perf_counter() - start)
        return answer

    async def _by_uri(self, session: Session, message: Message, body: bytes, sink: Sink, uri: str) -> Message:
        known = self._owners.get((session.backend.id, uri))
        order = sorted(session.links, key=lambda name: name != known)  # the owner first, then the Backend's order
        last: Message = error(message["id"], INVALID_PARAMS, f"Resource not found: {uri}")
        for target in order:
            try:
                answer = await self._forward(session, target, body, message["id"], sink)
            except (TargetDown, SessionGone):
                continue
            if "result" in answer:
                self._own(session.backend.id, uri, target)
                return answer
            last = answer
        return last

    async def _notify(self, session: Session, message: Message, body: bytes) -> None:
        targets = list(session.links)
        call: tuple[str, str] | None = None
        if message.get("method") == "notifications/cancelled":
            call = (session.state.nonce, key((message.get("params") or {}).get("requestId")))
            targets = sorted(self._inflight.get(call, targets))

        async def one(target: str) -> None:
            try:
                await session.links[target].send(body)
            except (TargetDown, SessionGone) as err:
                log.info("MCP Backend %s: %s not delivered to target %s: %s",
                         session.backend.id, message.get("method"), target, err)

        await asyncio.gather(*(one(t) for t in targets if t in session.links))
        if call is not None and (task := self._calls.get(call)) is not None:
            self._cancelled.add(call)  # no answer: the client stopped waiting for it
            task.cancel()

    async def _answer_target(self, session: Session, message: Message) -> None:
        """A client's answer to a target's request: back to that target, with its own id."""
        tagged = message.get("id")
        target, _, own = tagged.removeprefix(REQUEST_PREFIX).partition(":") if isinstance(tagged, str) else ("", "", "")
        link = session.links.get(target)
        if link is None or not isinstance(tagged, str) or not tagged.startswith(REQUEST_PREFIX):
            log.info("MCP Backend %s: an answer to no request of a target (id %r) dropped", session.backend.id, tagged)
            return
        try:
            await link.send(_encode({**message, "id": json.loads(own)}))
        except (TargetDown, SessionGone, ValueError) as err:
            log.info("MCP Backend %s: answer to target %s not delivered: %s", session.backend.id, target, err)

    # --- bookkeeping ----------------------------------------------------------------------

    def _own(self, backend: str, uri: str, target: str) -> None:
        if len(self._owners) >= OWNERS:
            self._owners.clear()
        self._owners[(backend, uri)] = target

    def _down(self, backend: Backend, target: str, reason: object) -> str:
        log.warning("MCP Backend %s: target %s is unavailable: %s", backend.id, target, reason)
        metrics.down(backend.id, target)
        return str(reason)

    def _unavailable(self, session: Session, message: Message, target: str, err: Exception) -> Message:
        return error(message["id"], INTERNAL_ERROR,
                     f"MCP target {target} of Backend {session.backend.id} is unavailable: {err}",
                     {"backend": session.backend.id, "target": target, UNAVAILABLE: [target]})


# method -> (the result's list field, whether its items are named per target)
LISTS: dict[str, tuple[str, bool]] = {
    "tools/list": ("tools", True),
    "prompts/list": ("prompts", True),
    "resources/list": ("resources", True),
    "resources/templates/list": ("resourceTemplates", True),
}


def _flag(result: Message, unavailable: list[str]) -> Message:
    """The result, listing the targets that did not contribute in its `_meta`."""
    if unavailable:
        result["_meta"] = {**result.get("_meta", {}), UNAVAILABLE: sorted(set(unavailable))}
    return result


def _capabilities(each: list[Message]) -> Message:
    """What any target offers, of what the relay can aggregate (booleans: any target's)."""
    merged: Message = {}
    for capabilities in each:
        for name in CAPABILITIES:
            value = capabilities.get(name)
            if not isinstance(value, dict):
                continue
            slot = merged.setdefault(name, {})
            for flag, on in value.items():
                slot[flag] = bool(slot.get(flag)) or on if isinstance(on, bool) else slot.get(flag, on)
    return merged


def _to_client(target: str, sink: Sink) -> Sink:
    """The sink for a target's messages: its requests' ids tagged with the target."""
    async def send(message: Message) -> None:
        if "method" in message and "id" in message:
            message = {**message, "id": f"{REQUEST_PREFIX}{target}:{json.dumps(message['id'])}"}
        await sink(message)
    return send


def _replicated(backend: Backend, name: str) -> bool:
    """Whether the target has replicas to choose between (its sessions name theirs)."""
    return any(len(t.replicas) > 1 for t in backend.targets if t.name == name)


async def _each(session: Session, work: Callable[[str], Awaitable[T]]) -> dict[str, T | BaseException]:
    """`work` for every target of the session at once, by target: its result, or why the
    target could not answer; when every target forgot the session, the session is gone."""
    async def one(target: str) -> T | BaseException:
        try:
            return await work(target)
        except (TargetDown, SessionGone) as err:
            return err

    names = list(session.links)
    outcomes = dict(zip(names, await asyncio.gather(*(one(n) for n in names)), strict=True))
    if outcomes and all(isinstance(o, SessionGone) for o in outcomes.values()):
        raise SessionGone(session.backend.id)
    return outcomes
