"""Upstream conformance manifests made runnable by `lychgate run`.

Local mode cannot run Deployments, so each Deployment of a manifest set becomes
an echo pod of tests/conformance/echo.py (named `<deployment>-<suffix>`), and each
Service whose selector picks a Deployment gets an EndpointSlice pointing at that
pod's local ports. Services are kept as they are (their ports, appProtocols);
Deployments and other workload kinds are dropped. The Secrets the Go suite
creates at run time are generated here (tests/certs.py) and written as manifests.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.certs import CA
from tests.conformance.echo import EchoPods, Identity, server_tls

REPO = Path(__file__).resolve().parents[2]
# shared/ sits beside the work tree (in CI too); the runner skips without it.
UPSTREAM = REPO.parent / "shared" / "gateway-api" / "conformance"
GATEWAY_CLASS = "lychgate"
POD_SUFFIX = "local-0"
DROPPED_KINDS = frozenset({"Deployment", "Pod", "ReplicaSet", "StatefulSet", "DaemonSet"})


def load(relative: str) -> list[dict[str, Any]]:
    """An upstream manifest file (path relative to conformance/), class name filled in."""
    text = (UPSTREAM / relative).read_text().replace("{GATEWAY_CLASS_NAME}", GATEWAY_CLASS)
    return [d for d in yaml.safe_load_all(text) if d]


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    meta = doc.get("metadata") or {}
    return doc.get("kind", ""), meta.get("namespace", "") or "", meta.get("name", "")


def tls_secret(namespace: str, name: str, cert: bytes, key_pem: bytes, ca: bytes | None = None) -> dict[str, Any]:
    data = {"tls.crt": base64.b64encode(cert).decode(), "tls.key": base64.b64encode(key_pem).decode()}
    if ca is not None:
        data["ca.crt"] = base64.b64encode(ca).decode()
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": namespace}, "data": data}


def ca_configmap(namespace: str, name: str, ca: bytes) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"ca.crt": ca.decode()}}


@dataclass
class Certificates:
    """The CA of the run and the certificates issued so far, by (namespace, secret name).

    Upstream creates self-signed certificates; one CA signing them all lets a
    client trust every listener with a single root, which changes nothing a test checks.
    """

    ca: CA = field(default_factory=lambda: CA("gateway-api conformance CA"))
    issued: dict[tuple[str, str], tuple[bytes, bytes]] = field(default_factory=dict)

    def issue(self, namespace: str, name: str, hosts: list[str]) -> dict[str, Any]:
        cert, key_pem = self.ca.issue(hosts[0], hosts)
        self.issued[(namespace, name)] = (cert, key_pem)
        return tls_secret(namespace, name, cert, key_pem)

    def pair(self, namespace: str, name: str) -> tuple[bytes, bytes]:
        """A Secret's certificate and key, issued for abc.example.com if not yet there."""
        if (namespace, name) not in self.issued:
            self.issue(namespace, name, ["abc.example.com"])
        return self.issued[(namespace, name)]


@dataclass(frozen=True)
class Workload:
    """What a Deployment would run, read from its pod template."""

    namespace: str
    name: str
    labels: dict[str, str]
    mode: str  # http | grpc | tcp | dns | udp
    tls_secret: str | None
    service: str = ""  # SERVICE_NAME, which echo-basic reports
    # TLS_CLIENT_CACERTS: ask TLS clients for a certificate signed by the suite's CA
    client_ca: bool = False


def workload(doc: dict[str, Any]) -> Workload:
    spec = doc.get("spec") or {}
    template = spec.get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or []
    env = {e.get("name"): e.get("value") for c in containers for e in c.get("env") or []}
    images = " ".join(c.get("image", "") for c in containers)
    mode = ("grpc" if env.get("GRPC_ECHO_SERVER") else "tcp" if env.get("TCP_ECHO_SERVER")
            else "udp" if env.get("UDP_ECHO_SERVER") else "dns" if "coredns" in images else "http")
    volumes = (template.get("spec") or {}).get("volumes") or []
    secret = next(((v.get("secret") or {}).get("secretName") for v in volumes if v.get("secret")), None)
    uses_tls = any(k and k.startswith("TLS_SERVER") for k in env)
    _, namespace, name = key(doc)
    return Workload(namespace, name, dict((template.get("metadata") or {}).get("labels") or {}),
                    mode, secret if uses_tls else None, env.get("SERVICE_NAME") or "",
                    client_ca="TLS_CLIENT_CACERTS" in env)


