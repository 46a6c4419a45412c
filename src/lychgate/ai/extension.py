"""The AI extension: an ext_proc server in the upstream filter chain of AI Backend clusters.

Envoy opens one stream per upstream attempt (so a failover to the next priority
group is a new stream, for the provider Envoy picked then) and sends, in order:

1. request headers, with the attempt's provider (attribute `xds.upstream_host_metadata`,
   key `lychgate.ai/id`) and the route's AI settings id (`xds.route_metadata`,
   `lychgate.ai/route`): answered at once, nothing changed yet;
2. the request body, whole (BUFFERED): the OpenAI Chat Completions request is checked,
   the route's defaults, enrichment and guard applied, its token budget asked
   (token_limit.py), and it is rewritten for the provider (path, credentials, body) — or
   answered here (bad request, guard, budget spent) so the provider is never called;
3. the response headers: an answer in the provider's shape becomes OpenAI's (content
   type; the length changes);
4. the response body chunk by chunk (STREAMED): a stream is translated as it comes, each
   chunk passed on at once; a whole answer is collected and translated at its end.

Tokens are counted from the provider's usage (metrics.py), charged to the route's
token budget, and handed to Envoy as dynamic metadata for access logs (namespace
`lychgate.ai`: input_tokens, output_tokens, total_tokens, model, provider, backend) with
the answer's chunk that follows the provider's usage. Envoy writes them into the
downstream request's metadata (an upstream filter's stream info is the downstream's),
which the Gateway's access logs read. Nothing here logs a request body or a credential.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import grpc
from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc
from envoy.type.v3 import http_status_pb2
from google.protobuf import struct_pb2, text_format

from lychgate.ai import metrics, policy, token_limit
from lychgate.ai.config import AIConfig, Provider, RouteSettings, TokenRateLimit
from lychgate.ai.policy import ResponseGuard
from lychgate.ai.providers import CODECS
from lychgate.ai.providers.base import ProviderError, StreamTranslator, Usage
from lychgate.ai.providers.chat import wants_usage
from lychgate.ai.providers.sse import DONE, EventReader
from lychgate.ai.rejection import Rejection
from lychgate.config_watch import follow

log = logging.getLogger("lychgate.ai")

METADATA = "lychgate.ai"
HOST_METADATA = "xds.upstream_host_metadata"
ROUTE_METADATA = "xds.route_metadata"
LISTENER_METADATA = "xds.listener_metadata"
SOURCE_ADDRESS = "source.address"  # the client's, as Envoy trusts it (token rate limits)
STREAM_TYPES = ("text/event-stream", "application/vnd.amazon.eventstream")


def metadata_value(text: str, key: str) -> str | None:
    """`key` of the `lychgate.ai` filter metadata in Envoy's text rendering of a Metadata
    attribute (how ext_proc sends xds.*_metadata)."""
    meta = base_pb2.Metadata()
    text_format.Parse(text, meta)
    fields = meta.filter_metadata.get(METADATA)
    if fields is None or key not in fields.fields:
        return None
    return fields.fields[key].string_value


@dataclass
class Attempt:
    """One upstream attempt, as its stream goes."""

    provider: Provider | None = None
    route: RouteSettings | None = None
    client_headers: dict[str, str] = field(default_factory=dict)
    source: str = ""  # the client's address and port
    gateway: str = ""  # "namespace/name", from the listener's metadata
    httproute: str = ""  # "namespace/name"
    model: str = ""
    stream: bool = False
    include_usage: bool = False  # the client asked for the usage chunk at the end of a stream
    status: int = 200
    response_headers: dict[str, str] = field(default_factory=dict)
    translator: StreamTranslator | None = None
    guard: ResponseGuard | None = None  # the route's promptGuard.response, when it has one
    events: EventReader | None = None  # the translated stream, re-read for the guard
    body: bytearray = field(default_factory=bytearray)
    usage: Usage | None = None
    logged: tuple[int, int] | None = None  # the tokens last handed to Envoy (input, output)
    # the route's tokenRateLimit: the descriptors asked for, the hits the service counted
    # before the provider was called, the headers it has for the client
    limited: list[token_limit.Descriptor] = field(default_factory=list)
    limit_counted: int = 0
    limit_headers: tuple[tuple[str, str], ...] = ()


class Extension(pb_grpc.ExternalProcessorServicer):
    def __init__(self, config: AIConfig | None = None) -> None:
        self.config = config or AIConfig()
        self._session: aiohttp.ClientSession | None = None  # guard webhooks and moderation
        self.limiter = token_limit.TokenLimiter()
        # (attribute text, key) -> id: as many as there are providers and routes
        self._ids: dict[tuple[str, str], str | None] = {}

    # --- the ext_proc stream ------------------------------------------------------------

    async def Process(self, requests: AsyncIterator[pb.ProcessingRequest],
                      context: grpc.aio.ServicerContext) -> AsyncIterator[pb.ProcessingResponse]:
        attempt = Attempt()
        try:
            async for request in requests:
                kind = request.WhichOneof("request")
                try:
                    if kind == "request_headers":
                        yield self._request_headers(attempt, request)
                    elif kind == "request_body":
                        yield await self._request_body(attempt, request.request_body)
                    elif kind == "response_headers":
                        yield self._response_headers(attempt, request.response_headers)
                    elif kind == "response_body":
                        yield await self._response_body(attempt, request.response_body)
                    else:  # trailers are not asked for; answer anything else unchanged
                        yield pb.ProcessingResponse()
                except ProviderError as err:
                    yield immediate(err.answer().status, err.answer().encode())
                except Rejected as rejected:
                    yield immediate(rejected.rejection.status, rejected.rejection.encode(),
                                    rejected.rejection.headers)
        finally:
            # A client may hang up once it has a stream's [DONE] (the openai SDK does), before
            # the provider's end of stream reaches here, or abandon a stream midway: its
            # tokens are still counted and charged, as far as the provider reported them.
            if attempt.usage is None and attempt.translator is not None:
                self._count(attempt, attempt.translator.usage)

    def _request_headers(self, attempt: Attempt, request: pb.ProcessingRequest) -> pb.ProcessingResponse:
        attrs = request.attributes.get("envoy.filters.http.ext_proc")
        fields = attrs.fields if attrs is not None else {}
        provider_id = self._id(fields[HOST_METADATA].string_value, "id") if HOST_METADATA in fields else None
        route_id = self._id(fields[ROUTE_METADATA].string_value, "route") if ROUTE_METADATA in fields else None
        attempt.gateway = (self._id(fields[LISTENER_METADATA].string_value, "gateway") or "") \
            if LISTENER_METADATA in fields else ""
        attempt.httproute = (self._id(fields[ROUTE_METADATA].string_value, "httproute") or "") \
            if ROUTE_METADATA in fields else ""
        attempt.source = fields[SOURCE_ADDRESS].string_value if SOURCE_ADDRESS in fields else ""
        attempt.provider = self.config.providers.get(provider_id or "")
        attempt.route = self.config.routes.get(route_id or "")
        attempt.client_headers = {h.key: (h.raw_value.decode() if h.raw_value else h.value)
                                  for h in request.request_headers.headers.headers}
        if attempt.provider is None or (route_id and attempt.route is None):
            # The control plane has not handed this provider (or the route's guards) over
            # yet, or could not (a Secret missing): fail closed.
            raise ProviderError(503, "the AI gateway has no configuration for this route yet", "server_error")
        if request.request_headers.end_of_stream:
            raise ProviderError(400, "a chat completion request needs a JSON body")
        return pb.ProcessingResponse(request_headers=pb.HeadersResponse())

    def session(self) -> aiohttp.ClientSession:
        """One HTTP session for the guards' webhooks and moderation calls (made in the loop)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    def _id(self, text: str, key: str) -> str | None:
        if (text, key) not in self._ids:
            self._ids[(text, key)] = metadata_value(text, key)
        return self._ids[(text, key)]

    async def _request_body(self, attempt: Attempt, body: pb.HttpBody) -> pb.ProcessingResponse:
        provider = attempt.provider
        assert provider is not None
        try:
            chat = json.loads(body.body)
        except ValueError as err:
            raise ProviderError(400, f"the request body is not valid JSON: {err}") from None
        if not isinstance(chat, dict):
            raise ProviderError(400, "the request body must be a JSON object (a chat completion request)")
        if attempt.route is not None:
            applied = await policy.apply_request(attempt.route, chat, headers=attempt.client_headers,
                                                 session=self.session())
            if isinstance(applied, Rejection):
                raise Rejected(applied)
            chat = applied
            if attempt.route.token_rate_limit is not None:
                await self._check_budget(attempt, attempt.route.token_rate_limit)
        attempt.stream = bool(chat.get("stream"))
        attempt.include_usage = wants_usage(chat)
        attempt.model = provider.model or str(chat.get("model") or "")
        codec = CODECS.get(provider.kind)
        if codec is None:
            raise ProviderError(501, f"provider {provider.kind} is not supported", "server_error")
        upstream = codec.request(chat, provider, attempt.client_headers)
        headers = {**upstream.headers, ":path": upstream.path, ":method": upstream.method,
                   "content-length": str(len(upstream.body))}
        mutation = pb.HeaderMutation(remove_headers=list(upstream.remove_headers), set_headers=[
            base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key=k, raw_value=v.encode()),
                                       append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD)
            for k, v in headers.items()])
        return pb.ProcessingResponse(request_body=pb.BodyResponse(response=pb.CommonResponse(
            header_mutation=mutation, body_mutation=pb.BodyMutation(body=upstream.body))))

    def _response_headers(self, attempt: Attempt, headers: pb.HttpHeaders) -> pb.ProcessingResponse:
        values = {h.key: (h.raw_value.decode() if h.raw_value else h.value) for h in headers.headers.headers}
        attempt.status = int(values.get(":status", "200"))
        attempt.response_headers = values
        streamed = values.get("content-type", "").split(";")[0].strip() in STREAM_TYPES
        provider = attempt.provider
        assert provider is not None
        metrics.answered(provider, attempt.model, attempt.status, attempt.gateway, attempt.httproute)
        if attempt.route is not None:
            guard = ResponseGuard(attempt.route, headers=values, session=self.session())
            attempt.guard = guard if guard.active else None
        mode = None
        if streamed and attempt.status < 300:
            attempt.translator = CODECS[provider.kind].stream(provider, attempt.model,
                                                              include_usage=attempt.include_usage)
            attempt.events = EventReader() if attempt.guard is not None else None
            content_type = "text/event-stream"
        else:
            # A whole answer comes in one piece, its headers held until it is translated:
            # a guard's rejection still sets the status.
            content_type = "application/json"
            mode = processing_mode_pb2.ProcessingMode(response_body_mode=processing_mode_pb2.ProcessingMode.BUFFERED)
        mutation = pb.HeaderMutation(remove_headers=["content-length"], set_headers=[
            _header("content-type", content_type), *(_header(k, v) for k, v in attempt.limit_headers)])
        return pb.ProcessingResponse(response_headers=pb.HeadersResponse(response=pb.CommonResponse(
            header_mutation=mutation)), mode_override=mode)

    async def _response_body(self, attempt: Attempt, body: pb.HttpBody) -> pb.ProcessingResponse:
        provider = attempt.provider
        assert provider is not None
        headers = None
        usage = None
        if attempt.translator is not None:
            out = attempt.translator.feed(body.body)
            if body.end_of_stream:
                out += attempt.translator.finish()
                self._count(attempt, attempt.translator.usage)
            if attempt.guard is not None:
                out = await self._guard_stream(attempt, out, body.end_of_stream)
            # The tokens go with the chunk that follows the provider's usage, not at the end
            # of the stream: a client may hang up on [DONE], and Envoy logs the request then.
            usage = attempt.translator.usage
        else:
            attempt.body += body.body
            out = b""
            if body.end_of_stream:
                answer = CODECS[provider.kind].response(attempt.status, attempt.response_headers,
                                                        bytes(attempt.body), provider, attempt.model)
                self._count(attempt, answer.usage)
                usage = answer.usage
                out = answer.encode()
                if attempt.guard is not None and answer.status < 300:
                    checked = await attempt.guard.check(answer.body)
                    if isinstance(checked, Rejection):
                        out, headers = checked.encode(), pb.HeaderMutation(
                            set_headers=[_header(":status", str(checked.status))])
                    else:
                        out = json.dumps(checked, separators=(",", ":")).encode()
                if answer.status != attempt.status:
                    headers = headers or pb.HeaderMutation(set_headers=[_header(":status", str(answer.status))])
        return pb.ProcessingResponse(response_body=pb.BodyResponse(response=pb.CommonResponse(
            header_mutation=headers, body_mutation=pb.BodyMutation(body=out))),
            dynamic_metadata=_tokens(attempt, usage))

    async def _guard_stream(self, attempt: Attempt, translated: bytes, last: bool) -> bytes:
        """The translated events through the response guard: each chunk with its text
        masked (or held back while a pattern may still match), a rejection as the last."""
        guard, events = attempt.guard, attempt.events
        assert guard is not None and events is not None
        out: list[dict[str, Any]] = []
        done = False
        for event in events.feed(translated) + (events.end() if last else []):
            if event.data == "[DONE]":
                done = True
                continue
            out += await guard.feed(json.loads(event.data))
            if guard.rejection is not None:
                break
        if (last or done) and guard.rejection is None:
            out += await guard.finish()
        text = b"".join(b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in out)
        return text + (DONE if done and guard.rejection is None else b"")

    def _count(self, attempt: Attempt, usage: Usage | None) -> None:
        provider = attempt.provider
        if usage is None or provider is None:
            return
        attempt.usage = usage
        metrics.count(provider, attempt.model, usage, attempt.gateway, attempt.httproute)
        limit = attempt.route.token_rate_limit if attempt.route is not None else None
        if limit is not None and attempt.limited:
            self.limiter.charge(limit.service, attempt.limited, usage.total - attempt.limit_counted)

    async def _check_budget(self, attempt: Attempt, limit: TokenRateLimit) -> None:
        """Ask the rate limit service before the provider is called; Rejected when the
        request's token budget is spent (or cannot be asked, failOpen false)."""
        request = token_limit.descriptors(limit, attempt.client_headers, attempt.source)
        if not request:
            return  # nothing to count it under (a header absent): not limited
        verdict = await self.limiter.check(limit.service, request)
        if not verdict.allowed:
            raise Rejected(verdict.rejection())
        attempt.limited, attempt.limit_counted, attempt.limit_headers = request, verdict.counted, verdict.headers


