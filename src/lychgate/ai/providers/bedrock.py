"""Amazon Bedrock's Converse API: OpenAI's Chat Completions to `POST /model/{modelId}/converse`
(streamed: `/converse-stream`, answered as an AWS event stream) and the answer back.

Requests are signed with SigV4 by botocore (service "bedrock", the provider's region and
credentials) over the exact bytes and path sent and the `host` header: the extension
must send `UpstreamRequest.headers` as they are, `host` included, for AWS to compute the
same signature.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]
from botocore.eventstream import EventStreamBuffer, EventStreamMessage, ParserError  # type: ignore[import-untyped]

from lychgate.ai.config import Provider
from lychgate.ai.providers import chat as oai
from lychgate.ai.providers.base import (
    Answer,
    ProviderCodec,
    ProviderError,
    UpstreamRequest,
    Usage,
    error_answer,
    json_object,
    provider_error,
    register,
    unreadable,
)
from lychgate.ai.providers.chat import invalid
from lychgate.ai.providers.credentials import header_value

# botocore logs the canonical request at DEBUG, and with it the session token.
logging.getLogger("botocore.auth").setLevel(logging.INFO)

STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
        "model_context_window_exceeded": "length", "tool_use": "tool_calls",
        "guardrail_intervened": "content_filter", "content_filtered": "content_filter"}

# The HTTP status of Bedrock's exceptions, for the ones a stream carries as events.
EXCEPTION_STATUS = {"validationException": 400, "accessDeniedException": 403,
                    "resourceNotFoundException": 404, "modelTimeoutException": 408,
                    "modelStreamErrorException": 424, "throttlingException": 429,
                    "internalServerException": 500, "serviceUnavailableException": 503}


@dataclass
class BedrockCodec(ProviderCodec):
    kind: str = "bedrock"
    default_host: str = "bedrock-runtime.{region}.amazonaws.com"

    def upstream_host(self, location: str | None = None, region: str | None = None) -> str:
        return self.default_host.format(region=region or "us-east-1")

    def request(self, chat: dict[str, Any], provider: Provider, client_headers: dict[str, str]) -> UpstreamRequest:
        model = oai.model(chat, provider)
        body = json.dumps(converse(chat, provider), separators=(",", ":")).encode()
        stream = oai.wants_stream(chat)
        path = provider.path or f"/model/{quote(model, safe='')}/converse"
        if stream and path.endswith("/converse"):
            path += "-stream"
        headers = sign(provider, path, body)
        # The client's own AWS headers would be read by AWS beside ours; ours replace the rest.
        remove = () if provider.session_token else ("x-amz-security-token",)
        return UpstreamRequest(path, headers, body, remove_headers=remove, stream=stream)

    def error(self, status: int, headers: dict[str, str], body: bytes) -> Answer:
        return aws_error(status, headers, body)

    def answer(self, data: dict[str, Any], headers: dict[str, str], model: str) -> Answer:
        output = data.get("output")
        message = output.get("message") if isinstance(output, dict) else None
        if not isinstance(message, dict):
            return unreadable(json.dumps(data).encode(), "has no output.message")
        text, calls = content_of(message)
        choice = oai.choice_body(0, text if text or not calls else None, calls, stop_reason(data.get("stopReason")))
        return oai.completion(oai.completion_id(header_value(headers, "x-amzn-requestid")), model, [choice],
                              usage_of(data.get("usage")))

    def stream(self, provider: Provider, model: str, *, include_usage: bool = False) -> BedrockStream:
        return BedrockStream(model, include_usage)


def host_header(provider: Provider) -> str:
    default = 443 if provider.tls else 80
    return provider.host if provider.port == default else f"{provider.host}:{provider.port}"


def sign(provider: Provider, path: str, body: bytes) -> dict[str, str]:
    """The headers of a SigV4-signed POST of body to path: host, content-type, x-amz-date,
    x-amz-security-token (with a session token) and authorization."""
    if not provider.access_key_id or not provider.secret_access_key:
        raise ProviderError(500, "The AI Backend's provider has no AWS credentials configured.", "server_error",
                            code="provider_credentials_missing")
    host = host_header(provider)
    request = AWSRequest(method="POST", url=f"{'https' if provider.tls else 'http'}://{host}{path}", data=body,
                         headers={"host": host, "content-type": "application/json"})
    credentials = Credentials(provider.access_key_id, provider.secret_access_key, provider.session_token)
    SigV4Auth(credentials, "bedrock", provider.region or "us-east-1").add_auth(request)
    return {name.lower(): value for name, value in request.headers.items()}


# ---- the request -----------------------------------------------------------------------

def converse(chat: dict[str, Any], provider: Provider) -> dict[str, Any]:
    msgs = oai.conversation(chat)
    if oai.choices(chat) > 1:
        raise invalid("n", "Bedrock's Converse API answers with one choice.")
    body: dict[str, Any] = {"messages": [{"role": role, "content": blocks}
                                         for role, blocks in oai.merged(list(map(_turn, msgs)))]}
    system = [{"text": m.text} for m in msgs if m.role == "system" and m.text]
    if system:
        body["system"] = system
    config: dict[str, Any] = {}
    if (tokens := oai.max_tokens(chat)) is not None:
        config["maxTokens"] = tokens
    for openai_name, name in (("temperature", "temperature"), ("top_p", "topP")):
        if (value := oai.number(chat, openai_name)) is not None:
            config[name] = value
    if stops := oai.stop_sequences(chat):
        config["stopSequences"] = stops
    if config:
        body["inferenceConfig"] = config
    if tools := tool_config(chat, any(m.tool_calls for m in msgs)):
        body["toolConfig"] = tools
    if provider.guardrail_identifier:
        body["guardrailConfig"] = {"guardrailIdentifier": provider.guardrail_identifier,
                                   "guardrailVersion": provider.guardrail_version or "DRAFT"}
    return body


def _turn(m: oai.Message) -> tuple[str, list[dict[str, Any]]]:
    if m.role == "system":
        return "system", []  # in body["system"]; merged() drops empty turns
    if m.role == "tool":
        result = json_object(m.text)
        content = [{"json": result}] if result is not None else [{"text": m.text}]
        return "user", [{"toolResult": {"toolUseId": m.tool_call_id, "content": content}}]
    blocks: list[dict[str, Any]] = [{"text": m.text}] if m.text else []
    blocks += [{"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}} for c in m.tool_calls]
    return m.role, blocks


def tool_config(chat: dict[str, Any], history_uses_tools: bool) -> dict[str, Any] | None:
    functions = oai.functions(chat)
    choice = oai.tool_choice(chat)
    # Converse has no "none": leave the tools out, unless earlier turns used them (then
    # Converse wants their specs).
    if not functions or (choice == "none" and not history_uses_tools):
        return None
    config: dict[str, Any] = {"tools": [{"toolSpec": {"name": f.name, "description": f.description or f.name,
                                                      "inputSchema": {"json": f.parameters}}}
                                        for f in functions]}
    if choice == "auto":
        config["toolChoice"] = {"auto": {}}
    elif choice == "required":
        config["toolChoice"] = {"any": {}}
    elif choice not in (None, "none"):
        config["toolChoice"] = {"tool": {"name": choice}}
    return config


# ---- the answer ------------------------------------------------------------------------

def aws_error(status: int, headers: dict[str, str], body: bytes) -> Answer:
    """AWS's error (the exception's name in x-amzn-ErrorType, {"message"} in the body)
    in OpenAI's shape, the exception's name as the code."""
    kind = header_value(headers, "x-amzn-errortype") or ""
    data = json_object(body) or {}
    message = data.get("message") or data.get("Message")
    kind = kind or str(data.get("__type") or "").rpartition("#")[2]
    if not isinstance(message, str):
        return error_answer(status, body)
    return Answer(status, provider_error(status, message, kind.partition(":")[0] or None))


def content_of(message: dict[str, Any]) -> tuple[str, list[oai.ToolCall]]:
    texts, calls = [], []
    for block in message.get("content") or []:
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            calls.append(oai.ToolCall(str(use.get("toolUseId", "")), str(use.get("name", "")),
                                      use.get("input") or {}))
    return "".join(texts), calls


def stop_reason(reason: Any) -> str:
    return STOP.get(str(reason), "stop")


def usage_of(usage: Any) -> Usage | None:
    """inputTokens leaves out the prompt tokens read from or written to the prompt cache;
    they are input all the same (totalTokens counts them)."""
    if not isinstance(usage, dict):
        return None
    cached = int(usage.get("cacheReadInputTokens") or 0) + int(usage.get("cacheWriteInputTokens") or 0)
    return Usage(int(usage.get("inputTokens") or 0) + cached, int(usage.get("outputTokens") or 0))


class BedrockStream:
    """ConverseStream's AWS event stream (application/vnd.amazon.eventstream: binary frames
    with CRCs, cut anywhere by the network), decoded by botocore as the bytes arrive:
    messageStart, contentBlockStart (a tool call), contentBlockDelta, contentBlockStop,
    messageStop (the stop reason), metadata (the usage); exceptions as frames too."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.frames = EventStreamBuffer()
        self.chunks = oai.Chunks(model, include_usage)
        self.usage: Usage | None = None
        self.tools: dict[int, int] = {}  # content block -> tool call index

    def feed(self, chunk: bytes) -> bytes:
        if self.chunks.failed:
            return b""
        self.frames.add_data(chunk)
        out = []
        try:
            for frame in self.frames:
                out.append(self._frame(frame))
                if self.chunks.failed:  # an exception frame: nothing but [DONE] follows
                    break
        except ParserError as e:
            out.append(self.chunks.error(provider_error(502, f"The provider sent a broken event stream: {e}")))
        return b"".join(out)

    def finish(self) -> bytes:
        return self.chunks.end(self.usage)

    def _frame(self, frame: EventStreamMessage) -> bytes:
        headers = frame.headers
        try:
            data = json.loads(frame.payload or b"{}")
        except ValueError:
            data = {}
        kind = headers.get(":message-type")
        if kind == "exception":
            name = str(headers.get(":exception-type", ""))
            status = EXCEPTION_STATUS.get(name, 500)
            return self.chunks.error(provider_error(status, str(data.get("message") or name), name))
        if kind == "error":
            return self.chunks.error(provider_error(500, str(headers.get(":error-message", "")),
                                                        str(headers.get(":error-code", "")) or None))
        event = headers.get(":event-type")
        if event == "messageStart":
            return self.chunks.delta(0, {"content": ""})
        if event == "contentBlockStart":
            use = (data.get("start") or {}).get("toolUse")
            if not isinstance(use, dict):
                return b""
            index = self.tools.setdefault(int(data.get("contentBlockIndex", 0)), len(self.tools))
            call = {"index": index, "id": use.get("toolUseId", ""), "type": "function",
                    "function": {"name": use.get("name", ""), "arguments": ""}}
            return self.chunks.delta(0, {"tool_calls": [call]})
        if event == "contentBlockDelta":
            delta = data.get("delta") or {}
            if isinstance(delta.get("text"), str):
                return self.chunks.delta(0, {"content": delta["text"]})
            use = delta.get("toolUse")
            block = int(data.get("contentBlockIndex", 0))
            if isinstance(use, dict) and block in self.tools:
                call = {"index": self.tools[block], "function": {"arguments": str(use.get("input", ""))}}
                return self.chunks.delta(0, {"tool_calls": [call]})
            return b""  # reasoning and other blocks OpenAI's chunks have no place for
        if event == "messageStop":
            return self.chunks.delta(0, {}, stop_reason(data.get("stopReason")))
        if event == "metadata":
            self.usage = usage_of(data.get("usage"))
        return b""


register(BedrockCodec())
