"""GatewayParameters `kube.istio` and `kube.sdsContainer`: the proxy Pod joins an Istio mesh.

As kgateway renders it: an `istio-proxy` sidecar (Istio's agent with Envoy
disabled) fetches the workload certificate from istiod and writes it to a
shared in-memory volume, and an `sds` sidecar serves it to Envoy over SDS on
127.0.0.1:8234. The Pod gains the volumes both need (istiod's root CA, the
projected token with audience istio-ca, the certificate and socket directories).
Containers in `istio.customSidecars` are added as written.
"""

from __future__ import annotations

from typing import Any

from lychgate.api.lychgate import Image, IstioContainer, KubernetesProxyConfig, ResourceRequirements
from lychgate.deploy.images import image_ref

SDS_PORT = 8234
ISTIO_PROXY_IMAGE = "docker.io/istio/proxyv2:1.22.0"
ISTIO_CERTS = "/etc/istio-certs/"


def _image(default: str | None, image: Image | None) -> tuple[str, str | None]:
    if default is None:  # no default image: the parameters name it (translation checks they do)
        assert image is not None and image.repository
        default = image.repository
    return image_ref(default, image)


def _extras(container: dict[str, Any], security_context: dict[str, Any] | None,
            resources: ResourceRequirements | None, pull_policy: str | None) -> dict[str, Any]:
    if pull_policy:
        container["imagePullPolicy"] = pull_policy
    if resources is not None:
        container["resources"] = resources.model_dump(by_alias=True, exclude_defaults=True)
    if security_context:
        container["securityContext"] = dict(security_context)
    return container


def _field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def sds_container(kube: KubernetesProxyConfig) -> dict[str, Any]:
    sds = kube.sds_container
    image, pull = _image(None, sds.image if sds else None)
    level = (sds.bootstrap.log_level if sds and sds.bootstrap else None) or "info"
    return _extras({
        "name": "sds",
        "image": image,
        "env": [_field("POD_NAME", "metadata.name"), _field("POD_NAMESPACE", "metadata.namespace"),
                {"name": "ISTIO_MTLS_SDS_ENABLED", "value": "true"}, {"name": "LOG_LEVEL", "value": level}],
        "ports": [{"name": "sds", "containerPort": SDS_PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": SDS_PORT}, "initialDelaySeconds": 3, "periodSeconds": 10,
                           "failureThreshold": 3, "successThreshold": 1, "timeoutSeconds": 1},
        "volumeMounts": [{"name": "bootstrap", "mountPath": "/etc/envoy"},
                         {"name": "istio-certs", "mountPath": ISTIO_CERTS}],
    }, sds.security_context if sds else None, sds.resources if sds else None, pull)


def istio_proxy_container(istio: IstioContainer | None) -> dict[str, Any]:
    c = istio or IstioContainer()
    image, pull = _image(ISTIO_PROXY_IMAGE, c.image)
    discovery = c.istio_discovery_address or "istiod.istio-system.svc:15012"
    return _extras({
        "name": "istio-proxy",
        "image": image,
        "args": ["proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local",
                 "--configPath", "/etc/istio/proxy", "--serviceCluster", "istio-proxy-prometheus",
                 "--drainDuration", "45s", "--parentShutdownDuration", "1m0s",
                 f"--proxyLogLevel={c.log_level or 'warning'}", "--proxyComponentLogLevel=misc:error",
                 "--connectTimeout", "10s", "--controlPlaneAuthPolicy", "NONE", "--dnsRefreshRate", "300s",
                 "--controlPlaneBootstrap=false"],
        "env": [
            {"name": "OUTPUT_CERTS", "value": ISTIO_CERTS.rstrip("/")},
            {"name": "JWT_POLICY", "value": "third-party-jwt"},
            {"name": "PILOT_CERT_PROVIDER", "value": "istiod"},
            {"name": "CA_ADDR", "value": discovery},
            {"name": "ISTIO_META_MESH_ID", "value": c.istio_meta_mesh_id or "cluster.local"},
            {"name": "ISTIO_META_CLUSTER_ID", "value": c.istio_meta_cluster_id or "Kubernetes"},
            {"name": "PROXY_CONFIG", "value": f'{{"discoveryAddress": "{discovery}"}}'},
            _field("POD_NAME", "metadata.name"), _field("POD_NAMESPACE", "metadata.namespace"),
            _field("INSTANCE_IP", "status.podIP"), _field("SERVICE_ACCOUNT", "spec.serviceAccountName"),
            _field("HOST_IP", "status.hostIP"), _field("ISTIO_META_POD_NAME", "metadata.name"),
            _field("ISTIO_META_CONFIG_NAMESPACE", "metadata.namespace"),
            {"name": "DISABLE_ENVOY", "value": "true"},
        ],
        "volumeMounts": [
            {"name": "istiod-ca-cert", "mountPath": "/var/run/secrets/istio"},
            {"name": "istio-envoy", "mountPath": "/etc/istio/proxy"},
            {"name": "istio-certs", "mountPath": ISTIO_CERTS},
            {"name": "istio-token", "mountPath": "/var/run/secrets/tokens"},
            {"name": "credential-socket", "mountPath": "/var/run/secrets/credential-uds"},
            {"name": "workload-socket", "mountPath": "/var/run/secrets/workload-spiffe-uds"},
            {"name": "workload-certs", "mountPath": "/var/run/secrets/workload-spiffe-credentials"},
        ],
    }, c.security_context, c.resources, pull)


VOLUMES: list[dict[str, Any]] = [
    {"name": "istio-certs", "emptyDir": {"medium": "Memory"}},
    {"name": "istiod-ca-cert", "configMap": {"name": "istio-ca-root-cert", "defaultMode": 420}},
    {"name": "istio-envoy", "emptyDir": {"medium": "Memory"}},
    {"name": "istio-token", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {
        "audience": "istio-ca", "expirationSeconds": 43200, "path": "istio-token"}}]}},
    {"name": "credential-socket", "emptyDir": {}},
    {"name": "workload-socket", "emptyDir": {}},
    {"name": "workload-certs", "emptyDir": {}},
]


def add_sidecars(kube: KubernetesProxyConfig, pod_spec: dict[str, Any]) -> None:
    """The mesh sidecars and volumes when `istio` is set; its custom sidecars as written."""
    if kube.istio is None:
        return
    pod_spec["containers"] += [sds_container(kube), istio_proxy_container(kube.istio.istio_proxy_container),
                               *(dict(c) for c in kube.istio.custom_sidecars)]
    pod_spec["volumes"] += [dict(v) for v in VOLUMES]

