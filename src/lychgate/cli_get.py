"""`lychgate get`: every kind the control plane reads, under kubectl's names, with the
columns a kubectl user looks for.

The kind table is built once from the registry (`lychgate.api.registry.KINDS`), so a
kind registered there is listed here without a change: its plural, singular and short
names, its scope and its columns. Columns come from the kind's shape (a route has
parentRefs, a policy has targetRefs) unless the kind has its own below.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, get_args

import typer
import yaml
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from lychgate.api.base import Resource
from lychgate.api.registry import KINDS
from lychgate.kubeapi import plural as plural_of

Obj = dict[str, Any]
Fetch = Callable[..., dict[str, Any]]  # (path, **query) -> the admin API's JSON answer

# kubectl's short names: the CRDs' spec.names.shortNames (Gateway API v1.6.1, the Inference
# Extension, lychgate's charts/lychgate/crds) and the built-in ones of core kinds.
SHORT_NAMES: dict[str, tuple[str, ...]] = {
    "Namespace": ("ns",), "Service": ("svc",), "ConfigMap": ("cm",), "Pod": ("po",),
    "GatewayClass": ("gc",), "Gateway": ("gtw",), "ListenerSet": ("lset",),
    "ReferenceGrant": ("refgrant",), "BackendTLSPolicy": ("btlspolicy",),
    "InferencePool": ("infpool",), "GatewayParameters": ("gwp",),
}
# lychgate's own abbreviations, kept because earlier versions documented them.
EXTRA_NAMES: dict[str, tuple[str, ...]] = {
    "Gateway": ("gw",), "GatewayParameters": ("gatewayparameter",), "TrafficPolicy": ("tp",),
    "GatewayExtension": ("gwe",), "BackendConfigPolicy": ("bcp",),
}
# `get all` leaves out what kubectl's `all` leaves out and that holds data, not routing.
NOT_IN_ALL = frozenset({"Secret", "ConfigMap"})


# --- cells ----------------------------------------------------------------------------


def condition(conditions: Iterable[Obj], type_: str) -> str:
    for c in conditions:
        if c.get("type") == type_:
            return "True" if c.get("status") == "True" else f"{c.get('status')} ({c.get('reason')})"
    return "Unknown"


def own_condition(type_: str) -> Callable[[Obj, Obj], str]:
    return lambda obj, _ctx: condition(_status(obj).get("conditions") or [], type_)


def policy_condition(type_: str) -> Callable[[Obj, Obj], str]:
    """A policy's condition: its own if it has one, else the ancestors' (all True, or the
    first that is not), as Gateway API policies report per Gateway."""
    def cell(obj: Obj, _ctx: Obj) -> str:
        status = _status(obj)
        own = condition(status.get("conditions") or [], type_)
        if own != "Unknown":
            return own
        values = [condition(a.get("conditions") or [], type_) for a in status.get("ancestors") or []]
        return next((v for v in values if v != "True"), "True") if values else "Unknown"
    return cell


def parents(obj: Obj, _ctx: Obj) -> str:
    """Each parent with its Accepted: `gw:True`, `other/gw/https:False (NotAllowedByListeners)`."""
    out = []
    for entry in _status(obj).get("parents") or []:
        ref = entry.get("parentRef") or {}
        name = ref.get("name", "")
        if ref.get("namespace") and ref["namespace"] != obj["metadata"].get("namespace"):
            name = f"{ref['namespace']}/{name}"
        if ref.get("sectionName"):
            name += f"/{ref['sectionName']}"
        if ref.get("port"):
            name += f":{ref['port']}"
        out.append(f"{name}={condition(entry.get('conditions') or [], 'Accepted')}")
    return " ".join(out) or "<none>"


def hostnames(obj: Obj, _ctx: Obj) -> str:
    return ",".join(_spec(obj).get("hostnames") or []) or "*"


def targets(obj: Obj, _ctx: Obj) -> str:
    spec = _spec(obj)
    out = [f"{r.get('kind')}/{r.get('name')}" + (f":{r['sectionName']}" if r.get("sectionName") else "")
           for r in spec.get("targetRefs") or []]
    out += [f"{s.get('kind')}{{{','.join(f'{k}={v}' for k, v in (s.get('matchLabels') or {}).items())}}}"
            for s in spec.get("targetSelectors") or []]
    return " ".join(out) or "<none>"


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _joined(values: Iterable[Any], limit: int = 3) -> str:
    """kubectl's way with long lists: the first few, then how many more."""
    items = [str(v) for v in values]
    if len(items) > limit:
        return ",".join(items[:limit]) + f" + {len(items) - limit} more..."
    return ",".join(items) or "<none>"


