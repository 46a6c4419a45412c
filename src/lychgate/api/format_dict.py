"""Envoy format dictionaries: a JSON object Envoy fills in per request.

`fileSink.jsonFormat` (access logs) and `bodyFormat.json` (DirectResponse,
TrafficPolicy `directResponse`) become a SubstitutionFormatString's
`json_format`, a protobuf Struct. kgateway keeps them free-form in its CRDs
(runtime.RawExtension) and so does lychgate's: a structural schema cannot say
"any JSON". Their content is checked here instead, against what Envoy 1.40
(the venv's) was measured to do (`envoy --mode validate`, and a running proxy
for the output), tests/unit/test_format_dict.py:

- accepted and written out as given: strings, numbers, booleans, null, lists
  (of anything), nested objects, empty objects, an empty dictionary, keys with
  a '%' in them;
- refused: a string, at any depth (inside objects and lists alike), whose
  command operators do not parse: an unpaired '%' ("Couldn't find valid
  command") or an operator Envoy does not know ("Not supported field in
  StreamInfo"). The first is refused here with the key path; the second would
  need Envoy's list of operators and is left to Envoy (its NACK is reported).

GatewayParameters' `bootstrap.logFormat.json` is not one of them: lychgate
passes it as `--log-format` text (a spdlog pattern, deploy/manifests.py), and
Envoy takes any text there (measured: numbers, lists, null, '%' alone, unknown
flags are all printed as written), so only its JSON-ness is checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import AfterValidator, WithJsonSchema

# Free-form in the CRD, as kgateway's: the model below has the last word.
_FREE_FORM = WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True})


def _where(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every value that is not an object or a list, with its key path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    else:
        yield path, value


def _json(value: dict[str, Any]) -> dict[str, Any]:
    """A value from a file source may be a YAML timestamp, a set...: no JSON form to send."""
    for path, leaf in _leaves(value):
        if not isinstance(leaf, str | int | float | bool | None):
            raise ValueError(f"{_where(path)}: {type(leaf).__name__} is not a JSON value (quote it)")
    return value


# What Envoy's substitution format parser takes at a '%': a literal '%%', or a command
# operator: its name, (arguments) that may hold '%' but no ')', an optional :length, '%'.
# (Counting '%' would refuse %START_TIME(%s)%, which Envoy takes.)
_AT_PERCENT = re.compile(r"%(?:%|(?:[A-Z]|[A-Z][A-Z0-9_]*[A-Z0-9])(?:\([^)]*\))?(?::[0-9]+)?%)")


def stray_percent(text: str) -> bool:
    """Is there a '%' in `text` that starts no command operator (Envoy: "Couldn't find valid command")?"""
    at = text.find("%")
    while at != -1:
        match = _AT_PERCENT.match(text, at)
        if match is None:
            return True
        at = text.find("%", match.end())
    return False


def _operators_parse(value: dict[str, Any]) -> dict[str, Any]:
    for path, text in _leaves(_json(value)):
        if isinstance(text, str) and stray_percent(text):
            raise ValueError(f"{_where(path)}: {text!r} has an unpaired '%' (command operators look like "
                             "%REQ(:PATH)%; write a literal percent sign as %%)")
    return value


# Any JSON object.
JsonObject = Annotated[dict[str, Any], AfterValidator(_json), _FREE_FORM]
# A format dictionary Envoy will accept (but for operator names it alone knows).
FormatDictionary = Annotated[dict[str, Any], AfterValidator(_operators_parse), _FREE_FORM]