class Rejected(Exception):
    """A route's guard refused the request: answered by the gateway, the provider not called."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.message)
        self.rejection = rejection


def _tokens(attempt: Attempt, usage: Usage | None) -> struct_pb2.Struct | None:
    """The answer's tokens for Envoy's access logs (`%DYNAMIC_METADATA(lychgate.ai:KEY)%`),
    when the provider counted them and they were not handed over yet."""
    provider = attempt.provider
    if usage is None or provider is None or attempt.logged == (usage.input, usage.output):
        return None
    attempt.logged = (usage.input, usage.output)
    backend, _, name = provider.id.rpartition("/")
    out = struct_pb2.Struct()
    out.get_or_create_struct(METADATA).update({
        "input_tokens": usage.input, "output_tokens": usage.output, "total_tokens": usage.total,
        "model": attempt.model, "provider": name, "backend": backend})
    return out


def _header(key: str, value: str) -> base_pb2.HeaderValueOption:
    return base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key=key, raw_value=value.encode()),
                                      append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD)


def immediate(status: int, body: bytes, headers: tuple[tuple[str, str], ...] = ()) -> pb.ProcessingResponse:
    """An answer from the gateway itself, in OpenAI's shape: the provider is not called."""
    return pb.ProcessingResponse(immediate_response=pb.ImmediateResponse(
        status=http_status_pb2.HttpStatus(code=status),
        headers=pb.HeaderMutation(set_headers=[_header("content-type", "application/json"),
                                               *(_header(k, v) for k, v in headers)]),
        body=body, details="lychgate_ai_extension"))


