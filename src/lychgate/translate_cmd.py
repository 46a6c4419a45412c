"""`lychgate translate`: the xDS resources each Gateway's proxy would receive.

They are the snapshot the control plane's pass stores for the Gateway (lychgate.offline):
what `lychgate run` sends. Each resource is written as Envoy's admin `/config_dump`
writes it: proto field names, its type in `@type`, typed configs expanded the same way.

Endpoints are the exception Envoy makes: its dump rebuilds them from the hosts it holds
instead of keeping what it received, with its defaults written out and every host
HEALTHY (no health check has run). They are shown that way here, so the output equals
the proxy's. Left out: the endpoints of the Gateway's own replicas (xds/replicas.py),
which are the proxies connected at the time, not configuration.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from lychgate.admin.redact import redact
from lychgate.offline import Evaluation, UsageError
from lychgate.xds import dump, types
from lychgate.xds.cache import decode
from lychgate.xds.replicas import LOCAL_CLUSTER
from lychgate.xds.validate import asked_for

# --type: the xDS services, and the types of the resources each sends.
KINDS: dict[str, tuple[str, ...]] = {
    "lds": (types.LISTENER,),
    "rds": (types.ROUTE, types.SCOPED_ROUTE),
    "cds": (types.CLUSTER,),
    "eds": (types.ENDPOINT,),
}
# How each type is listed in the output (config_dump's words for them).
SECTIONS = {types.LISTENER: "listeners", types.SCOPED_ROUTE: "scoped_route_configs",
            types.ROUTE: "route_configs", types.CLUSTER: "clusters", types.ENDPOINT: "endpoint_configs",
            types.SECRET: "secrets"}


def as_config_dump(type_url: str, message: Any) -> dict[str, Any]:
    """One resource as `/config_dump` shows it, private keys and passwords redacted as there
    (the output goes into CI logs and pull requests)."""
    shown: dict[str, Any] = redact({"@type": type_url, **dump.as_dict(type_url, message, proto_names=True)})
    return shown


def endpoints_as_dumped(resource: dict[str, Any]) -> dict[str, Any]:
    """A ClusterLoadAssignment as Envoy's dump rebuilds it (dynamic_endpoint_configs)."""
    groups = []
    for group in resource.get("endpoints") or []:
        hosts = [{"endpoint": {**lb.get("endpoint", {}), "health_check_config": {}},
                  "health_status": "HEALTHY", "load_balancing_weight": lb.get("load_balancing_weight", 1)}
                 for lb in group.get("lb_endpoints") or []]
        rebuilt = {"locality": group.get("locality", {}), "lb_endpoints": hosts,
                   "load_balancing_weight": group.get("load_balancing_weight", 0)}
        if group.get("priority"):
            rebuilt["priority"] = group["priority"]
        groups.append(rebuilt)
    policy = resource.get("policy") or {}
    out = {"@type": resource["@type"], "cluster_name": resource["cluster_name"],
           "policy": {**policy, "overprovisioning_factor": policy.get("overprovisioning_factor", 140)}}
    return {**out, "endpoints": groups} if groups else out


def gateway_resources(ev: Evaluation, ref: str, wanted: tuple[str, ...]) -> dict[str, Any]:
    snapshot = ev.cp.cache.get(ref)
    out: dict[str, Any] = {"gateway": ref}
    asked = asked_for(snapshot.resources) if snapshot is not None else set()
    for type_url in types.PUSH_ORDER:
        if type_url not in wanted:
            continue
        byname = snapshot.resources.get(type_url, {}) if snapshot is not None else {}
        shown = [as_config_dump(type_url, decode(type_url, byname[name])) for name in sorted(byname)
                 if not (type_url == types.ENDPOINT and name == LOCAL_CLUSTER)
                 and not (type_url == types.ROUTE and name not in asked)]
        out[SECTIONS[type_url]] = [endpoints_as_dumped(r) for r in shown] if type_url == types.ENDPOINT else shown
    return out


def select(ev: Evaluation, gateway: str | None, kind: str) -> list[dict[str, Any]]:
    """Per Gateway (every one, or `namespace/name`; a bare name is in `default`), its resources."""
    if kind != "all" and kind not in KINDS:
        raise UsageError(f"--type {kind!r}: use lds, rds, cds, eds or all")
    wanted = (*(t for ts in KINDS.values() for t in ts), types.SECRET) if kind == "all" else KINDS[kind]
    refs = sorted(ev.cp.translation.gateways)
    if gateway is not None:
        ref = gateway if "/" in gateway else f"default/{gateway}"
        if ref not in refs:
            served = ", ".join(refs) or "none"
            raise UsageError(f"--gateway {gateway}: no such Gateway is served (served: {served})")
        refs = [ref]
    return [gateway_resources(ev, ref, wanted) for ref in refs]


def render(documents: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps(documents, indent=2)
    return "---\n".join(yaml.safe_dump(d, sort_keys=False, width=120) for d in documents)