def _gateway_ports(obj: Obj, _ctx: Obj) -> str:
    return ",".join(str(listener.get("port")) for listener in _spec(obj).get("listeners") or [])


def _gateway_admin(obj: Obj, ctx: Obj) -> str:
    meta = obj["metadata"]
    return str(ctx.get("proxies", {}).get(f"{meta.get('namespace')}/{meta['name']}", {}).get("admin", ""))


def _service_ports(obj: Obj, _ctx: Obj) -> str:
    return _joined((f"{p['port']}:{p['nodePort']}" if p.get("nodePort") else str(p["port"]))
                   + f"/{p.get('protocol', 'TCP')}" for p in _spec(obj).get("ports") or [])


def _referencegrant(side: str) -> Callable[[Obj, Obj], str]:
    def cell(obj: Obj, _ctx: Obj) -> str:
        return _joined((f"{r.get('kind')}/{r['namespace']}" if r.get("namespace") else
                        f"{r.get('kind')}" + (f"/{r['name']}" if r.get("name") else ""))
                       for r in _spec(obj).get(side) or [])
    return cell


@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[Obj, Obj], str]
    needs_proxies: bool = False
    accepted: bool = False  # it says whether the object is accepted (ACCEPTED, a route's PARENTS)


def _get(*path: str, default: str = "") -> Callable[[Obj, Obj], str]:
    def cell(obj: Obj, _ctx: Obj) -> str:
        value: Any = obj
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return default if value in (None, "", [], {}) else str(value)
    return cell


def accepted_column(cell: Callable[[Obj, Obj], str]) -> Column:
    return Column("ACCEPTED", cell, accepted=True)


ROUTE_PARENTS = Column("PARENTS", parents, accepted=True)
OWN_ACCEPTED = accepted_column(own_condition("Accepted"))
# A refused object (status/invalid.py) of a kind whose table has no column saying so.
REFUSED_CELL = "False (Invalid)"
COLUMNS: dict[str, tuple[Column, ...]] = {
    "Backend": (Column("TYPE", _get("spec", "type")), OWN_ACCEPTED),
    "DirectResponse": (Column("STATUS", lambda o, _c: str(_spec(o).get("status", ""))),),
    "Namespace": (Column("STATUS", _get("status", "phase", default="Active")),),
    "Service": (Column("TYPE", _get("spec", "type", default="ClusterIP")),
                Column("CLUSTER-IP", _get("spec", "clusterIP", default="<none>")),
                Column("PORTS", _service_ports)),
    "EndpointSlice": (Column("ADDRESSTYPE", _get("addressType", default="IPv4")),
                      Column("PORTS", lambda o, _c: _joined(p.get("port", "") for p in o.get("ports") or [])),
                      Column("ENDPOINTS", lambda o, _c: _joined(a for e in o.get("endpoints") or []
                                                                for a in e.get("addresses") or []))),
    "Secret": (Column("TYPE", _get("type", default="Opaque")),
               Column("DATA", lambda o, _c: str(len({**(o.get("data") or {}), **(o.get("stringData") or {})})))),
    "ConfigMap": (Column("DATA", lambda o, _c: str(len(o.get("data") or {}))),),
    "Pod": (Column("READY", own_condition("Ready")), Column("STATUS", _get("status", "phase", default="Running")),
            Column("IP", _get("status", "podIP", default="<none>"))),
    "GatewayClass": (Column("CONTROLLER", _get("spec", "controllerName")), OWN_ACCEPTED),
    # ACCEPTED beside PROGRAMMED: a Gateway whose newest manifest is refused stays Programmed
    # (its last valid version runs) and says Accepted=False.
    "Gateway": (Column("CLASS", _get("spec", "gatewayClassName")),
                Column("ADDRESS", lambda o, _c: ",".join(a.get("value", "") for a in _status(o).get("addresses") or [])),
                Column("PORTS", _gateway_ports), OWN_ACCEPTED, Column("PROGRAMMED", own_condition("Programmed")),
                Column("ADMIN", _gateway_admin, needs_proxies=True)),
    "ListenerSet": (Column("PARENT", _get("spec", "parentRef", "name")), Column("PORTS", _gateway_ports),
                    OWN_ACCEPTED, Column("PROGRAMMED", own_condition("Programmed"))),
    "ReferenceGrant": (Column("FROM", _referencegrant("from")), Column("TO", _referencegrant("to"))),
    # TYPE: spec.type (deprecated in kgateway), else the one provider block that is set.
    "GatewayExtension": (Column("TYPE", lambda o, _c: _spec(o).get("type") or ",".join(
                             k for k, v in _spec(o).items() if k != "type" and v)),
                         OWN_ACCEPTED, Column("RESOLVED", own_condition("ResolvedRefs"))),
    "InferencePool": (Column("SELECTOR", lambda o, _c: ",".join(
                          f"{k}={v}" for k, v in ((_spec(o).get("selector") or {}).get("matchLabels") or {}).items())),
                      Column("TARGET-PORTS", lambda o, _c: ",".join(
                          str(p.get("number")) for p in _spec(o).get("targetPorts") or [])),
                      ROUTE_PARENTS),
}
# The two conditions a reader of a policy checks first (type, column): Gateway API policies
# have no Applied, their ResolvedRefs says whether the references work.
POLICY_CONDITIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "BackendTLSPolicy": (("Accepted", "ACCEPTED"), ("ResolvedRefs", "RESOLVED")),
    "BackendConfigPolicy": (("Accepted", "ACCEPTED"), ("Attached", "ATTACHED")),
}
DEFAULT_POLICY_CONDITIONS = (("Accepted", "ACCEPTED"), ("Applied", "APPLIED"))


