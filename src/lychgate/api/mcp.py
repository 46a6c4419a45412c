"""Backend `mcp` (kgateway's MCP Backend, api/v1alpha1/mcp_backend.go): MCP servers
served as one behind a route.

Each target is either `static` (a host, port, path and transport) or a `selector` of
Services (and of namespaces, by label) whose ports say the MCP app protocol. kgateway
renamed these fields between releases; both spellings are accepted (one at a time):
`selector` (older `selectors`) with `namespace`/`service` (older `namespaceSelector`/
`serviceSelector`), and the target's `name` (older: `static.name`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic.alias_generators import to_camel

from lychgate.api.base import Model
from lychgate.api.gateway import LabelSelector
from lychgate.api.rules import at_least_one_of, exactly_one_of


def _target_name(value: str | None) -> str | None:
    """A target's name prefixes its tools (`<target>_<tool>`): an underscore in it would
    make the owner of `a_b_c` ambiguous, which is why kgateway's data plane refuses it too."""
    if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}", value):
        raise ValueError(f"{value!r} is not a target name: letters, digits, '-' and '.' (no '_': tools are "
                         "named <target>_<tool>), at most 63")
    return value


TargetName = Annotated[str | None, AfterValidator(_target_name)]


class McpSelector(Model):
    namespace: LabelSelector | None = Field(
        None, description="Namespaces whose Services are searched (by label); the Backend's own when unset.")
    service: LabelSelector | None = Field(None, description="Services (by label) whose MCP ports are targets.")
    namespace_selector: LabelSelector | None = Field(None, description="kgateway's older name of namespace.")
    service_selector: LabelSelector | None = Field(None, description="kgateway's older name of service.")

    RULES = (at_least_one_of(("namespace", "namespace_selector"), ("service", "service_selector")),)

    @model_validator(mode="after")
    def _some(self) -> McpSelector:
        _one_name(self, (("namespace", "namespace_selector"), ("service", "service_selector")))
        return self

    @property
    def namespaces(self) -> LabelSelector | None:
        return self.namespace or self.namespace_selector

    @property
    def services(self) -> LabelSelector | None:
        return self.service or self.service_selector


class McpTarget(Model):
    name: TargetName = Field(None, description="kgateway's older place of the target's name.")
    host: str = Field(min_length=1, description="Host name or IP address of the MCP server.")
    port: int = Field(ge=1, le=65535)
    path: str | None = Field(None, pattern=r"^/", description="The MCP endpoint: /mcp (StreamableHTTP) or "
                                                               "/sse (SSE) when unset.")
    protocol: Literal["StreamableHTTP", "SSE", "Undefined"] | None = Field(
        None, description="The server's transport; StreamableHTTP when unset (or Undefined, kgateway's older value).")


class McpTargetSelector(Model):
    name: TargetName = Field(None, description="The target's name: its tools are named `<name>_<tool>` when "
                                               "there are several targets.")
    selector: McpSelector | None = None
    selectors: McpSelector | None = Field(None, description="kgateway's older name of selector.")
    static: McpTarget | None = None

    RULES = (exactly_one_of("static", ("selector", "selectors")),)

    @model_validator(mode="after")
    def _one(self) -> McpTargetSelector:
        _one_name(self, (("selector", "selectors"),))
        if self.static is not None and self.name is None and self.static.name is None:
            raise ValueError("name must be set")
        return self

    @property
    def services_selected(self) -> McpSelector | None:
        return self.selector or self.selectors

    @property
    def target_name(self) -> str:
        """The name given: `name`, or the older `static.name`; "" for an unnamed selector."""
        return self.name or (self.static.name if self.static is not None else None) or ""


class MCPBackend(Model):
    name: str | None = Field(None, min_length=1, description="kgateway's older backend name; not used.")
    targets: list[McpTargetSelector] = Field(min_length=1, max_length=64)

    @model_validator(mode="after")
    def _unique(self) -> MCPBackend:
        names = [t.target_name for t in self.targets if t.target_name]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"target names must be unique: {', '.join(twice)} given more than once")
        return self


def _one_name(obj: Model, pairs: tuple[tuple[str, str], ...]) -> None:
    """Fields kgateway renamed (newer, older): either is read; both at once is refused."""
    for new, old in pairs:
        if getattr(obj, new) is not None and getattr(obj, old) is not None:
            raise ValueError(f"{to_camel(new)} and its older name {to_camel(old)} are both set: keep {to_camel(new)}")

