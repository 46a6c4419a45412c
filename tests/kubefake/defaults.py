"""Server-side defaulting for built-in types (the subset a controller notices).

Why bother: a deployer that compares "what I want" with "what is there" sees the
server's defaults (imagePullPolicy, protocol: TCP, clusterIP, ...) on every read.
Without them here, code that would flap against a real cluster passes its tests.
"""

from __future__ import annotations

import base64
import ipaddress
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .resources import ResourceType

Obj = dict[str, Any]


class Allocator:
    """ClusterIPs and NodePorts, handed out in order like the API server's allocators."""

    def __init__(self) -> None:
        self._next_ip = int(ipaddress.IPv4Address("10.96.0.10"))
        self._next_port = 30000

    def cluster_ip(self) -> str:
        ip = str(ipaddress.IPv4Address(self._next_ip))
        self._next_ip += 1
        return ip

    def node_port(self) -> int:
        port = self._next_port
        self._next_port += 1
        return port


def _setdefault(d: Obj, key: str, value: Any) -> None:
    if d.get(key) is None:
        d[key] = value


def namespace(rt: ResourceType, new: Obj, old: Obj | None, alloc: Allocator) -> None:
    meta = new.setdefault("metadata", {})
    # The NamespaceDefaultLabelName feature: always present, always the name; Gateway
    # allowedRoutes namespace selectors rely on it.
    labels = meta.get("labels") or {}
    labels["kubernetes.io/metadata.name"] = meta.get("name", "")
    meta["labels"] = labels
    spec = new.setdefault("spec", {})
    _setdefault(spec, "finalizers", ["kubernetes"])
    if old is None:
        new["status"] = {"phase": "Active"}


def service(rt: ResourceType, new: Obj, old: Obj | None, alloc: Allocator) -> None:
    spec = new.setdefault("spec", {})
    _setdefault(spec, "type", "ClusterIP")
    _setdefault(spec, "sessionAffinity", "None")
    stype = spec["type"]
    old_spec = (old or {}).get("spec") or {}
    old_ports = {(p.get("port"), p.get("protocol", "TCP")): p for p in old_spec.get("ports") or []}
    for port in spec.get("ports") or []:
        _setdefault(port, "protocol", "TCP")
        _setdefault(port, "targetPort", port.get("port"))
        if stype in ("NodePort", "LoadBalancer") and not port.get("nodePort"):
            prev = old_ports.get((port.get("port"), port["protocol"]), {})
            port["nodePort"] = prev.get("nodePort") or alloc.node_port()
    if stype != "ExternalName":
        # Allocated values survive an update that omits them (patchAllocatedValues).
        if not spec.get("clusterIP"):
            spec["clusterIP"] = old_spec.get("clusterIP") or alloc.cluster_ip()
        if not spec.get("clusterIPs"):
            spec["clusterIPs"] = old_spec.get("clusterIPs") or [spec["clusterIP"]]
        _setdefault(spec, "ipFamilies", ["IPv4"])
        _setdefault(spec, "ipFamilyPolicy", "SingleStack")
        _setdefault(spec, "internalTrafficPolicy", "Cluster")
    if stype in ("NodePort", "LoadBalancer"):
        _setdefault(spec, "externalTrafficPolicy", "Cluster")
    if stype == "LoadBalancer":
        _setdefault(spec, "allocateLoadBalancerNodePorts", True)
    if old is None:
        new["status"] = {"loadBalancer": {}}


def secret(rt: ResourceType, new: Obj, old: Obj | None, alloc: Allocator) -> None:
    _setdefault(new, "type", "Opaque")
    # stringData is write-only: merged into data (base64) and never stored.
    string_data = new.pop("stringData", None) or {}
    if string_data:
        data = new.get("data") or {}
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        new["data"] = data


def _container(c: Obj) -> None:
    _setdefault(c, "terminationMessagePath", "/dev/termination-log")
    _setdefault(c, "terminationMessagePolicy", "File")
    image = c.get("image") or ""
    tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
    latest = image.endswith(":latest") or not tagged
    _setdefault(c, "imagePullPolicy", "Always" if latest else "IfNotPresent")
    _setdefault(c, "resources", {})
    for p in c.get("ports") or []:
        _setdefault(p, "protocol", "TCP")
    for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(probe_name)
        if isinstance(probe, dict):
            _setdefault(probe, "timeoutSeconds", 1)
            _setdefault(probe, "periodSeconds", 10)
            _setdefault(probe, "successThreshold", 1)
            _setdefault(probe, "failureThreshold", 3)
            if isinstance(probe.get("httpGet"), dict):
                _setdefault(probe["httpGet"], "scheme", "HTTP")
    for env in c.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if isinstance(field_ref, dict):
            _setdefault(field_ref, "apiVersion", "v1")


def _pod_spec(spec: Obj) -> None:
    _setdefault(spec, "restartPolicy", "Always")
    _setdefault(spec, "terminationGracePeriodSeconds", 30)
    _setdefault(spec, "dnsPolicy", "ClusterFirst")
    _setdefault(spec, "securityContext", {})
    _setdefault(spec, "schedulerName", "default-scheduler")
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        _container(c)
    for vol in spec.get("volumes") or []:
        for src in ("configMap", "secret"):
            if isinstance(vol.get(src), dict):
                _setdefault(vol[src], "defaultMode", 420)


def pod(rt: ResourceType, new: Obj, old: Obj | None, alloc: Allocator) -> None:
    _pod_spec(new.setdefault("spec", {}))
    if old is None:
        new["status"] = {"phase": "Pending"}


def deployment(rt: ResourceType, new: Obj, old: Obj | None, alloc: Allocator) -> None:
    spec = new.setdefault("spec", {})
    _setdefault(spec, "replicas", 1)
    _setdefault(spec, "revisionHistoryLimit", 10)
    _setdefault(spec, "progressDeadlineSeconds", 600)
    strategy = spec.setdefault("strategy", {})
    _setdefault(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        ru = strategy.setdefault("rollingUpdate", {})
        _setdefault(ru, "maxUnavailable", "25%")
        _setdefault(ru, "maxSurge", "25%")
    template = spec.setdefault("template", {})
    _pod_spec(template.setdefault("spec", {}))


def endpoint_slice(rt: ResourceType, new: Obj, old: Obj | None, alloc: Allocator) -> None:
    for p in new.get("ports") or []:
        _setdefault(p, "protocol", "TCP")
        _setdefault(p, "name", "")
