"""The status of an object a source refused to parse.

An object can pass the API server's CRD schema and still be refused by lychgate's
model (exactly one of `json`, `text`; a format string with an unpaired '%'; a rule
of Gateway API that lychgate checks itself). The source keeps the last valid
version in use and records the refusal in the store (`Store.refused`); without
this, the object's status would go on saying what it said of that last version
(Accepted=True, an older observedGeneration), and the user would be told nothing
where they look. kgateway refuses most of these at admission (CEL rules in its
CRDs); lychgate says it in the status instead.

The refusal is laid over what translation computed for the object, on each pass
and for as long as the source refuses it, so that when it is fixed (or deleted)
the status is translation's again with nothing to undo:

- the object's own Accepted condition becomes False, at the refused generation,
  naming each field refused and saying whether the last valid version (generation
  N) stays in use. "Own" is the top-level `conditions` where the kind has them
  (Gateway, ListenerSet, GatewayClass, lychgate's policies' summary, Backend,
  GatewayExtension); else lychgate's entry for each parent or ancestor (routes,
  BackendConfigPolicy, BackendTLSPolicy, InferencePool), as translation itself
  reports an invalid one there.
- every other condition stays as translation computed it for the last valid
  version, with that version's observedGeneration: it is still what runs
  (a Gateway stays Programmed, a policy stays Applied where it applied).

An object with no valid version has no computed status to lay it over. It gets
one where lychgate can tell the object is its own without parsing it: lychgate's
kinds (`conditions`), a Gateway of one of lychgate's classes and a ListenerSet of
one of its Gateways (Accepted and Programmed False), a GatewayClass naming
lychgate's controller, and a route's entries for the parentRefs that name a
Gateway of lychgate's. A BackendTLSPolicy or InferencePool that never parsed gets
none: its entries are per Gateway using it, which only translation knows, and
Gateway API's PolicyStatus has no top-level conditions to say it instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lychgate.api.base import ObjectKey
from lychgate.api.gateway import GROUP as GATEWAY_GROUP
from lychgate.api.lychgate import GROUP as LYCHGATE_GROUP
from lychgate.api.registry import BY_KIND
from lychgate.api.status import ConditionsStatus, PolicyStatus
from lychgate.store import Refusal, Store
from lychgate.translate.conditions import CONTROLLER_NAME, condition

Status = dict[str, Any]

ROUTE_KINDS = frozenset({"HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"})
# Accepted=False reasons Gateway API defines for a spec with an invalid value; lychgate's
# own kinds, and Gateway API kinds without such a reason, say `Invalid`.
REASONS = {kind: "UnsupportedValue" for kind in ROUTE_KINDS}
# Long enough for every field of a badly broken object, short of metav1.Condition's 32768.
MAX_MESSAGE = 8192


def with_refusals(computed: dict[ObjectKey, Status], store: Store) -> dict[ObjectKey, Status]:
    """Translation's statuses with each refused object's laid over (a new dict when there
    are refusals: translation's statuses are kept by reference and never mutated)."""
    refused = store.refused
    if not refused:
        return computed
    out = dict(computed)
    for key, refusal in refused.items():
        kept = store.get_key(key)
        status = invalid_status(key, refusal, computed.get(key), kept.generation if kept else None, computed)
        if status is not None:
            out[key] = status
    return out


def invalid_status(
    key: ObjectKey, refusal: Refusal, base: Status | None, kept: int | None, computed: Mapping[ObjectKey, Status]
) -> Status | None:
    """The status of a refused object: over `base` (translation's, of the last valid version,
    generation `kept`), or on its own; None when lychgate has none to give it."""
    accepted = condition("Accepted", False, REASONS.get(key.kind, "Invalid"), message(refusal, kept),
                         refusal.generation)
    if base is not None:
        return _over(base, accepted)
    return _fresh(key, refusal, accepted, computed)


def message(refusal: Refusal, kept: int | None) -> str:
    fields = "; ".join(f"{path}: {why}" for path, why in refusal.fields)
    # Without fields (an apiVersion not served...) the message after "Kind ns/name: " says it.
    what = fields or refusal.message.partition(": ")[2] or refusal.message
    used = (f"the last valid version (generation {kept}) stays in use" if kept is not None
            else "no version of it is in use until it is fixed")
    if len(what) > MAX_MESSAGE:
        what = what[:MAX_MESSAGE] + "..."
    return f"refused: {what}; {used}"


def _swap(conditions: list[dict[str, Any]], accepted: dict[str, Any]) -> list[dict[str, Any]]:
    if not any(c.get("type") == "Accepted" for c in conditions):
        return [accepted, *conditions]
    return [accepted if c.get("type") == "Accepted" else c for c in conditions]


def _over(base: Status, accepted: dict[str, Any]) -> Status:
    out = dict(base)
    if isinstance(base.get("conditions"), list):
        out["conditions"] = _swap(base["conditions"], accepted)
        return out
    for group in ("parents", "ancestors"):
        if base.get(group):
            out[group] = [{**entry, "conditions": _swap(entry["conditions"], accepted)}
                          if entry.get("controllerName") == CONTROLLER_NAME else entry
                          for entry in base[group]]
    return out


def _fresh(key: ObjectKey, refusal: Refusal, accepted: dict[str, Any],
           computed: Mapping[ObjectKey, Status]) -> Status | None:
    model = BY_KIND.get(key.kind)
    if model is None:
        return None
    spec = refusal.raw.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    not_programmed = condition("Programmed", False, "Invalid", "not programmed: the object is refused",
                               refusal.generation)
    if model.GROUP == LYCHGATE_GROUP:
        return {"conditions": [accepted]} if model.STATUS in (PolicyStatus, ConditionsStatus) else None
    if key.kind == "GatewayClass":
        return {"conditions": [accepted]} if spec.get("controllerName") == CONTROLLER_NAME else None
    if key.kind == "Gateway":
        cls = spec.get("gatewayClassName")
        ours = isinstance(cls, str) and ObjectKey("GatewayClass", "", cls) in computed
        return {"conditions": [accepted, not_programmed]} if ours else None
    if key.kind == "ListenerSet":
        parent = spec.get("parentRef")
        if isinstance(parent, dict) and _gateway_of_ours(parent, key.namespace, computed) is not None:
            return {"conditions": [accepted, not_programmed]}
        return None
    if key.kind in ROUTE_KINDS:
        refs = spec.get("parentRefs")
        parents = [{"parentRef": ref, "controllerName": CONTROLLER_NAME, "conditions": [accepted]}
                   for ref in (_gateway_of_ours(r, key.namespace, computed) for r in
                               (refs if isinstance(refs, list) else []) if isinstance(r, dict))
                   if ref is not None]
        return {"parents": parents} if parents else None
    return None


def _gateway_of_ours(ref: dict[str, Any], namespace: str, computed: Mapping[ObjectKey, Status]) -> dict[str, Any] | None:
    """A parentRef to a Gateway lychgate reports on (it has a status), as translation
    writes it in a parents entry (translate/parents.py); None for any other."""
    if ref.get("group", GATEWAY_GROUP) != GATEWAY_GROUP or ref.get("kind", "Gateway") != "Gateway":
        return None
    name, ns = ref.get("name"), ref.get("namespace") or namespace
    if not isinstance(name, str) or not isinstance(ns, str) or ObjectKey("Gateway", ns, name) not in computed:
        return None
    out: dict[str, Any] = {"group": GATEWAY_GROUP, "kind": "Gateway", "name": name, "namespace": ns}
    for field in ("sectionName", "port"):
        if ref.get(field) is not None:
            out[field] = ref[field]
    return out
