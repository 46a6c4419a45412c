"""`lychgate check`: what `lychgate run` would say about some manifests, before they run.

The verdict comes from the control plane's own pass (lychgate.offline): the file source's
problems (what it refuses to load), every object's status conditions, and the route rules
the translation serves as a 500. Each becomes a Finding pointing at the file and line of
the YAML (of the field, where one is named), printed as text, JSON or GitHub annotations.
A finding is an error when an object (or part of one) is refused or a route answers 500;
a warning when the input is served but not as written (a policy overridden by another,
a selector matching nothing, what `--from-kgateway` cannot carry over).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from lychgate import ir
from lychgate.api.base import ObjectKey
from lychgate.offline import Evaluation
from lychgate.sources.files import Problem
from lychgate.sources.locate import parse_path
from lychgate.translate.routes import INVALID_RULE_BODY, NO_BACKEND_BODY, NO_CHILD_BODY

Obj = dict[str, Any]
# (field path) -> (file, line) of an object's field (its document when the path is empty)
Locate = Callable[[tuple[str | int, ...]], tuple[str, int | None] | None]

# Conditions whose False says something is refused, and those whose True does.
POSITIVE = ("Accepted", "ResolvedRefs", "Programmed", "Attached", "Applied")
NEGATIVE = ("Conflicted", "PartiallyInvalid")
# Served, but not as written: said, and not a failure.
WARNING_REASONS = frozenset({"Overridden", "NoTargetMatched"})
WARNING_TYPES = frozenset({"InsecureFrontendValidationMode"})
# Programmed waits for a proxy to accept the configuration: none runs in a check.
NOT_JUDGED = frozenset({("Programmed", "Pending")})
# The bodies of the 500s translation serves in place of what it cannot (translate/routes.py).
FIVE_HUNDREDS = frozenset({INVALID_RULE_BODY, NO_BACKEND_BODY, NO_CHILD_BODY})


@dataclass(frozen=True)
class Finding:
    file: str | None
    line: int | None
    object: str  # "HTTPRoute default/name"; "" for a file that is not YAML
    field: str  # a field path ("spec.parentRefs[0]"), or "" for the whole object
    message: str
    severity: str = "error"  # or "warning"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else (self.file or "<input>")
        parts = [where] + [p for p in (self.object, self.field) if p] + [self.message]
        text = ": ".join(parts)
        return text if self.severity == "error" else f"{where}: warning: {text[len(where) + 2:]}"


# --- the manifests the file source refused ------------------------------------------


def problem_findings(problem: Problem) -> Iterator[Finding]:
    """One finding per refused field (at the field's line), else one for the document."""
    if problem.fields:
        obj = problem.object or ""
        for path, message, line in problem.fields:
            yield Finding(problem.file, line if line is not None else problem.line, obj, path, message)
        return
    message = problem.message
    if problem.object and message.startswith(problem.object + ": "):
        message = message[len(problem.object) + 2:]
    yield Finding(problem.file, problem.line, problem.object or "", "", message)


# --- status conditions ---------------------------------------------------------------


def _judge(cond: Obj) -> str | None:
    """"error", "warning" or None (fine) for one condition."""
    type_, status, reason = cond.get("type"), cond.get("status"), cond.get("reason")
    if (type_, reason) in NOT_JUDGED:
        return None
    if type_ in WARNING_TYPES and status == "True":
        return "warning"
    bad = (type_ in POSITIVE and status == "False") or (type_ in NEGATIVE and status == "True")
    if not bad:
        return None
    return "warning" if reason in WARNING_REASONS else "error"


def _entries(status: Obj) -> Iterator[tuple[str, Obj | None, list[Obj]]]:
    """(group, the entry's ref, its conditions): per listener, parent, ancestor, then the object's own."""
    for item in status.get("listeners") or []:
        yield "listeners", {"name": item.get("name")}, item.get("conditions") or []
    for item in status.get("parents") or []:
        yield "parents", item.get("parentRef") or {}, item.get("conditions") or []
    for item in status.get("ancestors") or []:
        yield "ancestors", item.get("ancestorRef") or {}, item.get("conditions") or []
    yield "", None, status.get("conditions") or []


def _index(items: Any, match: Callable[[Obj], bool]) -> int | None:
    if not isinstance(items, list):
        return None
    return next((i for i, item in enumerate(items) if isinstance(item, dict) and match(item)), None)


def _same_ref(ref: Obj, namespace: str) -> Callable[[Obj], bool]:
    def match(item: Obj) -> bool:
        return (item.get("name") == ref.get("name")
                and (item.get("namespace") or namespace) == (ref.get("namespace") or namespace)
                and item.get("sectionName") == ref.get("sectionName")
                and item.get("port") == ref.get("port"))
    return match


def _named_in(message: str) -> Callable[[Obj], bool]:
    """A reference whose name the message names (`Service default/missing not found`)."""
    return lambda item: isinstance(item.get("name"), str) and re.search(
        rf"(^|[\s/(]){re.escape(item['name'])}($|[\s:,)])", message) is not None


def field_of(obj: Obj, group: str, ref: Obj | None, cond: Obj) -> str:
    """The spec field a condition is about, as near as the status says."""
    spec = obj.get("spec") or {}
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    message = str(cond.get("message", ""))
    spelled = re.search(r"\bspec(\.[A-Za-z]\w*|\[\d+\])+", message)
    if spelled:
        return spelled.group(0)
    rule = re.search(r"\brule (\S+?): (?:([\w.\[\]]+): )?", message)
    if rule and isinstance(spec.get("rules"), list):  # "rule NAME: matches[0].path: ..." (a replaced rule)
        i = _rule_index(spec["rules"], rule.group(1))
        if i is not None:
            return f"spec.rules[{i}]" + (f".{rule.group(2)}" if rule.group(2) else "")
    if group == "listeners" and ref is not None:
        i = _index(spec.get("listeners"), lambda item: item.get("name") == ref.get("name"))
        if i is not None:
            inner = re.search(r"\b(tls\.\w+|\w+)(\[\d+\])(\.\w+)*", message)
            return f"spec.listeners[{i}]" + (f".{inner.group(0)}" if inner else "")
    if cond.get("type") == "ResolvedRefs" and isinstance(spec.get("rules"), list):
        for r, rule in enumerate(spec["rules"]):
            b = _index((rule or {}).get("backendRefs"), _named_in(message))
            if b is not None:
                return f"spec.rules[{r}].backendRefs[{b}]"
    if group == "parents" and ref is not None:
        i = _index(spec.get("parentRefs"), _same_ref(ref, namespace))
        if i is not None:
            return f"spec.parentRefs[{i}]"
    if group == "ancestors" or (group == "" and cond.get("type") in ("Accepted", "Applied", "Attached")):
        for key in ("targetRefs", "targetSelectors"):
            i = _index(spec.get(key), _named_in(message))
            if i is not None:
                return f"spec.{key}[{i}]"
    return ""


def _rule_index(rules: list[Any], name: str) -> int | None:
    """A rule by its name, else by its index (how translation names a rule without one)."""
    found = _index(rules, lambda rule: rule.get("name") == name)
    if found is None and name.isdigit() and int(name) < len(rules):
        return int(name)
    return found


def describe_condition(cond: Obj) -> str:
    reason = cond.get("reason")
    return f"{cond.get('type')}={cond.get('status')}" + (f" ({reason})" if reason else "")


def object_findings(obj: Obj, status: Obj, locate: Locate) -> list[Finding]:
    """What an object's status says is wrong: the first bad condition of each entry (a
    listener, a parent, an ancestor, the object itself), a message said once per object."""
    meta = obj.get("metadata") or {}
    name = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
    label = f"{obj.get('kind')} {name}"
    out: list[Finding] = []
    said: list[str] = []
    for group, ref, conditions in _entries(status):
        for cond in conditions:
            severity = _judge(cond)
            if severity is None:
                continue
            message = str(cond.get("message", ""))
            core = message.removeprefix("not applied: ")
            if any(core in s or s in core for s in said):
                break
            said.append(core)
            path = field_of(obj, group, ref, cond)
            file, line = locate(parse_path(path)) or (None, None)
            out.append(Finding(file, line, label, path, f"{describe_condition(cond)}: {message}", severity))
            break  # one per entry: its other conditions say the same thing again
    return out


# --- route rules that answer 500 ------------------------------------------------------


def five_hundreds(gateways: Iterable[ir.GatewayIR]) -> dict[tuple[str, str, str, int], str]:
    """(kind, namespace, name, rule) -> why, for each route rule that answers 500 (or sends a
    share of its requests to a 500) because translation could not serve it."""
    out: dict[tuple[str, str, str, int], str] = {}
    for gateway in gateways:
        for listener in gateway.listeners:
            for vh in listener.virtual_hosts:
                for route in vh.routes:
                    why = _answers_500(route)
                    if why is not None:
                        src = route.source
                        out.setdefault((src.kind, src.namespace, src.name, src.rule),
                                       f"answers 500 on Gateway {gateway.namespace}/{gateway.name}: {why}")
    return out


def _answers_500(route: ir.Route) -> str | None:
    action = route.action
    if isinstance(action, ir.DirectResponse):
        if action.status == 500 and (route.replaced_because or action.body in FIVE_HUNDREDS):
            return route.replaced_because or action.body.strip()
        return None
    if isinstance(action, ir.Forward) and any(b.cluster is None for b in action.backends):
        invalid = sum(b.weight for b in action.backends if b.cluster is None)
        total = sum(b.weight for b in action.backends) or 1
        return f"{invalid * 100 // total}% of its requests go to an invalid backend; see ResolvedRefs"
    return None


# --- the report ----------------------------------------------------------------------------


@dataclass
class Report:
    findings: list[Finding]
    objects: list[Obj]  # kind, namespace, name, file, line, status (each object's conditions)
    loaded: int = 0  # objects read from the files (those without a status too: Services, Secrets...)

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == "warning" for f in self.findings)


