"""A stand-in for Amazon Bedrock's runtime (Converse and ConverseStream), on loopback.

It checks what AWS checks before a model runs: the SigV4 signature, recomputed with
botocore from the request as it arrived (the path as sent, the headers the request says
it signed, the body) with the secret key it knows, the credential scope (region, service
"bedrock"), the clock skew and the session token; failures are 403 with AWS's error body
and x-amzn-ErrorType. Then the Converse request as Bedrock validates it (known members,
roles user and assistant alternating from a user message, no blank text, tool blocks only
with a toolConfig, an existing guardrail). It answers like Bedrock: a ConverseResponse,
or an AWS event stream (application/vnd.amazon.eventstream: binary frames, each a prelude
with the total and headers lengths and its CRC32, the headers, the JSON payload and the
message's CRC32) sent in several writes with small delays.

What it says is made from the request: "You said: <the last user text>"; words are
tokens. Triggers in the user's text: a tool's name -> a toolUse; "forbidden" with a
guardrail -> guardrail_intervened. Model ids: "throttled" -> ThrottlingException (429),
containing "midstream-error" -> a modelStreamErrorException frame after two deltas,
"bogus" -> ValidationException. Told to fail (`fail(status)`), it answers AWS's error of
that status (429 ThrottlingException, 503 ServiceUnavailableException, ...).
"""

from __future__ import annotations

import hmac
import json
import re
import struct
import uuid
import zlib
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from aiohttp import web
from botocore.credentials import Credentials  # type: ignore[import-untyped]

from tests.ai.standins import Recorded, StandIn, count_tokens
from tests.sigv4 import expected_signature

_AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                   r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$")
_PATH = re.compile(r"^/model/([^/]+)/(converse|converse-stream)$")
CONVERSE_FIELDS = {"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig",
                   "additionalModelRequestFields", "additionalModelResponseFieldPaths", "promptVariables",
                   "requestMetadata", "performanceConfig"}
BLOCKS = {"text", "image", "document", "video", "toolUse", "toolResult", "guardContent", "reasoningContent",
          "cachePoint"}
PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"  # Bedrock pads its stream payloads ("p")
# The exception Bedrock names for a status when the stand-in is told to fail (fail()).
EXCEPTIONS = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
              429: "ThrottlingException", 500: "InternalServerException", 503: "ServiceUnavailableException"}


