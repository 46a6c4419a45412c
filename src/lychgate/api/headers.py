"""Header names and values as kgateway (and the Gateway API) constrain them.

One set of types for every header field of the kinds, so the CRD (tools/gen_crds.py)
and the models refuse the same things the API server refuses for kgateway:

- a header name is an RFC 7230 token (Gateway API `HTTPHeaderName`): no space,
  colon, CR or LF can smuggle a second header into the one being set;
- a transformation may also name a pseudo-header (`:path`, kgateway `HeaderName`);
- an inline header value (kgateway `shared.HTTPHeader.value`) is printable
  US-ASCII words separated by single spaces or tabs: no CR, LF, NUL or other
  control character, no leading or trailing blank. Envoy itself only refuses CR,
  LF and NUL, and refuses them by NACKing the whole RouteConfiguration (measured
  with `envoy --mode validate`, Envoy 1.40), so such a value must never reach it.

Values that are templates (transformation `value`, Envoy format strings) are not
constrained here: kgateway leaves them free, and what they render is checked
where they are rendered.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

_TOKEN = r"[A-Za-z0-9!#$%&'*+\-.^_`|~]+"

# Gateway API HTTPHeaderName (kgateway `gwv1.HTTPHeaderName`).
HTTPHeaderName = Annotated[str, Field(min_length=1, max_length=256, pattern=rf"^{_TOKEN}$")]

# kgateway transformation `HeaderName`: a header or a pseudo-header.
EnvoyHeaderName = Annotated[str, Field(min_length=1, max_length=256, pattern=rf"^:?{_TOKEN}$")]

# kgateway `shared.HTTPHeader.value`.
HTTPHeaderValue = Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[!-~]+([\t ]?[!-~]+)*$")]
