"""docs/ai.md's "Try it", as written: examples/ai served by `lychgate run`, two
`lychgate echo --llm` stand-ins, and the official openai SDK doing what the page shows
(only the stand-ins' ports are picked free, in case 8011 and 8012 are taken)."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.harness import Lychgate, free_port, wait_for

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ai"


@pytest.fixture
def llms() -> Iterator[list[tuple[int, subprocess.Popen[bytes]]]]:
    out = []
    for _ in range(2):
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "lychgate", "echo", "--llm", "--port", str(port),
                                 "--key", "sk-echo"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append((port, proc))
    for port, _ in out:
        wait_for(functools.partial(_up, port), 20, f"the stand-in LLM on {port}")
    yield out
    for _, proc in out:
        proc.terminate()
        proc.wait(10)


def _up(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
    except httpx.HTTPError:
        return False
    return True


def test_the_documented_example(lychgate: Lychgate, llms: list[tuple[int, subprocess.Popen[bytes]]]) -> None:
    for path in EXAMPLE.glob("*.yaml"):
        text = path.read_text().replace("port: 8011", f"port: {llms[0][0]}").replace("port: 8012",
                                                                                      f"port: {llms[1][0]}")
        lychgate.write(path.name, text)
    lychgate.start()
    client = openai.OpenAI(base_url=f"http://{lychgate.address('ai')}:8080/v1", api_key="anything", max_retries=0)

    def hello() -> str | None:
        try:
            return client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello there"}]).choices[0].message.content
        except openai.APIError:
            return None
    assert wait_for(hello, 30, "the example to answer") == "You said: Hello there"

    words = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "one two three"}]) if c.choices]
    assert "".join(words) == "You said: one two three" and len([w for w in words if w]) == 5

    with pytest.raises(openai.UnprocessableEntityError, match="Card numbers stay out of prompts"):
        client.chat.completions.create(model="gpt-4o-mini",
                                       messages=[{"role": "user", "content": "my card is 4111 1111 1111 1111"}])

    masked = client.chat.completions.create(model="gpt-4o-mini",
                                            messages=[{"role": "user", "content": "write to jane@example.com"}])
    assert masked.choices[0].message.content == "You said: write to <EMAIL_ADDRESS>"

    llms[0][1].terminate()  # the first priority group goes away: the second answers
    llms[0][1].wait(10)
    assert hello() == "You said: Hello there"