def _without_times(value: Any) -> Any:
    """Status as check reports it: lastTransitionTime would be the time of the check."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def _judged(status: Obj) -> bool:
    """Has the status a condition worth a finding? (Most have none: their objects are not dumped.)"""
    return any(_judge(c) is not None for _, _, conditions in _entries(status) for c in conditions)


def report(ev: Evaluation, lines_of_objects: bool = True) -> Report:
    """Findings, and every object's conditions; `lines_of_objects`: find the line of each object
    too (every file is parsed again for its positions), not only those of the findings."""
    findings = [f for p in ev.source.all_problems() for f in problem_findings(p)]
    findings += [Finding(n.source, None, n.obj, n.field, n.message, "warning") for n in ev.notes]
    objects: list[Obj] = []
    for key, status in sorted(ev.cp.status.items(), key=lambda kv: (kv[0].kind, kv[0].namespace, kv[0].name)):
        obj = ev.cp.store.get_key(key)
        origin = ev.source.origins.get(key)
        if obj is None or origin is None:
            continue  # the built-in GatewayClass: no file of the user's holds it
        if _judged(status):
            plain = obj.model_dump(by_alias=True, exclude_none=True, mode="json")

            def locate(path: tuple[str | int, ...], key: ObjectKey = key) -> tuple[str, int | None] | None:
                return ev.source.locate(key, path)

            findings += object_findings(plain, status, locate)
        file, line = (ev.source.locate(key) if lines_of_objects else None) or (None, None)
        objects.append({"kind": key.kind, "namespace": key.namespace, "name": key.name,
                        "file": file, "line": line, "status": _without_times(status)})
    for (kind, namespace, name, rule), why in sorted(five_hundreds(ev.cp.translation.gateways.values()).items()):
        key = ObjectKey(kind, namespace, name)
        inner = re.match(r"rule [^:]+: ([\w.\[\]]+): ", why.partition(": ")[2])  # the field a replaced rule names
        path = f"spec.rules[{rule}]" + (f".{inner.group(1)}" if inner else "")
        file, line = ev.source.locate(key, parse_path(path)) or (None, None)
        findings.append(Finding(file, line, f"{kind} {namespace}/{name}", path, why))
    findings.sort(key=lambda f: (f.file or "", f.line or 0, f.object, f.field))
    return Report(findings, objects, len(ev.source.origins))


def _entry_label(group: str, ref: Obj | None) -> str:
    """`listener https: `, `parent gw/http: `, `ancestor HTTPRoute good: `; the object's own: nothing."""
    if ref is None or not group:
        return ""
    name = "/".join(str(ref[k]) for k in ("name", "sectionName") if ref.get(k))
    kind = f"{ref['kind']} " if group == "ancestors" and ref.get("kind") else ""
    return f"{group[:-1]} {kind}{name}: "