class AWSError(Exception):
    """A check failed: the stand-in answers with AWS's error."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def validation(message: str) -> AWSError:
    return AWSError(400, "ValidationException", message)


def operation(request: Recorded) -> tuple[str, str]:
    """The model id and the operation (converse, converse-stream) a request called."""
    m = _PATH.match(request.path)
    assert m is not None, request.path
    return unquote(m.group(1)), m.group(2)


class BedrockStandIn(StandIn):
    def __init__(self, region: str = "us-east-1", chunk_delay: float = 0.005, **kwargs: Any) -> None:
        super().__init__(chunk_delay=chunk_delay, **kwargs)
        self.region = region
        # access key id -> (secret access key, session token or None)
        self.credentials: dict[str, tuple[str, str | None]] = {
            "AKIDSTANDIN": ("standin/secret/key", None),
            "ASIATEMPORARY": ("temporary/secret", "session-token-xyz")}
        self.guardrails: dict[str, set[str]] = {"gr-standin": {"1", "DRAFT"}}
        self.route("*", "/{tail:.*}", self.handle)  # the signature is checked before the path

    def error(self, status: int, message: str, kind: str | None = None) -> web.Response:
        kind = kind or EXCEPTIONS.get(status, "InternalServerException")
        return web.json_response({"message": message}, status=status, headers={
            "x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/",
            "x-amzn-RequestId": str(uuid.uuid4())})

    async def handle(self, request: web.Request) -> web.StreamResponse:
        recorded = self.recorded(request)
        try:
            self.check_signature(request, recorded.body)
            m = _PATH.match(recorded.path)
            if request.method != "POST" or m is None:
                raise AWSError(404, "UnknownOperationException", f"no operation at {recorded.path}")
            model = unquote(m.group(1))
            converse = self.json_body(request)
            if converse is None:
                raise AWSError(400, "SerializationException", "Malformed JSON")
            self.check_converse(converse)
            if model == "throttled":
                raise AWSError(429, "ThrottlingException", "Too many requests, please wait before trying again.")
            if "bogus" in model:
                raise validation("The provided model identifier is invalid.")
        except AWSError as e:
            return self.refuse(request, e.status, e.message, kind=e.kind)
        content, stop, usage = answer(converse)
        request_id = str(uuid.uuid4())
        if m.group(2) == "converse":
            return web.json_response({"output": {"message": {"role": "assistant", "content": content}},
                                      "stopReason": stop, "usage": usage, "metrics": {"latencyMs": 42}},
                                     headers={"x-amzn-RequestId": request_id})
        return await self.send_stream(request, stream_frames(content, stop, usage, fail="midstream-error" in model),
                                      "application/vnd.amazon.eventstream", {"x-amzn-RequestId": request_id})

    def check_signature(self, request: web.Request, body: bytes) -> None:
        header = request.headers.get("authorization")
        if not header:
            raise AWSError(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
        m = _AUTH.match(header)
        if m is None:
            raise AWSError(403, "IncompleteSignatureException", f"Authorization header requires 'Credential', "
                           f"'Signature' and 'SignedHeaders' parameters: {header[:40]}...")
        access, date, region, service, signed, signature = m.groups()
        if access not in self.credentials:
            raise AWSError(403, "UnrecognizedClientException", "The security token included in the request is "
                           "invalid.")
        secret, token = self.credentials[access]
        if token is not None and request.headers.get("x-amz-security-token") != token:
            raise AWSError(403, "UnrecognizedClientException", "The security token included in the request is "
                           "invalid.")
        names = signed.split(";")
        if "host" not in names or (token is not None and "x-amz-security-token" not in names):
            raise AWSError(403, "InvalidSignatureException", "'Host' and the security token must be signed.")
        if service != "bedrock" or region != self.region:
            raise AWSError(403, "InvalidSignatureException", f"Credential should be scoped to a valid region "
                           f"and service ('{self.region}', 'bedrock'), not ('{region}', '{service}').")
        stamp = request.headers.get("x-amz-date", "")
        try:
            when = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError:
            raise AWSError(403, "IncompleteSignatureException", "x-amz-date is missing or malformed") from None
        if abs((datetime.now(UTC) - when).total_seconds()) > 300 or not stamp.startswith(date):
            raise AWSError(403, "InvalidSignatureException", f"Signature expired: {stamp} is now earlier than "
                           "the allowed 5 minutes.")
        expected = expected_signature(request, body, names, Credentials(access, secret, token), service, region)
        if not hmac.compare_digest(expected, signature):
            raise AWSError(403, "InvalidSignatureException", "The request signature we calculated does not "
                           "match the signature you provided. Check your AWS Secret Access Key and signing "
                           "method. Consult the service documentation for details.")

    def check_converse(self, body: Any) -> None:
        if not isinstance(body, dict):
            raise AWSError(400, "SerializationException", "Expected an object")
        unknown = set(body) - CONVERSE_FIELDS
        if unknown:
            raise AWSError(400, "SerializationException", f"Unrecognized field {sorted(unknown)[0]!r}")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise validation("1 validation error detected: Value null at 'messages' failed to satisfy "
                             "constraint: Member must not be null")
        uses_tools = False
        for i, msg in enumerate(messages):
            role = msg.get("role")
            if role not in ("user", "assistant"):
                raise validation(f"1 validation error detected: Value '{role}' at 'messages.{i + 1}.member.role' "
                                 "failed to satisfy constraint: Member must satisfy enum value set: "
                                 "[user, assistant]")
            if i == 0 and role != "user":
                raise validation("A conversation must start with a user message. Try again with a "
                                 "conversation that starts with a user message.")
            if i and role == messages[i - 1]["role"]:
                raise validation("A conversation must alternate between user and assistant roles. Make sure "
                                 "the conversation alternates between user and assistant roles and try again.")
            content = msg.get("content")
            if not isinstance(content, list) or not content:
                raise validation(f"The content field in the Message object at messages.{i} is empty. Add a "
                                 "ContentBlock object to the content field and try again.")
            for j, block in enumerate(content):
                if len(set(block) & BLOCKS) != 1 or set(block) - BLOCKS:
                    raise validation(f"messages.{i}.content.{j}: a ContentBlock holds exactly one member")
                if "text" in block and not block["text"].strip():
                    raise validation(f"The text field in the ContentBlock object at messages.{i}.content.{j} is "
                                     "blank. Add text to the text field, and try again.")
                if "toolResult" in block:
                    uses_tools = True
                    made = {b["toolUse"]["toolUseId"] for b in messages[i - 1]["content"] if "toolUse" in b} \
                        if i else set()
                    if block["toolResult"].get("toolUseId") not in made:
                        raise validation(f"messages.{i}.content.{j}: the toolResult answers no toolUse of the "
                                         "previous turn.")
                uses_tools = uses_tools or "toolUse" in block
        if uses_tools and "toolConfig" not in body:
            raise validation("The toolConfig field must be defined when using toolUse and toolResult content "
                             "blocks.")
        for block in body.get("system", []):
            if set(block) - {"text", "guardContent", "cachePoint"} or not str(block.get("text", "x")).strip():
                raise validation("system: a SystemContentBlock holds non-blank text")
        config = body.get("inferenceConfig", {})
        if set(config) - {"maxTokens", "temperature", "topP", "stopSequences"}:
            raise AWSError(400, "SerializationException", f"Unrecognized field in inferenceConfig: {config}")
        if not isinstance(config.get("maxTokens", 1), int) or config.get("maxTokens", 1) < 1:
            raise validation("inferenceConfig.maxTokens: Member must have value greater than or equal to 1")
        for name in ("temperature", "topP"):
            if not 0 <= config.get(name, 0) <= 1:
                raise validation(f"inferenceConfig.{name}: Member must have value less than or equal to 1")
        tools = body.get("toolConfig")
        if tools is not None:
            for tool in tools.get("tools", []):
                spec = tool.get("toolSpec", {})
                if not spec.get("name") or not isinstance(spec.get("inputSchema", {}).get("json"), dict):
                    raise validation("toolConfig.tools: a toolSpec has a name and an inputSchema.json")
            choice = tools.get("toolChoice", {"auto": {}})
            if len(choice) != 1 or next(iter(choice)) not in ("auto", "any", "tool"):
                raise validation("toolConfig.toolChoice: exactly one of auto, any, tool")
        guardrail = body.get("guardrailConfig")
        if guardrail is not None:
            if set(guardrail) - {"guardrailIdentifier", "guardrailVersion", "trace", "streamProcessingMode"}:
                raise AWSError(400, "SerializationException", f"Unrecognized field in guardrailConfig: {guardrail}")
            if guardrail.get("guardrailVersion") not in self.guardrails.get(guardrail.get("guardrailIdentifier"), ()):
                raise validation("The guardrail identifier or version provided in the request does not exist.")


# ---- the answer ------------------------------------------------------------------------

def _words(blocks: list[dict[str, Any]]) -> int:
    return sum(count_tokens(str(b.get("text", ""))) for b in blocks)


def answer(body: dict[str, Any]) -> tuple[list[dict[str, Any]], str, dict[str, int]]:
    """The answer's content blocks, stop reason and usage."""
    messages = body["messages"]
    last = messages[-1]["content"]
    user = " ".join(b["text"] for b in last if "text" in b)
    results = [b["toolResult"] for b in last if "toolResult" in b]
    tools = [t["toolSpec"]["name"] for t in body.get("toolConfig", {}).get("tools", [])]
    forced = body.get("toolConfig", {}).get("toolChoice", {})
    config = body.get("inferenceConfig", {})
    stop = "end_turn"
    called = next((t for t in tools if t in user), None) or (tools[0] if tools and ("any" in forced) else None)
    if "tool" in forced:
        called = forced["tool"]["name"]
    if called and not results:
        content: list[dict[str, Any]] = [{"toolUse": {"toolUseId": f"tooluse_{uuid.uuid4().hex[:16]}",
                                                      "name": called, "input": {"query": user}}}]
        stop = "tool_use"
    elif "guardrailConfig" in body and "forbidden" in user:
        content, stop = [{"text": "Sorry, the model cannot answer this question."}], "guardrail_intervened"
    else:
        if results:
            text = "The tool said: " + json.dumps(results[0]["content"][0].get("json")
                                                  or results[0]["content"][0].get("text"), sort_keys=True)
        else:
            text = f"You said: {user}"
        for seq in config.get("stopSequences", []):
            if seq in text:
                text, stop = text.split(seq)[0].rstrip(), "stop_sequence"
        words = text.split()
        if len(words) > config.get("maxTokens", len(words)):
            words, stop = words[:config["maxTokens"]], "max_tokens"
        content = [{"text": " ".join(words)}]
    prompt = sum(_words(m["content"]) for m in messages) + _words(body.get("system", []))
    output = _words(content) + 3 * sum("toolUse" in b for b in content)
    return content, stop, {"inputTokens": prompt, "outputTokens": output, "totalTokens": prompt + output}


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event stream message: prelude (total length, headers length, prelude CRC32),
    headers (name length, name, type 7 = string, value length, value), payload, and the
    CRC32 of all that precedes it."""
    raw = b"".join(bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
                   for k, v in headers.items())
    prelude = struct.pack(">II", 12 + len(raw) + len(payload) + 4, len(raw))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + raw + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(kind: str, body: dict[str, Any]) -> bytes:
    return frame({":event-type": kind, ":content-type": "application/json", ":message-type": "event"},
                 json.dumps({**body, "p": PADDING[:len(kind) + 10]}).encode())


def exception(kind: str, message: str) -> bytes:
    return frame({":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"},
                 json.dumps({"message": message}).encode())


def stream_frames(content: list[dict[str, Any]], stop: str, usage: dict[str, int], fail: bool) -> list[bytes]:
    frames = [event("messageStart", {"role": "assistant"})]
    for index, block in enumerate(content):
        if "toolUse" in block:
            use = block["toolUse"]
            frames.append(event("contentBlockStart", {"contentBlockIndex": index, "start": {
                "toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}}))
            arguments = json.dumps(use["input"])
            for piece in (arguments[:len(arguments) // 2], arguments[len(arguments) // 2:]):
                frames.append(event("contentBlockDelta", {"contentBlockIndex": index,
                                                          "delta": {"toolUse": {"input": piece}}}))
        else:
            words = block["text"].split()
            for k in range(0, len(words), 2):
                piece = " ".join(words[k:k + 2]) + (" " if k + 2 < len(words) else "")
                frames.append(event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}}))
                if fail and k == 2:
                    return [*frames, exception("modelStreamErrorException",
                                               "The model stream failed: the stand-in was told to.")]
        frames.append(event("contentBlockStop", {"contentBlockIndex": index}))
    frames.append(event("messageStop", {"stopReason": stop}))
    frames.append(event("metadata", {"usage": usage, "metrics": {"latencyMs": 42}}))
    return frames
