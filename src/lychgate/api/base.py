"""Shared shapes of every Kubernetes object: metadata, keys, conditions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, NamedTuple, TypeVar

from pydantic import (
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema as cs

if TYPE_CHECKING:
    from lychgate.api.rules import Rule

# metav1.Duration as kgateway constrains it: up to four number+unit parts.
Duration = Annotated[str, Field(max_length=32, pattern=r"^([0-9]{1,5}(h|m|s|ms)){1,4}$")]


# In a recursive model's JSON schema: how many levels its values may nest. A CRD cannot be
# recursive; tools/gen_crds.py writes the model out that deep, and the model refuses deeper.
NESTING_KEY = "x-lychgate-nesting"


class Model(BaseModel):
    """Base for API fields: camelCase on the wire, unknown fields rejected.

    Rejecting unknown fields is what `kubectl apply --validate=strict` does: a typo
    such as `backendRef` for `backendRefs` becomes an error naming the field
    instead of a silently ignored setting.
    """

    model_config = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        defer_build=True,
    )

    # Rules across this model's fields (api/rules.py): checked on load (OneOf) and written
    # into the CRD as x-kubernetes-validations (all of them).
    RULES: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _field_rules(self) -> Any:
        for rule in type(self).RULES:
            rule.check(self)
        return self

    @classmethod
    def __get_pydantic_json_schema__(cls, core: cs.CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler(core)
        if cls.RULES:
            handler.resolve_ref_schema(schema)["x-kubernetes-validations"] = [r.cel(cls) for r in cls.RULES]
        return schema

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_absent(cls, data: Any) -> Any:
        """`matches:` or `set:` with nothing under it is YAML null; the API server drops null
        fields of a CRD object before validating it, so a null field is an absent one here too."""
        if isinstance(data, dict) and None in data.values():
            return {k: v for k, v in data.items() if v is not None}
        return data


M = TypeVar("M", bound=Model)


def renamed(model: M, new: str, old: str) -> M:
    """A field kgateway renamed, written under its older name: moved to the newer one
    (translation reads only that); both at once is refused."""
    if not getattr(model, old):
        return model
    if getattr(model, new):
        raise ValueError(f"{to_camel(new)} and {to_camel(old)} are two names of one field and cannot "
                         f"both be set; use {to_camel(new)}")
    empty = type(model).model_fields[old].get_default(call_default_factory=True)
    return model.model_copy(update={new: getattr(model, old), old: empty})


def flattened(model: M, old: str, fields: tuple[str, ...]) -> M:
    """An object kgateway flattened into its parent, written in its older nested shape
    (`old`, whose `fields` are now the parent's own): moved up (translation reads only
    those); both shapes at once is refused."""
    inner = getattr(model, old)
    if inner is None:
        return model
    if any(getattr(model, f) is not None for f in fields):
        newer = ", ".join(map(to_camel, fields))
        raise ValueError(f"{to_camel(old)} is the older shape of {newer} and cannot be set with them; use {newer}")
    return model.model_copy(update={old: None, **{f: getattr(inner, f) for f in fields}})


class OpenModel(Model):
    """For parts we carry but do not interpret: any field is kept."""

    model_config = ConfigDict(extra="allow")


class ObjectMeta(Model):
    name: str = Field(min_length=1, max_length=253)
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    generation: int | None = None
    creation_timestamp: datetime | None = None
    resource_version: str | None = None
    uid: str | None = None
    owner_references: list[dict[str, Any]] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)
    managed_fields: list[dict[str, Any]] = Field(default_factory=list)
    generate_name: str | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    self_link: str | None = None


class ObjectKey(NamedTuple):
    """Identity of an object in the store: (kind, namespace, name).

    namespace is "" for cluster-scoped kinds.
    """

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class Resource(Model):
    """A top-level object. Subclasses set KIND, GROUP, VERSION and NAMESPACED."""

    KIND: ClassVar[str] = ""
    GROUP: ClassVar[str] = ""
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)
    NAMESPACED: ClassVar[bool] = True
    # The shape of the status lychgate writes (api/status.py), for a kind whose CRD lychgate
    # generates (tools/gen_crds.py requires it); the status itself stays a plain dict.
    STATUS: ClassVar[type[Model] | None] = None

    api_version: str
    kind: str
    metadata: ObjectMeta
    status: dict[str, Any] | None = None

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.kind, self.metadata.namespace or "", self.metadata.name)

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def generation(self) -> int:
        return self.metadata.generation or 1

    @property
    def created(self) -> datetime:
        return self.metadata.creation_timestamp or datetime.min.replace(tzinfo=UTC)



_last_now: list[datetime] = [datetime.min.replace(tzinfo=UTC)]


def now() -> datetime:
    """The time to the second; the same object through a second (thousands of objects
    loaded at once hold one creation timestamp, not 48 bytes each)."""
    t = datetime.now(UTC).replace(microsecond=0)
    if t != _last_now[0]:
        _last_now[0] = t
    return _last_now[0]