def render_text(rep: Report, show_status: bool) -> str:
    lines = [str(f) for f in rep.findings]
    if show_status:
        for o in rep.objects:
            shown = "; ".join(_entry_label(group, ref) + " ".join(describe_condition(c) for c in conds)
                              for group, ref, conds in _entries(o["status"]) if conds) or "no conditions"
            ns = f"{o['namespace']}/" if o["namespace"] else ""
            lines.append(f"{o['file']}:{o['line']}: {o['kind']} {ns}{o['name']}: {shown}")
    summary = (f"{rep.errors} error{'s' * (rep.errors != 1)}, {rep.warnings} warning{'s' * (rep.warnings != 1)} "
               f"in {rep.loaded} objects")
    lines.append(summary if rep.findings else f"ok: {rep.loaded} objects, no problems")
    return "\n".join(lines)


def render_json(rep: Report) -> str:
    return json.dumps({"ok": rep.errors == 0, "errors": rep.errors, "warnings": rep.warnings,
                       "findings": [asdict(f) for f in rep.findings], "objects": rep.objects}, indent=2)


def _escape(value: str, property_: bool = False) -> str:
    """GitHub workflow command escaping (toolkit/core's escapeData, escapeProperty)."""
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if property_ else value


def render_github(rep: Report) -> str:
    """`::error file=F,line=L,title=T::message`: annotations on the pull request's lines."""
    out = []
    for f in rep.findings:
        props = [f"file={_escape(f.file, True)}"] if f.file else []
        if f.line is not None:
            props.append(f"line={f.line}")
        if f.object:
            props.append(f"title={_escape(f.object, True)}")
        text = f"{f.field}: {f.message}" if f.field else f.message
        out.append(f"::{f.severity} {','.join(props)}::{_escape(text)}")
    return "\n".join(out)
