"""Streamed answers masked as they pass: the same output as masking the whole text,
text held back only while a pattern may still be matching it, chunks still in
OpenAI's chat.completion.chunk shape."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk

from lychgate.ai.config import RouteSettings
from lychgate.ai.guard_regex import MaskStream, RegexGuard, parse_regex
from lychgate.ai.policy import ResponseGuard


def regex(*builtins: str, matches: tuple[str, ...] = (), action: str = "MASK") -> RegexGuard:
    g = parse_regex({"builtins": list(builtins), "matches": [{"pattern": m} for m in matches],
                     "action": action}, "regex")
    assert g is not None
    return g


ALL = regex("CREDIT_CARD", "SSN", "PHONE_NUMBER", "EMAIL",
            matches=("credit card", r"secret-\d{4}", r"token\s+\w+"))

FRAGMENTS = [
    "4111 1111 1111 1111", "5555555555554444", "4111 1111 1111 1112", "123-45-6789", "000-12-3456",
    "(555) 123-4567", "+44 20 7946 0958", "jane.doe@example.com", "x@y", "Credit Card", "secret-1234",
    "token   abc", "Hello", "the answer is", "42", "1234", "12/27", "-", ".", "@", "(", "+",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=12),
       st.lists(st.sampled_from([" ", "", "\n", ", ", "-"]), min_size=12, max_size=12),
       st.lists(st.integers(min_value=0, max_value=400), max_size=30))
def test_a_stream_masks_exactly_as_the_whole_text(fragments: list[str], seps: list[str],
                                                  cuts: list[int]) -> None:
    text = "".join(f + s for f, s in zip(fragments, seps, strict=False))
    stream = MaskStream(ALL)
    out, last = [], 0
    for cut in [*sorted(c for c in cuts if c < len(text)), len(text)]:
        piece = stream.push(text[last:cut])
        assert piece is not None
        out.append(piece)
        last = cut
    out.append(stream.push("", final=True) or "")
    assert "".join(out) == ALL.mask(text)


def test_prose_goes_out_at_once() -> None:
    stream = MaskStream(regex("CREDIT_CARD", "SSN", "PHONE_NUMBER", "EMAIL"))
    for piece in ["The capital ", "of France ", "is Paris. "]:
        assert stream.push(piece) == piece


def test_only_what_may_still_be_a_match_waits() -> None:
    stream = MaskStream(regex("CREDIT_CARD"))
    assert stream.push("My card is 4111 1111") == "My card is "  # digits may be a card
    assert stream.push(" 1111 1111, thanks") == "<CREDIT_CARD>, thanks"  # ',' settles them
    email = MaskStream(regex("EMAIL"))
    assert email.push("write to jane") == "write to "  # one word: may be an address
    assert email.push(".doe@example.com or call") == "<EMAIL_ADDRESS> or "


def test_a_match_split_anywhere_is_masked() -> None:
    text = "ssn 123-45-6789 ok"
    for cut in range(len(text) + 1):
        stream = MaskStream(regex("SSN"))
        out = (stream.push(text[:cut]) or "") + (stream.push(text[cut:]) or "") + (stream.push("", True) or "")
        assert out == "ssn <US_SSN> ok", cut


def test_held_text_is_bounded_by_the_pattern() -> None:
    digits = MaskStream(regex("CREDIT_CARD"))
    sent = digits.push("1234 " * 40)  # never a card (starts with 1), never settled by a letter
    assert sent is not None and 200 - len(sent) <= 34  # the card pattern reaches 34 characters
    custom = MaskStream(regex(matches=("credit card",)))
    sent = custom.push("I have a credit")
    assert sent == "I ha"  # a custom pattern holds its width (11) back
    assert custom.push(" card.", final=True) == "ve a <CUSTOM>."


def test_the_end_of_the_stream_releases_the_rest() -> None:
    stream = MaskStream(regex("CREDIT_CARD"))
    assert stream.push("ends with 4111 1111 1111 1111") == "ends with "
    assert stream.push("", final=True) == "<CREDIT_CARD>"


def test_reject_stops_a_stream_only_on_a_decided_match() -> None:
    stream = MaskStream(regex("SSN", action="REJECT"))
    assert stream.push("id 123-45-") == "id "
    assert stream.push("678") == ""
    assert stream.push("9.") is None


def chunk(content: str | None = None, *, index: int = 0, finish: str | None = None,
          role: str | None = None) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
            "model": "gpt-4o-mini", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def route(response: dict[str, Any]) -> RouteSettings:
    return RouteSettings("default/route", prompt_guard={"response": response})


async def run(guard: ResponseGuard, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for c in chunks:
        out.extend(await guard.feed(c))
    out.extend(await guard.finish())
    return out


def text_of(chunks: list[dict[str, Any]], index: int = 0) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks
                   if c.get("choices") and c["choices"][0]["index"] == index)


async def test_chunks_keep_flowing_and_stay_openai_chunks() -> None:
    guard = ResponseGuard(route({"regex": {"builtins": ["CREDIT_CARD"]}}))
    chunks = [chunk("", role="assistant"), chunk("Your card "), chunk("4111 1111 "), chunk("1111 1111"),
              chunk(" is on file."), chunk(finish="stop"),
              {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
               "model": "gpt-4o-mini", "choices": [],
               "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}}]
    out = await run(guard, chunks)
    assert len(out) == len(chunks)  # one out for each in: nothing waits for a whole chunk
    for c in out:
        ChatCompletionChunk.model_validate(c)
    assert [c["choices"][0]["delta"].get("content") for c in out[:5]] == [
        "", "Your card ", "", "", "<CREDIT_CARD> is on file."]
    assert out[-1]["usage"]["total_tokens"] == 16


async def test_finish_reason_releases_the_held_text_in_its_chunk() -> None:
    guard = ResponseGuard(route({"regex": {"builtins": ["SSN"]}}))
    out = await run(guard, [chunk("SSN 123-45-"), chunk("6789", finish="stop")])
    assert [c["choices"][0]["delta"]["content"] for c in out] == ["SSN ", "<US_SSN>"]
    assert out[-1]["choices"][0]["finish_reason"] == "stop"


async def test_choices_are_guarded_apart() -> None:
    guard = ResponseGuard(route({"regex": {"builtins": ["EMAIL"]}}))
    out = await run(guard, [chunk("mail jane@", index=0), chunk("call 5", index=1),
                            chunk("example.com ", index=0), chunk("55 now ", index=1),
                            chunk(finish="stop", index=0), chunk(finish="stop", index=1)])
    assert text_of(out, 0) == "mail <EMAIL_ADDRESS> "
    assert text_of(out, 1) == "call 555 now "


async def test_a_stream_without_finish_reason_gets_its_rest_at_finish() -> None:
    guard = ResponseGuard(route({"regex": {"builtins": ["CREDIT_CARD"]}}))
    out = await run(guard, [chunk("pay with 4111111111111111")])
    assert len(out) == 2
    ChatCompletionChunk.model_validate(out[1])
    assert text_of(out) == "pay with <CREDIT_CARD>"


async def test_reject_ends_the_stream_with_an_openai_error() -> None:
    guard = ResponseGuard(route({"regex": {"builtins": ["SSN"], "action": "REJECT"},
                                 "response": {"message": "No SSNs here", "statusCode": 451}}))
    out = [*await guard.feed(chunk("Sure, it is ")), *await guard.feed(chunk("123-45-6789."))]
    assert out[0]["choices"][0]["delta"]["content"] == "Sure, it is "
    assert out[1] == {"error": {"message": "No SSNs here", "type": "invalid_request_error",
                                "param": None, "code": "content_policy_violation"}}
    assert guard.rejection is not None and guard.rejection.status == 451
    assert await guard.feed(chunk(" more")) == []
    assert await guard.finish() == []


async def test_a_route_without_response_guards_is_inactive() -> None:
    assert not ResponseGuard(RouteSettings("r", prompt_guard={"request": {"regex": {"builtins": ["SSN"]}}})).active
    assert ResponseGuard(route({"regex": {"builtins": ["SSN"]}})).active


def test_a_card_starting_inside_a_refused_candidate_is_masked() -> None:
    """'3456 4111 1111 1111 1111' fails Luhn from its first digit; the card from the fifth
    on is still found (hypothesis' counterexample), whole and streamed."""
    text = "000-12-3456 4111 1111 1111 1111 "
    assert ALL.mask(text) == "000-12-3456 <CREDIT_CARD> "
    stream = MaskStream(ALL)
    assert (stream.push(text) or "") + (stream.push("", final=True) or "") == "000-12-3456 <CREDIT_CARD> "