class Backends:
    """Echo pods for the Deployments seen so far, started on first use."""

    def __init__(self, pods: EchoPods, certs: Certificates) -> None:
        self.pods = pods
        self.certs = certs
        self.workloads: dict[tuple[str, str], Workload] = {}
        self._ports: dict[tuple[str, str, str], int] = {}

    def pod_name(self, deployment: str) -> str:
        return f"{deployment}-{POD_SUFFIX}"

    def port(self, w: Workload, target_port: int, protocol: str) -> int:
        """The local port standing for `target_port` of the workload's pod."""
        tls = w.tls_secret is not None and target_port == 8443
        if protocol == "UDP":
            kind = "udp" if w.mode == "udp" else "dns"
        else:
            kind = f"{w.mode}{'+tls' if tls else ''}"
        slot = (w.namespace, w.name, kind)
        if slot not in self._ports:
            identity = Identity(w.namespace, self.pod_name(w.name), service=w.service)
            context = (server_tls(*self.certs.pair(w.namespace, w.tls_secret),
                                  client_ca=self.certs.ca.pem if w.client_ca else None)
                       if tls and w.tls_secret else None)
            if kind == "dns":
                self._ports[slot] = self.pods.dns()
            elif kind == "udp":
                self._ports[slot] = self.pods.udp(identity)
            elif w.mode == "grpc":
                self._ports[slot] = self.pods.grpc(identity)
            elif w.mode == "tcp":
                self._ports[slot] = self.pods.tcp(identity, context)
            else:
                self._ports[slot] = self.pods.http(identity, context)
        return self._ports[slot]

    def localize(self, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Drop workloads, keep the rest, add an EndpointSlice per Service that selects a pod."""
        for doc in docs:
            if doc.get("kind") == "Deployment":
                w = workload(doc)
                self.workloads[(w.namespace, w.name)] = w
        out: list[dict[str, Any]] = []
        for doc in docs:
            if doc.get("kind") in DROPPED_KINDS:
                continue
            out.append(doc)
            if doc.get("kind") == "Service":
                slice_ = self._endpoint_slice(doc)
                if slice_ is not None:
                    out.append(slice_)
        return out

    def _endpoint_slice(self, service: dict[str, Any]) -> dict[str, Any] | None:
        _, namespace, name = key(service)
        spec = service.get("spec") or {}
        selector = spec.get("selector") or {}
        w = next((w for (ns, _), w in self.workloads.items()
                  if ns == namespace and selector and selector.items() <= w.labels.items()), None)
        if w is None:
            return None
        ports = []
        for p in spec.get("ports") or []:
            target = p.get("targetPort", p.get("port"))
            protocol = p.get("protocol", "TCP")
            entry = {"port": self.port(w, int(target), protocol), "protocol": protocol}
            if p.get("name"):
                entry["name"] = p["name"]
            ports.append(entry)
        return {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-local", "namespace": namespace,
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4", "ports": ports,
            "endpoints": [{"addresses": [self.pods.host], "conditions": {"ready": True},
                           "targetRef": {"kind": "Pod", "name": self.pod_name(w.name), "namespace": namespace}}],
        }


def base_secrets(certs: Certificates) -> list[dict[str, Any]]:
    """The Secrets upstream's suite setup creates after applying the base manifests."""
    return [
        certs.issue("gateway-conformance-web-backend", "certificate", ["*"]),
        certs.issue("gateway-conformance-infra", "tls-validity-checks-certificate", ["*", "*.org"]),
        certs.issue("gateway-conformance-infra", "tls-passthrough-checks-certificate", ["abc.example.com"]),
        certs.issue("gateway-conformance-app-backend", "tls-passthrough-checks-certificate", ["abc.example.com"]),
    ]


def dump(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)
