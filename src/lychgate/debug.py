"""`lychgate debug`: the debug procedure of spec §4.5, run for you.

1. Are the control plane and each Gateway's proxy running (and if not, why)?
2. Which routes are not accepted, and why (their status)?
3. Does each proxy hold exactly the routes translation produced?
4. Which policies say Accepted but are not applied, and why?
5. The last errors of each component's log.

Each step gathers facts through the control plane's admin API and Envoy's
admin interface; `Report` turns them into findings a person can act on.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from envoy.config.route.v3 import route_components_pb2 as route_pb
from google.protobuf import json_format

from lychgate import access_log_files
from lychgate.xds.cache import route_hash
from lychgate.xds.translator.route_matcher import routes_of

ROUTE_KINDS = ("HTTPRoute",)
POLICY_KINDS = ("TrafficPolicy", "ListenerPolicy", "HTTPListenerPolicy")


@dataclass
class Finding:
    step: str
    ok: bool
    subject: str
    message: str


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    logs: dict[str, list[str]] = field(default_factory=dict)
    requests: dict[str, list[str]] = field(default_factory=dict)  # proxy -> last access log lines

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    def add(self, step: str, ok: bool, subject: str, message: str) -> None:
        finding = Finding(step, ok, subject, message)
        if finding not in self.findings:  # a policy's summary may repeat a target's reason
            self.findings.append(finding)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "findings": [asdict(f) for f in self.findings], "logs": self.logs,
                "requests": self.requests}


class AdminClient:
    def __init__(self, admin: str, timeout: float = 10) -> None:
        self.base = f"http://{admin}"
        self.http = httpx.Client(timeout=timeout)

    def get(self, path: str, **params: str) -> Any:
        resp = self.http.get(self.base + path, params=params)
        resp.raise_for_status()
        return resp.json()


def intended_routes(krt: dict[str, Any], gateway: str) -> dict[str, str]:
    """Envoy route name -> content hash, of what translation produced for a Gateway."""
    for item in krt["collections"].get("IntendedRoutes", {}).get("items", []):
        if item["gateway"] == gateway:
            return dict(item["routes"])
    return {}


def proxy_routes(config_dump: dict[str, Any]) -> dict[str, str]:
    """Route name -> content hash, from Envoy's /config_dump?resource=dynamic_route_configs
    (the translator, imported here, registers the protos its Any fields name)."""
    out: dict[str, str] = {}
    for config in config_dump.get("configs", []):
        for vh in config.get("route_config", {}).get("virtual_hosts", []):
            message = json_format.ParseDict(vh, route_pb.VirtualHost(), ignore_unknown_fields=True)
            for route in routes_of(message):  # listed, or in a matcher tree
                out[route.name] = route_hash(route)
    return out


def _conditions(status: dict[str, Any]) -> list[dict[str, Any]]:
    out = list(status.get("conditions", []))
    for group in ("parents", "ancestors", "listeners"):
        for item in status.get(group, []):
            out.extend(item.get("conditions", []))
    return out


def _tail_errors(path: Path, lines: int = 10) -> list[str]:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line for line in text if "][error][" in line or "][critical][" in line or "][warning][" in line][-lines:]


def run(admin: str, gateway: str | None = None, namespace: str = "default") -> Report:
    report = Report()
    client = AdminClient(admin)
    # 1. control plane and proxies
    try:
        proxies = {p["gateway"]: p for p in client.get("/api/v1/proxies")["items"]}
    except httpx.HTTPError as err:
        report.add("running", False, "control plane", f"cannot reach the admin server at {admin}: {err}")
        return report
    report.add("running", True, "control plane", f"admin server at {admin} answers")
    gateways = client.get("/api/v1/objects", kind="Gateway")["items"]
    wanted = [g for g in gateways if gateway is None
              or (g["metadata"]["name"] == gateway and g["metadata"]["namespace"] == namespace)]
    if gateway is not None and not wanted:
        report.add("running", False, f"Gateway {namespace}/{gateway}", "not found")
    for gw in wanted:
        ref = f"{gw['metadata']['namespace']}/{gw['metadata']['name']}"
        programmed = next((c for c in gw.get("status", {}).get("conditions", []) if c["type"] == "Programmed"), None)
        proxy = proxies.get(ref)
        if proxy is None:
            why = programmed["message"] if programmed else "no status yet"
            report.add("running", False, f"Gateway {ref}", f"no proxy runs: {why}")
            continue
        running = proxy.get("state") == "running" and proxy.get("pid")
        report.add("running", bool(running), f"proxy of {ref}",
                   f"pid {proxy.get('pid')}, admin {proxy.get('admin')}" if running
                   else f"state {proxy.get('state')}, last exit {proxy.get('lastExit')}; log {proxy.get('log')}")
        if programmed is not None and programmed["status"] != "True":
            report.add("running", False, f"Gateway {ref}", f"not programmed: {programmed['message']}")
    # 2. routes and their status
    for kind in ROUTE_KINDS:
        for route in client.get("/api/v1/objects", kind=kind)["items"]:
            meta = route["metadata"]
            subject = f"{kind} {meta['namespace']}/{meta['name']}"
            bad = [c for c in _conditions(route.get("status", {}))
                   if (c["status"] == "False" and c["type"] != "PartiallyInvalid")
                   or (c["type"] == "PartiallyInvalid" and c["status"] == "True")]
            if not route.get("status"):
                report.add("routes", False, subject, "no status: it names no parent lychgate serves")
            for c in bad:
                report.add("routes", False, subject, f"{c['type']}={c['status']} ({c['reason']}): {c['message']}")
            if route.get("status") and not bad:
                report.add("routes", True, subject, "accepted, all references resolved")
    # 3. proxy configuration against intent
    krt = client.get("/snapshots/krt")
    for q in krt["collections"].get("Quarantine", {}).get("items", []):
        report.add("config", False, f"proxy of {q['gateway']}",
                   f"quarantined: rule {q['rule']} of {q['kind']} {q['namespace']}/{q['name']} answers 500 "
                   f"because Envoy rejected it ({q['error']}); fix the rule and it is tried again")
    for gw in wanted:
        ref = f"{gw['metadata']['namespace']}/{gw['metadata']['name']}"
        proxy = proxies.get(ref)
        if not proxy or not proxy.get("admin"):
            continue
        try:
            dump = httpx.get(f"http://{proxy['admin']}/config_dump",
                             params={"resource": "dynamic_route_configs"}, timeout=10).json()
        except (httpx.HTTPError, ValueError) as err:
            report.add("config", False, f"proxy of {ref}", f"cannot read config_dump: {err}")
            continue
        intended, held = intended_routes(krt, ref), proxy_routes(dump)
        missing = sorted(n for n in intended if held.get(n) != intended[n])
        extra = sorted(held.keys() - intended.keys())
        for name in missing:
            what = "an older version of it" if name in held else "nothing of it"
            report.add("config", False, f"proxy of {ref}",
                       f"route {name} was translated but the proxy does not hold it (it holds {what})")
        for name in extra:
            report.add("config", False, f"proxy of {ref}", f"the proxy holds route {name} that translation no longer produces")
        if not missing and not extra:
            report.add("config", True, f"proxy of {ref}", f"holds exactly the {len(intended)} translated routes")
        report.logs[f"proxy {ref}"] = _tail_errors(Path(proxy.get("log", "")))
        with contextlib.suppress(httpx.HTTPError, ValueError):
            paths, lines = access_log_files.recent(proxy["admin"], Path(proxy.get("log", "")))
            if paths:
                report.requests[f"proxy {ref} ({', '.join(paths)})"] = lines
    # 4. policies accepted but not applied
    for kind in POLICY_KINDS:
        try:
            policies = client.get("/api/v1/objects", kind=kind)["items"]
        except httpx.HTTPStatusError:
            continue  # this control plane does not know the kind
        for policy in policies:
            meta = policy["metadata"]
            subject = f"{kind} {meta['namespace']}/{meta['name']}"
            status = policy.get("status", {})
            # The policy's own conditions (no target at all) and those per target.
            for ancestor in [{"conditions": status.get("conditions", [])}, *status.get("ancestors", [])]:
                conds = {c["type"]: c for c in ancestor.get("conditions", [])}
                accepted = conds.get("Accepted")
                not_applied = [c for t, c in conds.items() if t != "Accepted" and c["status"] == "False"]
                if accepted and accepted["status"] == "True" and not_applied:
                    for c in not_applied:
                        report.add("policies", False, subject, f"Accepted but not applied ({c['reason']}): {c['message']}")
                elif accepted and accepted["status"] == "False":
                    report.add("policies", False, subject, f"not accepted ({accepted['reason']}): {accepted['message']}")
    # 5. logs
    report.logs["control plane"] = client.get("/api/v1/logs")["items"][-10:]
    return report


def render(report: Report) -> str:
    lines = []
    step_titles = {"running": "1. Control plane and proxies", "routes": "2. Routes",
                   "config": "3. Proxy configuration vs intent", "policies": "4. Policies"}
    for step, title in step_titles.items():
        found = [f for f in report.findings if f.step == step]
        if not found:
            continue
        lines.append(title)
        for f in found:
            lines.append(f"  {'ok ' if f.ok else 'BAD'} {f.subject}: {f.message}")
    lines.append("5. Recent errors")
    for source, entries in report.logs.items():
        lines.append(f"  {source}: {'none' if not entries else ''}")
        lines.extend(f"    {e}" for e in entries)
    if report.requests:
        lines.append("6. Recent requests (access log)")
        for source, entries in report.requests.items():
            lines.append(f"  {source}: {'none yet' if not entries else ''}")
            lines.extend(f"    {e}" for e in entries)
    lines.append("")
    lines.append("everything looks right" if report.ok else
                 f"{sum(not f.ok for f in report.findings)} problem(s) found")
    return "\n".join(lines)
