"""The AI extension's config: keys stay out of every repr (a log line, an exception, a
debugger's view of a provider or of the whole config) yet reach the extension."""

from __future__ import annotations

from lychgate.ai.config import AIConfig, Provider

TOKEN, SECRET, SESSION = "sk-live-never-shown", "aws/secret/never-shown", "aws-session-never-shown"


def test_no_repr_shows_a_key_and_the_extension_still_gets_them() -> None:
    provider = Provider(id="ai/llm/bedrock", kind="bedrock", host="bedrock-runtime.us-east-1.amazonaws.com",
                        port=443, tls=True, region="us-east-1", token=TOKEN, access_key_id="AKIDEXAMPLE",
                        secret_access_key=SECRET, session_token=SESSION)
    config = AIConfig(providers={provider.id: provider})
    for shown in (repr(provider), str(provider), f"{provider!r}", repr(config), str([provider])):
        assert not [key for key in (TOKEN, SECRET, SESSION) if key in shown], shown
    assert "AKIDEXAMPLE" in repr(provider)  # the key's id is no secret: it tells which key
    assert AIConfig.from_json(config.to_json()).providers[provider.id] == provider
