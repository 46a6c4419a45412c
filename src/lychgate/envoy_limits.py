"""What Envoy refuses although the Gateway API schema allows it, checked before Envoy sees it.

Envoy rejects a whole RouteConfiguration (or listener) when one value in it is
out of bounds, so a single bad rule would freeze every route beside it. Each
check here mirrors one rule of Envoy's own, found by feeding schema-valid input
through `envoy --mode validate` (tests/unit/test_envoy_limits.py keeps them
honest against the real binary); translation turns a failed check into a 500
for that rule alone, with the check's message in the route's status.

Checks raise EnvoyRejects with a message that says what Envoy would refuse and
why; callers add where (the rule, the field).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

import re2  # google-re2: the engine Envoy compiles every safe_regex with

# Envoy refuses a regex whose compiled RE2 program is larger than the runtime
# key re2.max_program_size.error_level, 100 by default (docs: "Regular
# expressions", google_re2 engine). The program size measures the compiled
# automaton: a UUID pattern is ~70, the same pattern repeated {1,20} is ~1,400.
MAX_PROGRAM_SIZE = 100

# Envoy's HTTP_HEADER_VALUE well-known regex (non-strict), used for header
# values and for redirect and rewrite paths: no NUL, CR or LF.
_FORBIDDEN_IN_VALUE = re.compile(r"[\x00\r\n]")

# LYCHGATE_ENVOY_LIMITS=off leaves every check to Envoy (strict preflight, or
# the NACK doctor in the standard level): to see what Envoy itself says, and to
# exercise that fallback in tests. Read once, at start.
ENABLED = os.environ.get("LYCHGATE_ENVOY_LIMITS", "on").lower() != "off"

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors come back as messages, as in Envoy
_OPTIONS.encoding = re2.Options.Encoding.LATIN1


class EnvoyRejects(ValueError):
    """A value Envoy would refuse (the message says which rule of Envoy's)."""


@lru_cache(maxsize=4096)
def _compile(pattern: str, sized: bool) -> str | None:
    """Why RE2 (as Envoy runs it) refuses the pattern, or None. Envoy hands RE2
    the pattern's UTF-8 bytes as Latin-1, measured against `envoy --mode
    validate`: `\\x{65e5}` is an invalid escape there, and `.{50}` has a program
    size of 104 (404 as UTF-8); tests/unit/test_envoy_limits.py holds the two together."""
    try:
        program = re2.compile(pattern.encode(), _OPTIONS)
    except re2.error as err:
        return f"RE2 cannot compile it ({_text(err)}); Envoy matches with RE2 syntax (no lookaround, no back-references)"
    if sized and program.programsize > MAX_PROGRAM_SIZE:
        return (f"its RE2 program size is {program.programsize}, over Envoy's limit of {MAX_PROGRAM_SIZE} "
                "(re2.max_program_size.error_level); simplify it, e.g. fewer or smaller repetitions")
    return None


def _text(err: Exception) -> str:
    detail = err.args[0] if err.args else str(err)
    return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)


def regex(pattern: str, sized: bool = True) -> None:
    """A regex Envoy compiles (safe_regex): RE2 syntax and program size. Envoy
    does not limit the size of a regex_rewrite pattern (`sized=False`)."""
    problem = _compile(pattern, sized) if ENABLED else None
    if problem is not None:
        raise EnvoyRejects(f"regex {pattern!r} is refused by Envoy: {problem}")


def header_value(value: str) -> None:
    """A header value, or a path Envoy puts in a header (redirects, rewrites)."""
    bad = _FORBIDDEN_IN_VALUE.search(value) if ENABLED else None
    if bad is not None:
        # The value itself stays out of the message: it may come from a Secret.
        raise EnvoyRejects(f"the value contains {_describe(bad.group())}, which Envoy refuses "
                           "in header values and paths")


def modifiable_header(name: str) -> None:
    """Envoy's header mutations may not set pseudo-headers or Host."""
    if ENABLED and _protected(name):
        raise EnvoyRejects(f"Envoy does not let header modifiers set or add {name!r}; to change the "
                           "Host sent upstream use a URLRewrite filter's hostname")


def removable_header(name: str) -> None:
    """... nor remove them."""
    if ENABLED and _protected(name):
        raise EnvoyRejects(f"Envoy does not let header modifiers remove {name!r}")


def _protected(name: str) -> bool:
    return name.startswith(":") or name.lower() == "host"


# RouteConfiguration.max_direct_response_body_size_bytes, Envoy's default (lychgate
# does not raise it): a direct response body is counted in bytes, so 4,096
# characters of text outside ASCII are over it.
MAX_DIRECT_RESPONSE_BODY = 4096


def direct_response_body(body: str) -> None:
    size = len(body.encode())
    if size > MAX_DIRECT_RESPONSE_BODY:
        raise EnvoyRejects(f"the body is {size} bytes in UTF-8, over Envoy's limit of {MAX_DIRECT_RESPONSE_BODY} "
                           "bytes for a direct response")


# A CORS origin as kgateway accepts it: scheme://host[:port] (or "*" alone), where any
# label of the host may be a "*" wildcard: https://*.example.com, https://a.b.*, https://*.
ORIGIN = re.compile(r"^(\*|[a-zA-Z][a-zA-Z0-9+.-]*://(\*|[A-Za-z0-9-]+)(\.(\*|[A-Za-z0-9-]+))*(:[0-9]{1,5})?)$")


def wildcard_origin_regex(origin: str) -> str:
    """The regex an origin with a wildcard label becomes: the star takes one or more
    labels (https://*.example.com accepts https://a.b.example.com, https://a.b.* accepts
    https://a.b.c), never a port or a path."""
    return re.escape(origin).replace(r"\*", "[^/:]+")


def _describe(char: str) -> str:
    return {"\x00": "a NUL character", "\r": "a carriage return", "\n": "a line break"}[char]
