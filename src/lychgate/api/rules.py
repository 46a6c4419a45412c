"""Rules across fields, written once for the model and for the CRD.

kgateway's CRDs refuse at admission what its markers forbid: `ExactlyOneOf`,
`AtMostOneOf`, `AtLeastOneOf` (controller-gen turns them into CEL rules such as
`[has(self.a),has(self.b)].filter(x,x==true).size() == 1`) and hand-written
`XValidation` CEL rules. A model lists its rules in `RULES` (api/base.py):

- `OneOf`: written into the CRD as controller-gen writes it, so `kubectl apply`
  refuses it too; checked when the model loads (the error names the object's
  field path and says which fields), unless `checked_by` names the part of
  lychgate that already refuses it with a status naming the field.
- `CEL`: written into the CRD only, as kgateway's rule and message; `checked_by`
  says what refuses the same input in lychgate (for files, and for objects an
  older CRD let through). tests/unit/test_kgateway_rules.py holds lychgate and
  the CRD to the same cases.

`field_rules(...)` puts CEL rules (and other schema keys) on one field's schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonDict

if TYPE_CHECKING:
    from lychgate.api.base import Model


def wire_name(model: type[Model], attr: str) -> str:
    """The name users write for a model attribute (`respectTTL`, `connectTimeout`)."""
    info = model.model_fields[attr]
    return info.alias or (info.validation_alias if isinstance(info.validation_alias, str) else to_camel(attr))


def _given(value: Any) -> bool:
    # An empty list or map is what the model holds for an absent one (the CRD's MinItems
    # refuses an empty one where kgateway's does); false and 0 are values, as in CEL's has().
    return value is not None and value != [] and value != {}


@dataclass(frozen=True)
class OneOf:
    """Of `names` (model attributes; a tuple in a group counts as one field written under
    either name, such as a field and its older name), between `low` and `high` are set."""

    names: tuple[str | tuple[str, ...], ...]
    low: int
    high: int | None
    checked_by: str | None = None  # set: the CRD's rule only; translation checks it there

    def _groups(self) -> list[tuple[str, ...]]:
        return [n if isinstance(n, tuple) else (n,) for n in self.names]

    def _words(self, model: type[Model]) -> str:
        return ", ".join(wire_name(model, g[0]) for g in self._groups())

    def check(self, model: Model) -> None:
        if self.checked_by:
            return
        cls = type(model)
        given = [wire_name(cls, g[0]) for g in self._groups() if any(_given(getattr(model, n)) for n in g)]
        if len(given) >= self.low and (self.high is None or len(given) <= self.high):
            return
        found = f" (found {', '.join(given)})" if given else ""
        if self.low == self.high == 1:
            raise ValueError(f"exactly one of {self._words(cls)} must be set{found}")
        if self.high == 1:
            raise ValueError(f"at most one of {self._words(cls)} may be set{found}")
        raise ValueError(f"at least one of {self._words(cls)} must be set")

    def cel(self, model: type[Model]) -> dict[str, str]:
        has = ",".join(" || ".join(f"has(self.{wire_name(model, n)})" for n in g) for g in self._groups())
        count = f"[{has}].filter(x,x==true).size()"
        fields = " ".join(wire_name(model, g[0]) for g in self._groups())
        if self.low == self.high == 1:
            return {"rule": f"{count} == 1", "message": f"exactly one of the fields in [{fields}] must be set"}
        if self.high == 1:
            return {"rule": f"{count} <= 1", "message": f"at most one of the fields in [{fields}] may be set"}
        return {"rule": f"{count} >= 1", "message": f"at least one of the fields in [{fields}] must be set"}


def exactly_one_of(*names: str | tuple[str, ...], checked_by: str | None = None) -> OneOf:
    return OneOf(names, 1, 1, checked_by)


def at_most_one_of(*names: str | tuple[str, ...], checked_by: str | None = None) -> OneOf:
    return OneOf(names, 0, 1, checked_by)


def at_least_one_of(*names: str | tuple[str, ...], checked_by: str | None = None) -> OneOf:
    return OneOf(names, 1, None, checked_by)


@dataclass(frozen=True)
class CEL:
    """A CEL rule for the CRD (kgateway's, word for word where it has one); `checked_by`
    names what refuses the same input in lychgate itself."""

    rule: str
    message: str
    checked_by: str

    def check(self, model: Model) -> None:
        pass

    def cel(self, model: type[Model] | None = None) -> dict[str, str]:
        return {"rule": self.rule, "message": self.message}


Rule = OneOf | CEL

# metav1.Duration's form in kgateway's CEL rules, and a bound on it.
DURATION_MATCH = "matches(self, '^([0-9]{1,5}(h|m|s|ms)){1,4}$')"


def duration_rules(checked_by: str, minimum: str | None = None, maximum: str | None = None,
                   name: str = "") -> list[CEL]:
    """kgateway's rules of a duration field: its form, and its bounds (`must be at least 1ms`)."""
    out = [CEL(DURATION_MATCH, "invalid duration value", checked_by)]
    what = f"{name} " if name else ""
    if minimum:
        out.append(CEL(f"duration(self) >= duration('{minimum}')", f"{what}must be at least {minimum}", checked_by))
    if maximum:
        out.append(CEL(f"duration(self) <= duration('{maximum}')", f"{what}must not exceed {maximum}", checked_by))
    return out


def field_rules(*rules: CEL, **schema: Any) -> JsonDict:
    """A field's `json_schema_extra`: its CEL rules, and other schema keys (minItems, items...)."""
    out: JsonDict = dict(schema)
    if rules:
        out["x-kubernetes-validations"] = [dict(r.cel()) for r in rules]
    return out
