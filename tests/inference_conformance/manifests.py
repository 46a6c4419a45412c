"""The Inference Extension's conformance manifests made runnable by `lychgate run`.

Local mode runs no Deployments, so each Deployment becomes its replicas as Pod
manifests (Running, Ready, a loopback Pod IP of their own) served by local
stand-ins (servers.py): model servers answer on each Pod IP and port, and each
conformance endpoint picker (the lwepp image, named by its `--pool-name`) runs
on its own Pod IP and `--grpc-port`. A Service whose selector picks a picker's
Pod gets an EndpointSlice with that Pod; a Service selecting nothing has none
(as upstream's MakeServiceUnavailable leaves it). RBAC objects are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from tests.conformance.manifests import GATEWAY_CLASS, REPO, key
from tests.inference_conformance.servers import ConformancePicker, ModelServers, PortIdentity

# shared/ sits beside the work tree (in CI too); the runner skips without it.
SHARED = REPO.parent / "shared" / "inference-extension"
UPSTREAM = SHARED / "conformance"
DROPPED_KINDS = frozenset({"Deployment", "Role", "RoleBinding", "ServiceAccount"})
MODEL_SERVER_NET = "127.0.40"
PICKER_NET = "127.0.41"


def load(relative: str) -> list[dict[str, Any]]:
    """An upstream manifest file (path relative to conformance/), class name filled in."""
    text = (UPSTREAM / relative).read_text().replace("{GATEWAY_CLASS_NAME}", GATEWAY_CLASS)
    return [d for d in yaml.safe_load_all(text) if d]


def dump(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def _args(deployment: dict[str, Any]) -> list[str]:
    template = (deployment.get("spec") or {}).get("template") or {}
    return [str(a) for c in (template.get("spec") or {}).get("containers") or [] for a in c.get("args") or []]


def _arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


@dataclass
class Workload:
    namespace: str
    name: str
    labels: dict[str, str]
    pods: list[dict[str, Any]] = field(default_factory=list)
    picker: ConformancePicker | None = None


class LocalPods:
    """The Pods of every Deployment seen so far, and their servers, started once."""

    def __init__(self) -> None:
        self.models = ModelServers()
        self.workloads: dict[tuple[str, str], Workload] = {}
        self._ips = {MODEL_SERVER_NET: 0, PICKER_NET: 0}

    def _ip(self, net: str) -> str:
        self._ips[net] += 1
        return f"{net}.{self._ips[net]}"

    def localize(self, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Deployments → Pods (servers started), Services → EndpointSlices, RBAC dropped."""
        # Model servers first: a picker is given its pool's endpoints when it starts.
        deployments = [d for d in docs if d.get("kind") == "Deployment"]
        for doc in sorted(deployments, key=lambda d: _arg(_args(d), "--pool-name") is not None):
            self._deploy(doc, docs)
        out: list[dict[str, Any]] = []
        for doc in docs:
            kind, namespace, name = key(doc)
            if kind == "Deployment":
                out += self.workloads[(namespace, name)].pods
            elif kind not in DROPPED_KINDS:
                out.append(doc)
                if kind == "Service":
                    out += self._endpoint_slice(doc)
        return out

    def _deploy(self, doc: dict[str, Any], docs: list[dict[str, Any]]) -> None:
        _, namespace, name = key(doc)
        if (namespace, name) in self.workloads:
            return
        spec = doc.get("spec") or {}
        template = spec.get("template") or {}
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        containers = (template.get("spec") or {}).get("containers") or []
        w = Workload(namespace, name, labels)
        self.workloads[(namespace, name)] = w
        args = _args(doc)
        pool = _arg(args, "--pool-name")
        for i in range(int(spec.get("replicas", 1))):
            pod = f"{name}-local-{i}"
            ip = self._ip(PICKER_NET if pool else MODEL_SERVER_NET)
            if pool is None:
                for c in containers:
                    self._serve_model(c, namespace, pod, ip)
            w.pods.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": namespace, "labels": labels},
                "spec": {"containers": [{"name": c.get("name"), "image": c.get("image"), "ports": c.get("ports", [])}
                                        for c in containers]},
                "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]},
            })
        if pool is not None:
            pool_ns = _arg(args, "--pool-namespace") or namespace
            port = int(_arg(args, "--grpc-port") or 9002)
            w.picker = ConformancePicker(f"{pool_ns}/{pool}", self._pool_endpoints(docs, pool_ns, pool),
                                         w.pods[0]["status"]["podIP"], port).start()

    def _serve_model(self, container: dict[str, Any], namespace: str, pod: str, ip: str) -> None:
        env = {e.get("name"): str(e.get("value", "")) for e in container.get("env") or []}
        include_port = env.get("INCLUDE_HTTP_PORT_HEADER", "").lower() == "true"
        ports = [(env.get("HTTP_PORT", "3000"), "h1")]
        if env.get("H2C_PORT"):
            ports.append((env["H2C_PORT"], "h2c"))
        for port, protocol in ports:
            identity = PortIdentity(namespace, pod, http_port=port if include_port else "")
            self.models.serve(identity, ip, int(port), protocol)

    def _pool_endpoints(self, docs: list[dict[str, Any]], namespace: str, name: str) -> list[str]:
        """The pool's endpoints ("ip:port"): its Pods (Deployments seen so far), on each of its target ports."""
        pool = next((d for d in docs if key(d) == ("InferencePool", namespace, name)), None)
        if pool is None:
            return []
        selector = (pool["spec"].get("selector") or {}).get("matchLabels") or {}
        ports = [p["number"] for p in pool["spec"].get("targetPorts") or []]
        pods = [p for w in self.workloads.values() if w.namespace == namespace and w.picker is None
                and selector.items() <= w.labels.items() for p in w.pods]
        return [f"{p['status']['podIP']}:{port}" for p in sorted(pods, key=lambda p: p["metadata"]["name"])
                for port in ports]

    def _endpoint_slice(self, service: dict[str, Any]) -> list[dict[str, Any]]:
        _, namespace, name = key(service)
        spec = service.get("spec") or {}
        selector = spec.get("selector") or {}
        pods = [p for w in self.workloads.values() if w.namespace == namespace and selector
                and selector.items() <= w.labels.items() for p in w.pods]
        if not pods:
            return []
        ports = [{"name": p.get("name", ""), "port": int(p.get("targetPort", p["port"])),
                  "protocol": p.get("protocol", "TCP")} for p in spec.get("ports") or []]
        return [{
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-local", "namespace": namespace,
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4", "ports": [{k: v for k, v in p.items() if v != ""} for p in ports],
            "endpoints": [{"addresses": [p["status"]["podIP"]], "conditions": {"ready": True},
                           "targetRef": {"kind": "Pod", "name": p["metadata"]["name"], "namespace": namespace}}
                          for p in pods],
        }]

    def close(self) -> None:
        for w in self.workloads.values():
            if w.picker is not None:
                w.picker.close()
        self.models.close()