def _spec_keys(cls: type[Resource]) -> set[str]:
    """The wire names of the fields of a kind's spec (empty when it has no typed spec)."""
    spec = cls.model_fields.get("spec")
    if spec is None:
        return set()
    for candidate in (spec.annotation, *get_args(spec.annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return {f.serialization_alias or f.alias or name for name, f in candidate.model_fields.items()}
    return set()


def columns_for(cls: type[Resource]) -> tuple[Column, ...]:
    if cls.KIND in COLUMNS:
        return COLUMNS[cls.KIND]
    keys = _spec_keys(cls)
    if "parentRefs" in keys:  # a route
        return ((Column("HOSTNAMES", hostnames),) if "hostnames" in keys else ()) + (ROUTE_PARENTS,)
    if keys & {"targetRefs", "targetSelectors"}:  # a policy
        conditions = POLICY_CONDITIONS.get(cls.KIND, DEFAULT_POLICY_CONDITIONS)
        return (*(Column(header, policy_condition(type_), accepted=type_ == "Accepted")
                  for type_, header in conditions), Column("TARGETS", targets))
    return ()


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    plural: str
    singular: str
    short: tuple[str, ...]
    namespaced: bool
    columns: tuple[Column, ...] = field(default=())

    @property
    def names(self) -> tuple[str, ...]:
        return (self.plural, self.singular, *self.short)

    @property
    def resource(self) -> str:
        """How `get all` names this kind's objects, as kubectl does: `httproute.gateway.networking.k8s.io`."""
        return f"{self.singular}.{self.group}" if self.group else self.singular


def build_table(kinds: Iterable[type[Resource]] = KINDS) -> dict[str, Kind]:
    table = {}
    for cls in kinds:
        plural = getattr(cls, "PLURAL", None) or plural_of(cls.KIND)
        table[cls.KIND] = Kind(cls.KIND, cls.GROUP, plural, cls.KIND.lower(), SHORT_NAMES.get(cls.KIND, ()),
                               cls.NAMESPACED, columns_for(cls))
    return table


TABLE: dict[str, Kind] = build_table()
ALIASES: dict[str, Kind] = {
    name: k for k in TABLE.values() for name in (*k.names, *EXTRA_NAMES.get(k.kind, ()), k.kind.lower())
}


def resolve(name: str) -> Kind | None:
    """A kind by any kubectl name (`httproutes`, `httproute`, `gtw`, `HTTPRoute`) or `kind.group`."""
    lowered = name.lower()
    if lowered in ALIASES:
        return ALIASES[lowered]
    base, _, group = lowered.partition(".")
    found = ALIASES.get(base)
    return found if found is not None and group and found.group == group else None


# --- the command -----------------------------------------------------------------------


def age(obj: Obj) -> str:
    created = obj.get("metadata", {}).get("creationTimestamp")
    if not created:
        return "?"
    seconds = int((datetime.now(UTC) - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def rows(kind: Kind, items: list[Obj], ctx: Obj, all_namespaces: bool, prefix: str = "",
         refused: frozenset[tuple[str, str]] = frozenset()) -> list[dict[str, str]]:
    """One row per object. A refused one (`refused`: (namespace, name), status/invalid.py)
    reads False where the table says whether an object is accepted, even when its status
    cannot say it (a kind lychgate writes no status to, one never valid); a kind whose table
    has no such column gets an ACCEPTED column while one of its objects is refused."""
    says = [c.header for c in kind.columns if c.accepted]
    extra = not says and any(_key(obj) in refused for obj in items)
    out = []
    for obj in items:
        row = {}
        if all_namespaces and kind.namespaced:
            row["NAMESPACE"] = obj["metadata"].get("namespace", "")
        row["NAME"] = prefix + obj["metadata"]["name"]
        for column in kind.columns:
            row[column.header] = column.cell(obj, ctx)
        if _key(obj) in refused:
            for header in says:
                if "False" not in row[header]:
                    row[header] = REFUSED_CELL
        if extra:
            row["ACCEPTED"] = REFUSED_CELL if _key(obj) in refused else "True"
        row["AGE"] = age(obj)
        out.append(row)
    return out


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def print_table(table_rows: list[dict[str, str]]) -> None:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for col in table_rows[0]:
        table.add_column(col)
    for row in table_rows:
        table.add_row(*row.values())
    Console(width=200).print(table)


@dataclass(frozen=True)
class Listing:
    items: list[Obj]
    refused: frozenset[tuple[str, str]]  # (namespace, name) of the items a source refused


def _list(fetch: Fetch, kind: Kind, name: str | None, namespace: str, all_namespaces: bool) -> Listing:
    params = {"kind": kind.kind}
    if kind.namespaced and not all_namespaces:
        params["namespace"] = namespace
    if name:
        params["name"] = name
    answer = fetch("/api/v1/objects", **params)
    return Listing(answer["items"], frozenset((r.get("namespace") or "", r["name"])
                                              for r in answer.get("refused") or []))


def _context(fetch: Fetch, kinds: Iterable[Kind]) -> Obj:
    if any(c.needs_proxies for k in kinds for c in k.columns):
        return {"proxies": {p["gateway"]: p for p in fetch("/api/v1/proxies")["items"]}}
    return {}


def show_all(fetch: Fetch, namespace: str, all_namespaces: bool, output: str | None) -> None:
    """`lychgate get all`: one table per kind that has objects, named `kind.group/name`."""
    kinds = [k for k in TABLE.values() if k.kind not in NOT_IN_ALL]
    found = [(k, _list(fetch, k, None, namespace, all_namespaces)) for k in kinds]
    found = [(k, listing) for k, listing in found if listing.items]
    if output in ("json", "yaml"):
        _dump({"apiVersion": "v1", "kind": "List", "items": [o for _, listing in found for o in listing.items]},
              output)
        return
    if not found:
        typer.echo("No resources found" + ("." if all_namespaces else f" in {namespace} namespace."), err=True)
        return
    ctx = _context(fetch, (k for k, _ in found))
    for index, (kind, listing) in enumerate(found):
        if index:
            typer.echo("")
        print_table(rows(kind, listing.items, ctx, all_namespaces, prefix=f"{kind.resource}/",
                         refused=listing.refused))


def show(fetch: Fetch, kind_name: str, name: str | None, namespace: str, all_namespaces: bool,
         output: str | None) -> None:
    """`lychgate get KIND [NAME]`: a kubectl-style table, or the objects as YAML/JSON."""
    if output not in (None, "wide", "json", "yaml"):
        typer.echo(f"error: unknown output format {output!r}; use yaml or json", err=True)
        raise typer.Exit(2)
    problems = fetch("/api/v1/problems")["items"]
    if kind_name.lower() in ("errors", "error", "problems"):
        for p in problems:
            where = (f":{p['line']}" if p.get("line") else
                     f" (document {p['document']})" if p.get("document") else "")
            typer.echo(f"{p['file']}{where}: {p['message']}")
        if not problems:
            typer.echo("no problems")
        return
    if kind_name.lower() == "all":
        show_all(fetch, namespace, all_namespaces, output)
        return
    kind = resolve(kind_name)
    if kind is None:
        typer.echo(f"error: unknown kind {kind_name!r}; try one of: "
                   f"{', '.join(sorted(k.plural for k in TABLE.values()))}, all, errors", err=True)
        raise typer.Exit(2)
    listing = _list(fetch, kind, name, namespace, all_namespaces)
    items = listing.items
    if name and not items:
        typer.echo(f'error: {kind.kind} "{name}" not found', err=True)
        raise typer.Exit(1)
    for p in problems:
        if p.get("object") and p["object"].split(" ", 1)[0] == kind.kind:
            typer.echo(f"warning: {p['file']}: {p['message']}", err=True)
    if output in ("json", "yaml"):
        _dump(items[0] if name else {"apiVersion": "v1", "kind": "List", "items": items}, output)
        return
    if not items:
        where = "" if not kind.namespaced else (" in any namespace" if all_namespaces else f" in {namespace} namespace")
        typer.echo(f"No resources found{where}.", err=True)
        return
    print_table(rows(kind, items, _context(fetch, [kind]), all_namespaces, refused=listing.refused))


def _dump(shown: Any, output: str) -> None:
    if output == "json":
        typer.echo(json.dumps(shown, indent=2))
    else:
        typer.echo(yaml.safe_dump(shown, sort_keys=False), nl=False)
