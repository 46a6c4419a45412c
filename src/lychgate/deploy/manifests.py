"""The Kubernetes objects of one Gateway's proxy: pure functions of their inputs.

Gateway + GatewayParameters (+ the listener ports translation accepted) →
ServiceAccount, ConfigMap (the Envoy bootstrap), Service and Deployment, each
named after the Gateway, in its namespace, owned by it and labelled
`app.kubernetes.io/name=<gateway>`; with the AI extension (deploy/ai_container.py)
also the Secret `<gateway>-ai-config`. The deployer applies them as they are
(server-side apply), so what is not here is not on the objects.

Envoy binds the listener ports themselves (the Service's targetPort is the
port): the Pod sets `net.ipv4.ip_unprivileged_port_start=0`, so Envoy needs no
root and no capability even for port 80. Its admin interface stays on
127.0.0.1:19000 (reach it with `kubectl port-forward deploy/<gateway> 19000`);
a static listener on READY_PORT answers the readiness probe from admin
`/ready`, which turns 200 once Envoy has its first configuration from xDS.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from lychgate import __version__
from lychgate.ai.config import AIConfig
from lychgate.api.gateway import Gateway
from lychgate.api.lychgate import GatewayParameters, KubernetesProxyConfig, PodTemplate
from lychgate.deploy import ai_container, istio, mcp_container, overlays, overload, stats
from lychgate.deploy.bootstrap import ENVOY_FLAGS, XdsTarget, bootstrap, with_parameters
from lychgate.deploy.images import image_ref
from lychgate.mcp.config import MCPConfig

MANAGED_BY = "lychgate"
NAME_LABEL = "app.kubernetes.io/name"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
GATEWAY_LABEL = "gateway.networking.k8s.io/gateway-name"
CLASS_LABEL = "gateway.networking.k8s.io/gateway-class-name"
BOOTSTRAP_HASH = "gateway.lychgate.dev/bootstrap-hash"

ADMIN_PORT = 19000
READY_PORT = 19003
CONFIG_DIR = PurePosixPath("/etc/envoy")
BOOTSTRAP_FILE = "envoy.json"
CA_FILE = "xds-ca.crt"
RUN_AS_USER = 10101

GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"

# Every container lychgate renders, unless the parameters say otherwise.
CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": RUN_AS_USER,
    "capabilities": {"drop": ["ALL"]},
}


@dataclass(frozen=True)
class ProxyContext:
    """Facts of the installation every proxy shares."""

    xds_host: str  # the controller's xDS Service: <name>.<namespace>.svc
    xds_port: int = 9977
    default_image: str = "ghcr.io/lychgate/envoy:1.40.0"
    # The AI extension runs lychgate itself: the controller's image, whose config format it reads.
    ai_extension_image: str = f"ghcr.io/lychgate/lychgate:{__version__}"
    xds_ca_pem: str | None = None  # set when xDS is served over TLS: proxies verify with it


# --- the bootstrap ----------------------------------------------------------------


def proxy_bootstrap(namespace: str, name: str, ctx: ProxyContext, readiness_proxy_protocol: bool = False,
                    params: GatewayParameters | None = None) -> dict[str, Any]:
    """The Envoy bootstrap of a Gateway's proxy in a Pod (what its ConfigMap holds); with
    `readiness_proxy_protocol`, the readiness port takes connections a load balancer
    prefixed with a PROXY protocol header (`enableReadinessProbeProxyProtocol`). `params`
    set the overload manager's limits (deploy/overload.py)."""
    xds = XdsTarget(ctx.xds_host, ctx.xds_port,
                    ca_file=Path(CONFIG_DIR / CA_FILE) if ctx.xds_ca_pem else None)
    out = bootstrap(namespace, name, xds, admin_address="127.0.0.1", admin_port=ADMIN_PORT,
                    limits=overload.limits(params))
    static = out.setdefault("static_resources", {})
    static.setdefault("clusters", []).append({
        "name": "lychgate_admin",
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {"cluster_name": "lychgate_admin", "endpoints": [{"lb_endpoints": [
            {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": ADMIN_PORT}}}}]}]},
    })
    readiness: dict[str, Any] = {
        "name": "lychgate_readiness",
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": READY_PORT}},
        # A proxy at its connection limit still answers its probe: were it unready, every
        # proxy of a Gateway under a flood would leave the Service and serve no one.
        "ignore_global_conn_limit": True,
        "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "lychgate_readiness",
                "route_config": {"virtual_hosts": [{
                    "name": "readiness",
                    "domains": ["*"],
                    "routes": [
                        {"match": {"path": "/ready"}, "route": {"cluster": "lychgate_admin"}},
                        {"match": {"prefix": "/"}, "direct_response": {"status": 404}},
                    ],
                }]},
                "http_filters": [{
                    "name": "envoy.filters.http.router",
                    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
                }],
            },
        }]}],
    }
    if readiness_proxy_protocol:
        readiness["listener_filters"] = [{"name": "envoy.filters.listener.proxy_protocol", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol"}}]
    static.setdefault("listeners", []).append(readiness)
    return out


# --- the objects ------------------------------------------------------------------


def _labels(gateway: Gateway, extra: dict[str, str] | None = None) -> dict[str, str]:
    infra = gateway.spec.infrastructure
    out = dict(infra.labels) if infra else {}
    out.update(extra or {})
    out.update({
        NAME_LABEL: gateway.name,
        GATEWAY_LABEL: gateway.name,
        CLASS_LABEL: gateway.spec.gateway_class_name,
        MANAGED_BY_LABEL: MANAGED_BY,
    })
    return out


def selector(gateway: Gateway) -> dict[str, str]:
    return {NAME_LABEL: gateway.name, GATEWAY_LABEL: gateway.name}


def _annotations(gateway: Gateway, extra: dict[str, str] | None = None) -> dict[str, str]:
    infra = gateway.spec.infrastructure
    out = dict(infra.annotations) if infra else {}
    out.update(extra or {})
    return out


def _metadata(gateway: Gateway, labels: dict[str, str] | None = None,
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": gateway.name,
        "namespace": gateway.namespace,
        "labels": _labels(gateway, labels),
    }
    ann = _annotations(gateway, annotations)
    if ann:
        meta["annotations"] = ann
    if gateway.metadata.uid:
        # No blockOwnerDeletion: it needs permission on gateways/finalizers, and
        # background deletion of the proxy after its Gateway is what we want.
        meta["ownerReferences"] = [{
            "apiVersion": GATEWAY_API_VERSION, "kind": "Gateway",
            "name": gateway.name, "uid": gateway.metadata.uid, "controller": True,
        }]
    return meta


def _merge_security(defaults: dict[str, Any], override: dict[str, Any] | None) -> dict[str, Any]:
    """Key by key; sysctls merge by name so the unprivileged-port sysctl survives additions."""
    out = copy.deepcopy(defaults)  # the defaults are shared by every container
    for key, value in (override or {}).items():
        if key == "sysctls" and isinstance(value, list):
            names = {s.get("name") for s in value if isinstance(s, dict)}
            out[key] = [s for s in defaults.get("sysctls", []) if s["name"] not in names] + value
        else:
            out[key] = value
    return out


def _envoy_args(kube: KubernetesProxyConfig) -> list[str]:
    boot = kube.envoy_container.bootstrap
    args = ["-c", str(CONFIG_DIR / BOOTSTRAP_FILE), "--disable-hot-restart", *ENVOY_FLAGS,
            "--log-level", boot.log_level]
    if boot.component_log_levels:
        args += ["--component-log-level",
                 ",".join(f"{c}:{lvl}" for c, lvl in sorted(boot.component_log_levels.items()))]
    if boot.log_format is not None:  # JSON: Envoy takes the object as its format string
        args += ["--log-format", boot.log_format.text if boot.log_format.text is not None
                 else json.dumps(boot.log_format.json_, separators=(",", ":"), sort_keys=True)]
    return args + list(kube.envoy_container.extra_args)


def port_name(port: int) -> str:
    return f"port-{port}"


def service_account(gateway: Gateway, params: GatewayParameters | None) -> dict[str, Any]:
    sa = params.spec.kube.service_account if params else None
    return overlays.apply({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": _metadata(gateway, sa.extra_labels if sa else None, sa.extra_annotations if sa else None),
        "automountServiceAccountToken": False,
    }, params.spec.kube.service_account_overlay if params else None)


def config_map(gateway: Gateway, ctx: ProxyContext, params: GatewayParameters | None = None) -> dict[str, Any]:
    settings = params.spec.kube.envoy_container.bootstrap if params else None
    boot = proxy_bootstrap(gateway.namespace, gateway.name, ctx,
                           readiness_proxy_protocol=bool(settings and settings.enable_readiness_probe_proxy_protocol),
                           params=params)
    if settings is not None:
        with_parameters(boot, settings)  # io_uring: as the node's kernel allows
    data = {BOOTSTRAP_FILE: json.dumps(boot, indent=2, sort_keys=True) + "\n"}
    if ctx.xds_ca_pem:
        data[CA_FILE] = ctx.xds_ca_pem
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata(gateway), "data": data}


def _ports(ports: tuple[int, ...], udp_ports: tuple[int, ...], number: str) -> list[dict[str, Any]]:
    """Container or Service ports; a UDP listener's port is named udp-N (names are unique per object)."""
    return ([{"name": port_name(p), number: p, "protocol": "TCP"} for p in sorted(ports)]
            + [{"name": f"udp-{p}", number: p, "protocol": "UDP"} for p in sorted(udp_ports)])


def service(gateway: Gateway, params: GatewayParameters | None, ports: tuple[int, ...],
            udp_ports: tuple[int, ...] = ()) -> dict[str, Any]:
    svc = params.spec.kube.service if params else None
    spec: dict[str, Any] = {
        "type": (svc.type if svc and svc.type else "LoadBalancer"),
        "selector": selector(gateway),
        "ports": [{"name": p["name"], "port": p["port"], "targetPort": p["port"], "protocol": p["protocol"]}
                  for p in _ports(ports, udp_ports, "port")],
    }
    if svc:
        if svc.cluster_ip:
            spec["clusterIP"] = svc.cluster_ip
        if svc.external_traffic_policy:
            spec["externalTrafficPolicy"] = svc.external_traffic_policy
        if svc.load_balancer_class:
            spec["loadBalancerClass"] = svc.load_balancer_class
        if svc.load_balancer_source_ranges:
            spec["loadBalancerSourceRanges"] = list(svc.load_balancer_source_ranges)
        node_ports = {p.port: p.node_port for p in svc.ports if p.node_port is not None}
        for port in spec["ports"]:
            if port["port"] in node_ports:
                port["nodePort"] = node_ports[port["port"]]
        if svc.ip_families:
            spec["ipFamilies"] = list(svc.ip_families)
        if svc.ip_family_policy:
            spec["ipFamilyPolicy"] = svc.ip_family_policy
    return overlays.apply({
        "apiVersion": "v1", "kind": "Service",
        "metadata": _metadata(gateway, svc.extra_labels if svc else None, svc.extra_annotations if svc else None),
        "spec": spec,
    }, params.spec.kube.service_overlay if params else None)


def deployment(gateway: Gateway, params: GatewayParameters | None, ports: tuple[int, ...],
               ctx: ProxyContext, bootstrap_hash: str, udp_ports: tuple[int, ...] = (),
               ai_extension: bool = False, mcp_relay: bool = False) -> dict[str, Any]:
    kube = params.spec.kube if params else KubernetesProxyConfig()
    envoy = kube.envoy_container
    pod = kube.pod_template
    image, pull_policy = image_ref(ctx.default_image, envoy.image)
    container: dict[str, Any] = {
        "name": "envoy",
        "image": image,
        "command": ["envoy"],
        "args": _envoy_args(kube),
        "ports": [*_ports(ports, udp_ports, "containerPort"),
                  {"name": "readiness", "containerPort": READY_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": READY_PORT},
                           "periodSeconds": 5, "failureThreshold": 2},
        "securityContext": _merge_security(CONTAINER_SECURITY, envoy.security_context),
        "volumeMounts": [
            {"name": "bootstrap", "mountPath": str(CONFIG_DIR), "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    if pull_policy:
        container["imagePullPolicy"] = pull_policy
    if envoy.resources and (envoy.resources.limits or envoy.resources.requests):
        container["resources"] = envoy.resources.model_dump(by_alias=True, exclude_defaults=True)
    if envoy.env:
        container["env"] = [dict(e) for e in envoy.env]
    container["volumeMounts"] += [dict(m) for m in envoy.extra_volume_mounts]

    pod_spec: dict[str, Any] = {
        "serviceAccountName": gateway.name,
        "automountServiceAccountToken": False,
        "securityContext": _merge_security({
            "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}],
            "seccompProfile": {"type": "RuntimeDefault"},
        }, pod.security_context if pod else None),
        "containers": [container],
        "volumes": [
            {"name": "bootstrap", "configMap": {"name": gateway.name}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    given = [(container, envoy.security_context), (pod_spec, pod.security_context if pod else None)]
    if ai_extension:  # the AI extension beside Envoy
        ai = kube.ai_extension
        own = ai.security_context if ai else None
        image, pull = image_ref(ctx.ai_extension_image, ai.image if ai else None)
        extension = ai_container.container(ai, image, pull, _merge_security(CONTAINER_SECURITY, own))
        pod_spec["containers"].append(extension)
        pod_spec["volumes"].append(ai_container.volume(gateway.name))
        given.append((extension, own))
    if mcp_relay:  # the MCP relay beside Envoy, its config in the proxy's ConfigMap
        image, pull = image_ref(ctx.ai_extension_image, None)
        relay = mcp_container.container(image, pull, dict(CONTAINER_SECURITY), "bootstrap")
        pod_spec["containers"].append(relay)
        given.append((relay, None))
    if kube.omit_default_security_context:  # the platform sets them: only what the parameters say
        for obj, context in given:
            if context:
                obj["securityContext"] = dict(context)
            else:
                obj.pop("securityContext")
    istio.add_sidecars(kube, pod_spec)
    if kube.floating_user_id:  # the platform assigns the user: no runAsUser anywhere
        for obj in (pod_spec, *pod_spec["containers"]):
            if "securityContext" in obj:
                obj["securityContext"] = {k: v for k, v in obj["securityContext"].items() if k != "runAsUser"}
    if pod:
        if pod.node_selector:
            pod_spec["nodeSelector"] = dict(pod.node_selector)
        if pod.affinity:
            pod_spec["affinity"] = pod.affinity
        if pod.tolerations:
            pod_spec["tolerations"] = list(pod.tolerations)
        if pod.topology_spread_constraints:
            pod_spec["topologySpreadConstraints"] = list(pod.topology_spread_constraints)
        if pod.image_pull_secrets:
            pod_spec["imagePullSecrets"] = [{"name": s.name} for s in pod.image_pull_secrets]
        if pod.termination_grace_period_seconds is not None:
            pod_spec["terminationGracePeriodSeconds"] = pod.termination_grace_period_seconds
        if pod.priority_class_name:
            pod_spec["priorityClassName"] = pod.priority_class_name
        _pod_extras(pod, container, pod_spec)

    spec: dict[str, Any] = {
        "selector": {"matchLabels": selector(gateway)},
        "template": {
            "metadata": {
                "labels": _labels(gateway, pod.extra_labels if pod else None),
                "annotations": {**_annotations(gateway, pod.extra_annotations if pod else None),
                                BOOTSTRAP_HASH: bootstrap_hash},
            },
            "spec": pod_spec,
        },
    }
    # Unset replicas are not applied, so an autoscaler may own the field.
    if kube.deployment and kube.deployment.replicas is not None:
        spec["replicas"] = kube.deployment.replicas
    if kube.deployment and kube.deployment.strategy:
        spec["strategy"] = kube.deployment.strategy
    return overlays.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _metadata(gateway), "spec": spec},
                          kube.deployment_overlay)


def _pod_extras(pod: PodTemplate, container: dict[str, Any], pod_spec: dict[str, Any]) -> None:
    """Probes, graceful shutdown and extra volumes of `podTemplate`."""
    for attr, key in (("startup_probe", "startupProbe"), ("readiness_probe", "readinessProbe"),
                      ("liveness_probe", "livenessProbe")):
        probe = getattr(pod, attr)
        if probe is not None:
            container[key] = dict(probe)
    pod_spec["volumes"] += [dict(v) for v in pod.extra_volumes]
    grace = pod.graceful_shutdown
    if grace is not None and grace.enabled:
        # The Pod leaves its Service's endpoints as soon as it terminates; Envoy keeps
        # serving what is in flight (and what load balancers still send) for the sleep.
        sleep = grace.sleep_time_seconds or 0
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": sleep}}}
        pod_spec["terminationGracePeriodSeconds"] = max(pod_spec.get("terminationGracePeriodSeconds", 30),
                                                        sleep + 5)


def proxy_objects(gateway: Gateway, params: GatewayParameters | None, ports: tuple[int, ...],
                  ctx: ProxyContext, udp_ports: tuple[int, ...] = (),
                  ai: AIConfig | None = None, mcp: MCPConfig | None = None) -> list[dict[str, Any]]:
    """Everything one Gateway's proxy consists of, in the order to create it. `ai`: the
    AI extension's config when the Gateway's routes use an AI Backend; `mcp`: the MCP
    relay's when they use an MCP Backend."""
    metrics = params.spec.kube.stats if params else None
    cm = config_map(gateway, ctx, params)
    stats.add_to_config_map(cm, BOOTSTRAP_FILE, metrics, "lychgate_admin")
    digest = hashlib.sha256(json.dumps(cm["data"], sort_keys=True).encode()).hexdigest()[:16]
    with_ai = ai_container.wanted(params, ai)
    proxy = deployment(gateway, params, ports, ctx, digest, udp_ports, ai_extension=with_ai, mcp_relay=mcp is not None)
    if mcp is not None:  # after the digest: a new target reaches the relay without rolling the Pods
        mcp_container.add_config(cm, mcp)
    stats.expose(proxy, metrics)
    return [
        service_account(gateway, params),
        cm,
        # Before the Deployment: its Pods wait for the Secret they mount.
        *([ai_container.secret({**_metadata(gateway), "name": ai_container.secret_name(gateway.name)},
                               ai or AIConfig())] if with_ai else []),
        service(gateway, params, ports, udp_ports),
        *(overlays.optional_objects(params.spec.kube, _metadata(gateway), selector(gateway)) if params else []),
        proxy,  # last: see KubeDeployer._reconcile
    ]