# --- the process --------------------------------------------------------------------------


async def serve(listen: str, config_file: Path, stop: asyncio.Event | None = None) -> None:
    """Serve ext_proc on `listen`, with the config in `config_file` (reloaded when it changes)."""
    extension = Extension(load(config_file))
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    pb_grpc.add_ExternalProcessorServicer_to_server(extension, server)
    server.add_insecure_port(listen)
    await server.start()
    log.info("AI extension listening on %s", listen)
    watcher = asyncio.create_task(_watch(config_file, extension))
    try:
        if stop is None:
            await server.wait_for_termination()
        else:
            await stop.wait()
    finally:
        watcher.cancel()
        await server.stop(grace=1)
        await extension.limiter.close()


def load(config_file: Path) -> AIConfig:
    try:
        return AIConfig.from_json(config_file.read_text())
    except FileNotFoundError:
        return AIConfig()
    except (ValueError, TypeError) as err:
        # A config the control plane wrote cannot be half-valid; keep serving the last one.
        log.error("AI extension config %s cannot be read: %s", config_file, err)
        raise


async def _watch(config_file: Path, extension: Extension) -> None:
    async def reload() -> None:
        try:
            extension.config = load(config_file)
        except (ValueError, TypeError):
            return
        await extension.limiter.prune(extension.config)
        log.info("AI extension config reloaded: %d providers, %d routes",
                 len(extension.config.providers), len(extension.config.routes))

    await follow(config_file, reload)


__all__ = ["Extension", "metadata_value", "serve"]
