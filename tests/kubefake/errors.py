"""Kubernetes `Status` errors, shaped exactly like the API server's.

Clients (lightkube included) decide what happened from `code` and `reason`, and
lightkube only turns a response into an `ApiError` when its Content-Type is exactly
`application/json`, so every failure here is a Status object rendered that way.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An API failure that renders as a `Status` object (and the HTTP code)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(group: str, plural: str, name: str | None) -> dict[str, Any]:
    # The API server names the *resource* (plural) in details.kind, not the Kind.
    d: dict[str, Any] = {"kind": plural}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    return d


def qualified(group: str, plural: str) -> str:
    """`pods` for the core group, `gateways.gateway.networking.k8s.io` otherwise."""
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(group, plural)} "{name}" not found', _details(group, plural, name)
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(group, plural)} "{name}" already exists',
        _details(group, plural, name),
    )


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": {why}',
        _details(group, plural, name),
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(group: str, kind: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 with one cause per (field, message), like field.ErrorList."""
    summary = ", ".join(f"{f}: {m}" for f, m in causes)
    details = {
        "name": name,
        "kind": kind,
        "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes],
    }
    if group:
        details["group"] = group
    suffix = f": {summary}" if len(causes) == 1 else f": [{summary}]"
    gk = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{gk} "{name}" is invalid{suffix}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}",
    )


def expired(message: str) -> ApiError:
    # Watch/list from a compacted resourceVersion: 410 with reason "Expired"
    # (errors.NewResourceExpired), which clients treat as "relist".
    return ApiError(410, "Expired", message)


def resource_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})
