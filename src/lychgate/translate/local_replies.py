"""`httpSettings.localReplies` → the connection manager's local reply configuration (IR).

A local reply is an answer Envoy makes itself: 404 when no route matches, 503
when no backend can be reached, 403 from a policy, a route's direct response.
`defaultBodyFormat` formats every one of them; each of the `mappers` matches
replies with an access log filter (the same filters as `accessLog[].filter`)
and rewrites the first one it matches: `statusCode`, `body` (the text
%LOCAL_REPLY_BODY% stands for), `bodyFormatOverride`, `headers`. A mapper that
only has a filter is not idle: a reply it matches is left to the default format
and no later mapper sees it.

What Envoy 1.40 was measured to refuse is refused here with the field path
(tests/policies/test_local_replies.py): a text format or header value with an
unpaired '%' (header values are format strings, as bodies are), a pseudo-header
or Host among the headers. Headers can only be added or overwritten: Envoy's
mappers have no way to remove one, so `headers.remove` is refused (kgateway
refuses it too, when it translates). A header value may come from a Secret, as
in TrafficPolicy headerModifiers; a Secret's value is data, so its '%' are
escaped rather than read as command operators.
"""

from __future__ import annotations

import json

from lychgate import envoy_limits, ir_listener
from lychgate.api.core import Secret
from lychgate.api.direct_response import BodyFormat
from lychgate.api.format_dict import stray_percent
from lychgate.api.listener_policy import LocalReplyConfig, LocalReplyMapper
from lychgate.api.lychgate import GROUP
from lychgate.api.policy import PolicyHeaderFilter, PolicyHTTPHeader
from lychgate.store import Store
from lychgate.translate.access_logs import compile_filter
from lychgate.translate.grants import grant_allows
from lychgate.translate.secrets import literal_header_value, secret_value
from lychgate.translate.values import Invalid, Unresolved, envoy_check, header_name

_PERCENT = "has an unpaired '%' (command operators look like %RESPONSE_CODE%; write a literal percent sign as %%)"


def compile_local_replies(store: Store, kind: str, namespace: str, config: LocalReplyConfig,
                          path: str) -> ir_listener.LocalReplies:
    """Raises Invalid for a value Envoy would refuse, Unresolved for a Secret that cannot be read."""
    default = _format(config.default_body_format, f"{path}.defaultBodyFormat")
    mappers = tuple(_mapper(store, kind, namespace, m, f"{path}.mappers[{i}]") for i, m in enumerate(config.mappers))
    return ir_listener.LocalReplies(mappers=mappers, body_format=default)


def _format(fmt: BodyFormat | None, path: str) -> ir_listener.ReplyFormat | None:
    if fmt is None:
        return None
    if fmt.text is not None and stray_percent(fmt.text):
        raise Invalid(f"{path}.text", f"{fmt.text!r} {_PERCENT}")
    return ir_listener.ReplyFormat(
        text=fmt.text, content_type=fmt.content_type,
        # Canonical JSON text keeps the IR hashable; the model checked the dictionary (api/format_dict.py).
        json=json.dumps(fmt.json_, sort_keys=True) if fmt.json_ is not None else None)


def _mapper(store: Store, kind: str, namespace: str, m: LocalReplyMapper, path: str) -> ir_listener.ReplyMapper:
    add: list[tuple[str, str]] = []
    set_: list[tuple[str, str]] = []
    if m.headers is not None:
        add, set_ = _headers(store, kind, namespace, m.headers, f"{path}.headers")
    return ir_listener.ReplyMapper(
        filter=compile_filter(m.filter, f"{path}.filter"), status_code=m.status_code, body=m.body,
        body_format=_format(m.body_format_override, f"{path}.bodyFormatOverride"),
        set_headers=tuple(set_), add_headers=tuple(add))


def _headers(store: Store, kind: str, namespace: str, h: PolicyHeaderFilter,
             path: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    if h.remove:
        raise Invalid(f"{path}.remove", "a local reply's headers can only be set or added: Envoy's local reply "
                                        "mappers cannot remove a header")
    if not h.set and not h.add:
        raise Invalid(path, "at least one of set or add must be set")
    out: dict[str, list[tuple[str, str]]] = {"add": [], "set": []}
    for op, entries in (("add", h.add), ("set", h.set)):
        for i, entry in enumerate(entries):
            where = f"{path}.{op}[{i}]"
            for name, value in _entry(store, kind, namespace, entry, where):
                if name == "host":  # measured: ":-prefixed or host headers may not be modified"
                    raise Invalid(f"{where}.name", "Envoy does not let a local reply set or add 'host'")
                envoy_check(envoy_limits.header_value, value, f"{where}.value")
                out[op].append((name, value))
    return out["add"], out["set"]


def _entry(store: Store, kind: str, namespace: str, h: PolicyHTTPHeader, path: str) -> list[tuple[str, str]]:
    """The (name, format string) pairs one entry makes: an inline value, or a Secret's."""
    if h.value is not None:
        assert h.name is not None  # the model requires a name beside an inline value
        if stray_percent(h.value):
            raise Invalid(f"{path}.value", f"{h.value!r} {_PERCENT}")
        return [(header_name(h.name, f"{path}.name"), h.value)]
    ref = h.secret_ref
    assert ref is not None
    ns = ref.namespace or namespace
    if ns != namespace and not grant_allows(store, GROUP, kind, namespace, "", "Secret", ns, ref.name):
        raise Unresolved("RefNotPermitted", f"{path}.secretRef: Secret {ns}/{ref.name} is in another namespace and "
                                            f"no ReferenceGrant in {ns} allows {GROUP}/{kind} from namespace {namespace}")
    secret = store.get(Secret, ns, ref.name)
    if secret is None:
        raise Unresolved("SecretNotFound", f"{path}.secretRef: Secret {ns}/{ref.name} not found")
    key = ref.key or h.name
    if key is None:  # neither a key nor a name: every entry of the Secret is a header
        keys = sorted({*secret.data, *secret.string_data})
        pairs = [(header_name(k, f"{path}.secretRef (key {k})"), secret_value(secret, k) or "") for k in keys]
    else:
        value = secret_value(secret, key)
        if value is None:
            raise Unresolved("SecretNotFound", f"{path}.secretRef: Secret {ns}/{ref.name} has no key {key}")
        pairs = [(header_name(h.name or key, f"{path}.name"), value)]
    return [(name, literal_header_value(value)) for name, value in pairs]
