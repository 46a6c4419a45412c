"""TrafficPolicy `ai.promptEnrichment`: messages put before and after the client's.

kgateway's AIPromptEnrichment: `prepend` and `append` lists of {role, content},
roles written as in its docs (`SYSTEM`, `USER`) and sent lower-cased, as OpenAI's
API spells them. The order is: prepend (as listed), the client's messages,
append (as listed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lychgate.ai.rejection import PolicyError


@dataclass(frozen=True)
class Enrichment:
    prepend: tuple[tuple[str, str], ...] = ()  # (role, content)
    append: tuple[tuple[str, str], ...] = ()


def parse_enrichment(raw: Mapping[str, Any] | None,
                     where: str = "promptEnrichment") -> Enrichment | None:
    if not raw:
        return None
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where}: must be an object with prepend and/or append")
    lists = {}
    for key in ("prepend", "append"):
        messages = raw.get(key) or ()
        if not isinstance(messages, (list, tuple)):
            raise PolicyError(f"{where}.{key}: must be a list of messages")
        lists[key] = tuple(_message(m, f"{where}.{key}[{i}]") for i, m in enumerate(messages))
    if not lists["prepend"] and not lists["append"]:
        return None
    return Enrichment(lists["prepend"], lists["append"])


def _message(m: Any, at: str) -> tuple[str, str]:
    if not isinstance(m, Mapping):
        raise PolicyError(f"{at}: must be an object with role and content")
    role, content = m.get("role"), m.get("content")
    if not isinstance(role, str) or not role:
        raise PolicyError(f"{at}.role: required, such as SYSTEM or USER")
    if not isinstance(content, str):
        raise PolicyError(f"{at}.content: required, a string")
    return role.lower(), content


def enrich(enrichment: Enrichment | None, chat: dict[str, Any]) -> None:
    """Add the messages to the request body, in place. A body without a `messages` list
    is left alone: the provider module answers it with OpenAI's error for that."""
    messages = chat.get("messages")
    if enrichment is None or not isinstance(messages, list):
        return
    # Fresh dicts each time: the guards edit message contents in place.
    chat["messages"] = ([{"role": r, "content": c} for r, c in enrichment.prepend] + messages
                        + [{"role": r, "content": c} for r, c in enrichment.append])
