"""Discovery documents (/api, /apis, /apis/<g>/<v>, /version), legacy format.

Clients that probe whether a CRD is installed (or which versions are served)
read these; they follow the registry, so installing or deleting a CRD shows up.
"""

from __future__ import annotations

from typing import Any

from .resources import Registry, ResourceType

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(group: str, versions: list[str]) -> dict[str, Any]:
    vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": vs, "preferredVersion": vs[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [_group(g, vs) for g, vs in sorted(registry.group_versions().items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _resource(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": _VERBS,
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    out = [main]
    if rt.status:
        out.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                    "kind": rt.kind, "verbs": ["get", "patch", "update"]})
    return out


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources = [r for rt in sorted(types, key=lambda t: t.plural) for r in _resource(rt)]
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


def version_info() -> dict[str, Any]:
    return {
        "major": "1",
        "minor": "34",
        "gitVersion": "v1.34.0-kubefake",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    }
