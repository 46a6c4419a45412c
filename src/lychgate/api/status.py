"""The shapes of the status lychgate writes to its own kinds, for their CRDs.

With a typed status the API server prunes every field the schema does not name,
so these models must hold everything lychgate writes (translate/policy_status.py,
translate/backend_config.py, translate/backends.py, translate/policies/extensions.py,
stamped by status/store.py): tests/kube/test_crds.py puts real statuses through
the CRDs and fails on any field that would be pruned. Translation keeps building
plain dicts; these models are the contract they are checked against.

Condition is metav1.Condition with the validation its kubebuilder markers give it
(as every Gateway API CRD carries it); PolicyStatus is Gateway API's, plus the
summary `conditions` lychgate and kgateway write beside `ancestors`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic.json_schema import JsonDict

from lychgate.api.base import Model

# metav1.Condition's markers, verbatim.
_TYPE = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
         r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
# Conditions are a map keyed by type (server-side apply merges them so; a type twice is refused).
_BY_TYPE: JsonDict = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}


class Condition(Model):
    """metav1.Condition: one aspect of the object's state."""

    type: str = Field(max_length=316, pattern=_TYPE)
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = Field(None, ge=0)
    last_transition_time: str = Field(json_schema_extra={"format": "date-time"})
    reason: str = Field(min_length=1, max_length=1024, pattern=_REASON)
    message: str = Field(max_length=32768)


class ConditionsStatus(Model):
    """Conditions on the object itself (Backend, GatewayExtension)."""

    conditions: list[Condition] = Field(default_factory=list, max_length=8, json_schema_extra=_BY_TYPE)


class AncestorRef(Model):
    """Gateway API's ParentReference as a status names it. No defaults for group and kind
    (the spec's have them): the API server would fill them into a status lychgate wrote
    without, and the next write would see a difference that is not there."""

    group: str | None = Field(None, max_length=253,
                              pattern=r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    kind: str | None = Field(None, min_length=1, max_length=63, pattern=r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")
    namespace: str | None = Field(None, min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    name: str = Field(min_length=1, max_length=253)
    section_name: str | None = Field(None, min_length=1, max_length=253)
    port: int | None = Field(None, ge=1, le=65535)


class PolicyAncestorStatus(Model):
    """How the policy fares at one ancestor (a Gateway, or kgateway's StatusSummary)."""

    ancestor_ref: AncestorRef
    controller_name: str = Field(min_length=1, max_length=253)
    conditions: list[Condition] = Field(min_length=1, max_length=8, json_schema_extra=_BY_TYPE)


class PolicyStatus(Model):
    """Gateway API's PolicyStatus (GEP-713) with the policy's own summary conditions."""

    conditions: list[Condition] = Field(default_factory=list, max_length=8, json_schema_extra=_BY_TYPE)
    ancestors: list[PolicyAncestorStatus] = Field(default_factory=list, max_length=16)


class NoStatus(Model):
    """lychgate writes no status to this kind (kgateway's status of it is empty too)."""
