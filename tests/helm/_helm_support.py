"""Helpers shared by the chart tests: rendered-manifest access and the spec's values table."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART_DIR = REPO / "charts" / "lychgate"
# shared/ sits beside the work tree (in CI too); tests that need it skip without it.
SHARED = REPO.parent / "shared"
SPEC = SHARED / "spec" / "000_71a00dee683a5847.txt"
GATEWAY_API_CRDS = SHARED / "gateway-api" / "config" / "crd" / "standard"

RELEASE = "lychgate"
NAMESPACE = "lychgate-system"

# Values that switch on every optional object, so lint and validation see all templates.
EVERYTHING: dict[str, Any] = {
    "commonLabels": {"team": "edge"},
    "controller": {
        "horizontalPodAutoscaler": {"minReplicas": 2, "maxReplicas": 4},
        "verticalPodAutoscaler": {"updatePolicy": {"updateMode": "Off"}},
        "podDisruptionBudget": {"maxUnavailable": 1},
        "xds": {"tls": {"enabled": True}},
        "service": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": True},
    },
    "waypoint": {"enabled": True},
    "inferenceExtension": {"enabled": True},
    "agentgateway": {"enabled": True},
    "gatewayClassParametersRefs": {
        "lychgate": {"name": "gp", "namespace": "infra"},
        "lychgate-waypoint": {"name": "gp-mesh", "namespace": "infra"},
    },
}

# The spec writes product-specific names as placeholders (see its preamble).
PLACEHOLDERS = {
    "<gw>": "lychgate",
    "{extension_api_group}": "gateway.lychgate.dev",
    "<default_registry>": "ghcr.io/lychgate",
    "{orchestrator}": "kubernetes",
    "<metrics_vendor>": "prometheus",
}


@dataclass
class Rendered:
    """One render: the Kubernetes objects in order, plus NOTES.txt."""

    objects: list[dict[str, Any]]
    notes: str
    sources: dict[str, str] = field(default_factory=dict)  # template path -> rendered text

    @classmethod
    def from_helm(cls, manifests: dict[str, str]) -> Rendered:
        objects: list[dict[str, Any]] = []
        notes = ""
        for path, text in sorted(manifests.items()):
            if path.endswith("NOTES.txt"):
                notes = text
                continue
            objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
        return cls(objects, notes, manifests)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def maybe(self, kind: str, name: str | None = None) -> dict[str, Any] | None:
        found = [o for o in self.all(kind) if name is None or o["metadata"]["name"] == name]
        assert len(found) <= 1, f"{len(found)} objects of kind {kind} named {name}"
        return found[0] if found else None

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = self.maybe(kind, name)
        assert found is not None, f"no {kind} {name or ''} rendered; got {self.kinds()}"
        return found

    def kinds(self) -> list[str]:
        return [f"{o['kind']}/{o['metadata']['name']}" for o in self.objects]

    # The controller: most values end up on its pod.
    @property
    def deployment(self) -> dict[str, Any]:
        return self.one("Deployment")

    @property
    def pod(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.deployment["spec"]["template"]["spec"]
        return spec

    @property
    def container(self) -> dict[str, Any]:
        containers: list[dict[str, Any]] = self.pod["containers"]
        assert len(containers) == 1
        return containers[0]

    def env_entries(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self.container.get("env", [])
        return entries

    def env(self) -> dict[str, str]:
        """Plain `value` variables; a fieldRef to the pod's namespace resolves like the kubelet would."""
        resolved: dict[str, str] = {}
        for entry in self.env_entries():
            if "value" in entry:
                resolved[entry["name"]] = entry["value"]
            elif entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == (
                "metadata.namespace"
            ):
                resolved[entry["name"]] = self.deployment["metadata"]["namespace"]
        return resolved


@dataclass(frozen=True)
class SpecValue:
    key: str
    type: str
    default: Any  # NO_DEFAULT when the spec says "see sub-keys" / "see below"


NO_DEFAULT = object()


def _spec_default(text: str) -> Any:
    text = text.strip()
    if text.startswith("see "):
        return NO_DEFAULT
    if text == "nil":
        return None
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    return json.loads(text)


def spec_values() -> list[SpecValue]:
    """The rows of the spec's §2.6.1 table (chart values)."""
    text = SPEC.read_text()
    section = text.split("### 2.6.1", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("Key", "---"):
            continue
        rows.append(SpecValue(cells[0], cells[1], _spec_default(cells[2])))
    return rows


def lookup(values: dict[str, Any], dotted: str) -> Any:
    node: Any = values
    for part in dotted.split("."):
        assert isinstance(node, dict) and part in node, f"{dotted} is not in values.yaml"
        node = node[part]
    return node


def template_env_names() -> set[str]:
    """Every LYCHGATE_* name written anywhere in the templates, rendered or not."""
    names: set[str] = set()
    for path in (CHART_DIR / "templates").iterdir():
        names.update(re.findall(r"\bLYCHGATE_[A-Z0-9_]+\b", path.read_text()))
    return names
