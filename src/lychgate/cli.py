"""The `lychgate` command line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from lychgate import __version__
from lychgate import log as logsetup
from lychgate.settings import Settings

app = typer.Typer(
    help="lychgate: a Gateway API control plane for Envoy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# kubectl-style names for kinds: plural, singular and short forms.
KIND_ALIASES: dict[str, str] = {}
for _kind, _names in {
    "Gateway": ("gateways", "gateway", "gtw", "gw"),
    "GatewayClass": ("gatewayclasses", "gatewayclass", "gc"),
    "HTTPRoute": ("httproutes", "httproute"),
    "ReferenceGrant": ("referencegrants", "referencegrant", "refgrant"),
    "GatewayParameters": ("gatewayparameters", "gatewayparameter", "gwp"),
    "Service": ("services", "service", "svc"),
    "EndpointSlice": ("endpointslices", "endpointslice"),
    "Namespace": ("namespaces", "namespace", "ns"),
    "Secret": ("secrets", "secret"),
    "TrafficPolicy": ("trafficpolicies", "trafficpolicy", "tp"),
    "GatewayExtension": ("gatewayextensions", "gatewayextension", "gwe"),
    "BackendConfigPolicy": ("backendconfigpolicies", "backendconfigpolicy", "bcp"),
    "Backend": ("backends", "backend"),
    "DirectResponse": ("directresponses", "directresponse"),
}.items():
    for _n in _names:
        KIND_ALIASES[_n] = _kind
CLUSTER_SCOPED = {"GatewayClass", "Namespace"}

AdminOpt = Annotated[
    str, typer.Option("--admin-address", envvar="LYCHGATE_ADMIN_ADDRESS", help="Admin server of the running control plane.")
]


def _settings(**overrides: Any) -> Settings:
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as err:
        for e in err.errors(include_url=False):
            typer.echo(f"error: {'.'.join(str(p) for p in e['loc'])}: {e['msg']}", err=True)
        raise typer.Exit(2) from None


@app.command()
def run(
    directory: Annotated[Path, typer.Argument(help="Directory (or file) of YAML manifests to serve.")],
    xds_address: Annotated[str | None, typer.Option(help="xDS server address [default: 127.0.0.1:9977].")] = None,
    admin_address: Annotated[str | None, typer.Option(help="Admin server address [default: 127.0.0.1:9095].")] = None,
    metrics_address: Annotated[str | None, typer.Option(help="Metrics address [default: 127.0.0.1:9092].")] = None,
    health_address: Annotated[str | None, typer.Option(help="Health probe address [default: 127.0.0.1:9093].")] = None,
    state_dir: Annotated[Path | None, typer.Option(help="Where proxy bootstraps, logs and address allocations live.")] = None,
    log_level: Annotated[str | None, typer.Option(help="Control-plane log level.")] = None,
    validation_level: Annotated[str | None, typer.Option(help="standard or strict.")] = None,
    xds_tls: Annotated[bool | None, typer.Option("--xds-tls/--no-xds-tls", help="Serve xDS over TLS.")] = None,
    xds_tls_dir: Annotated[Path | None, typer.Option(help="Directory with tls.crt, tls.key and ca.crt.")] = None,
    xds_tls_require_client_cert: Annotated[bool | None, typer.Option(help="Proxies must present a client certificate.")] = None,
    policy_merge: Annotated[str | None, typer.Option(
        help='policyMerge as JSON, e.g. \'{"trafficPolicy": {"extAuth": "DeepMerge"}}\'.')] = None,
    waypoint: Annotated[bool | None, typer.Option(
        "--waypoint/--no-waypoint", help="Serve the lychgate-waypoint class (ambient mesh waypoints).")] = None,
    inference_extension: Annotated[bool | None, typer.Option(
        "--inference-extension/--no-inference-extension", help="Serve InferencePool backends.")] = None,
) -> None:
    """Serve the manifests in DIRECTORY through local Envoy proxies, live."""
    if not directory.exists():
        typer.echo(f"error: {directory} does not exist", err=True)
        raise typer.Exit(2)
    settings = _settings(
        xds_address=xds_address, admin_address=admin_address, metrics_address=metrics_address,
        health_address=health_address, state_dir=state_dir, log_level=log_level,
        validation_level=validation_level, xds_tls_enabled=xds_tls, xds_tls_dir=xds_tls_dir,
        xds_tls_require_client_cert=xds_tls_require_client_cert,
        policy_merge=_json_option("--policy-merge", policy_merge),
        waypoint_enabled=waypoint, inference_extension_enabled=inference_extension,
    )
    logsetup.setup(settings.log_level)
    from lychgate.local import run_local

    try:
        asyncio.run(run_local(directory, settings))
    except OSError as err:  # a port in use, missing TLS files: say it, no traceback
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None


def _json_option(flag: str, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError as err:
        typer.echo(f"error: {flag}: not valid JSON ({err})", err=True)
        raise typer.Exit(2) from None


@app.command()
def controller(
    kubeconfig: Annotated[Path | None, typer.Option(help="Kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config).")] = None,
    namespace: Annotated[str | None, typer.Option(help="Installation namespace (Lease, xDS Service) (default: lychgate-system).")] = None,
    xds_address: Annotated[str | None, typer.Option(help="xDS server address (default: 127.0.0.1:9977; the chart sets 0.0.0.0:9977).")] = None,
    xds_service_name: Annotated[str | None, typer.Option(help="The controller's Service proxies dial: <name>.<namespace>.svc (default: lychgate).")] = None,
    xds_service_port: Annotated[int | None, typer.Option(help="Its xDS port (default: 9977).")] = None,
    admin_address: Annotated[str | None, typer.Option(help="Admin server address (default: 127.0.0.1:9095).")] = None,
    metrics_address: Annotated[str | None, typer.Option(help="Metrics address (default: 127.0.0.1:9092).")] = None,
    health_address: Annotated[str | None, typer.Option(help="Health probe address (default: 127.0.0.1:9093).")] = None,
    log_level: Annotated[str | None, typer.Option(help="Control-plane log level.")] = None,
    validation_level: Annotated[str | None, typer.Option(help="standard or strict.")] = None,
    xds_tls: Annotated[bool | None, typer.Option("--xds-tls/--no-xds-tls", help="Serve xDS over TLS.")] = None,
    xds_tls_dir: Annotated[Path | None, typer.Option(help="Directory with tls.crt, tls.key and ca.crt.")] = None,
    policy_merge: Annotated[str | None, typer.Option(help='JSON, e.g. \'{"trafficPolicy": {"extProc": "DeepMerge"}}\'.')] = None,
    discovery_namespace_selectors: Annotated[str | None, typer.Option(help='JSON list of label selectors (OR-ed), e.g. \'[{"matchLabels": {"team": "edge"}}]\'.')] = None,
    gateway_class_parameters_refs: Annotated[str | None, typer.Option(help='JSON map: class -> {"name", "namespace"} of its GatewayParameters.')] = None,
    waypoint: Annotated[bool | None, typer.Option("--waypoint/--no-waypoint", help="Serve the lychgate-waypoint class.")] = None,
    inference_extension: Annotated[bool | None, typer.Option("--inference-extension/--no-inference-extension", help="Serve InferencePool backends.")] = None,
    agentgateway: Annotated[bool | None, typer.Option("--agentgateway/--no-agentgateway", help="Agent gateway integration.")] = None,
    leader_election: Annotated[bool | None, typer.Option("--leader-election/--no-leader-election", help="Elect one writer among replicas.")] = None,
    leader_election_lease_name: Annotated[str | None, typer.Option(help="Lease name (default: lychgate).")] = None,
    proxy_image: Annotated[str | None, typer.Option(help="Default Envoy image of the proxies.")] = None,
    state_dir: Annotated[Path | None, typer.Option(help="Scratch space (strict validation).")] = None,
) -> None:
    """Run the control plane in Kubernetes: watch the API server, write status, deploy proxies.

    Every option also reads LYCHGATE_<OPTION> (e.g. LYCHGATE_NAMESPACE), which is how
    the Helm chart configures it.
    """
    from pydantic_settings import SettingsError

    try:
        settings = _settings(
            kubeconfig=kubeconfig, namespace=namespace, xds_address=xds_address,
            xds_service_name=xds_service_name, xds_service_port=xds_service_port,
            admin_address=admin_address, metrics_address=metrics_address, health_address=health_address,
            log_level=log_level, validation_level=validation_level, xds_tls_enabled=xds_tls,
            xds_tls_dir=xds_tls_dir, policy_merge=_json_option("--policy-merge", policy_merge),
            discovery_namespace_selectors=_json_option(
                "--discovery-namespace-selectors", discovery_namespace_selectors),
            gateway_class_parameters_refs=_json_option(
                "--gateway-class-parameters-refs", gateway_class_parameters_refs),
            waypoint_enabled=waypoint, inference_extension_enabled=inference_extension,
            agentgateway_enabled=agentgateway, leader_election=leader_election,
            leader_election_lease_name=leader_election_lease_name, proxy_image=proxy_image,
            state_dir=state_dir,
        )
    except SettingsError as err:  # e.g. a LYCHGATE_* variable holding invalid JSON
        import re

        field = re.search(r'field "(\w+)"', str(err))
        where = f"LYCHGATE_{field.group(1).upper()}: " if field else ""
        cause = f" ({err.__cause__})" if err.__cause__ else ""
        typer.echo(f"error: {where}cannot read the value{cause}; structured settings are JSON", err=True)
        raise typer.Exit(2) from None
    logsetup.setup(settings.log_level)
    from lightkube import ConfigError

    from lychgate.kube_main import run_controller

    try:
        asyncio.run(run_controller(settings))
    except ValueError as err:  # settings the controller cannot run with
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    except (OSError, ConfigError) as err:  # no kubeconfig, a port in use, missing TLS files
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None


def _fetch(admin: str, path: str, **params: str) -> dict[str, Any]:
    url = f"http://{admin}{path}"
    try:
        resp = httpx.get(url, params=params, timeout=10)
    except httpx.HTTPError as err:
        typer.echo(f"error: cannot reach the control plane at {admin} ({err}); is `lychgate run` running?", err=True)
        raise typer.Exit(1) from None
    body: dict[str, Any] = resp.json()
    if resp.status_code >= 400:
        typer.echo(f"error: {body.get('error', resp.text)}", err=True)
        raise typer.Exit(1)
    return body


def _age(obj: dict[str, Any]) -> str:
    created = obj.get("metadata", {}).get("creationTimestamp")
    if not created:
        return "?"
    seconds = int((datetime.now(UTC) - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _cond(status: dict[str, Any], type_: str) -> str:
    for c in status.get("conditions", []):
        if c["type"] == type_:
            return c["status"] if c["status"] == "True" else f"False ({c['reason']})"
    return "Unknown"


def _columns(kind: str, obj: dict[str, Any], proxies: dict[str, dict[str, Any]]) -> dict[str, str]:
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    meta = obj["metadata"]
    if kind == "Gateway":
        proxy = proxies.get(f"{meta['namespace']}/{meta['name']}", {})
        addresses = ",".join(a["value"] for a in status.get("addresses", []))
        return {"CLASS": spec.get("gatewayClassName", ""), "ADDRESS": addresses,
                "PORTS": ",".join(str(l["port"]) for l in spec.get("listeners", [])),
                "PROGRAMMED": _cond(status, "Programmed"), "ADMIN": proxy.get("admin", "")}
    if kind == "HTTPRoute":
        parents = []
        for p in status.get("parents", []):
            ref = p["parentRef"]
            parents.append(f"{ref['name']}:{_cond(p, 'Accepted')}")
        return {"HOSTNAMES": ",".join(spec.get("hostnames", [])) or "*", "PARENTS": " ".join(parents)}
    if kind == "GatewayClass":
        return {"CONTROLLER": spec.get("controllerName", ""), "ACCEPTED": _cond(status, "Accepted")}
    if kind == "TrafficPolicy":
        targets = [f"{r['kind']}/{r['name']}" + (f":{r['sectionName']}" if r.get("sectionName") else "")
                   for r in spec.get("targetRefs", [])]
        targets += [f"{s['kind']}{{{','.join(f'{k}={v}' for k, v in (s.get('matchLabels') or {}).items())}}}"
                    for s in spec.get("targetSelectors", [])]
        return {"ACCEPTED": _cond(status, "Accepted"), "APPLIED": _cond(status, "Applied"),
                "TARGETS": " ".join(targets)}
    if kind == "BackendConfigPolicy":
        ancestor = (status.get("ancestors") or [{}])[0]
        targets = [f"{r['kind']}/{r['name']}" + (f":{r['sectionName']}" if r.get("sectionName") else "")
                   for r in spec.get("targetRefs", [])]
        return {"ACCEPTED": _cond(ancestor, "Accepted"), "ATTACHED": _cond(ancestor, "Attached"),
                "TARGETS": " ".join(targets)}
    if kind == "Backend":
        kinds = [k for k in ("static", "dynamicForwardProxy", "aws") if spec.get(k)]
        return {"TYPE": spec.get("type") or ",".join(kinds), "ACCEPTED": _cond(status, "Accepted")}
    if kind == "DirectResponse":
        return {"STATUS": str(spec.get("status", ""))}
    if kind == "GatewayExtension":
        kinds = [k for k in ("extAuth", "extProc", "rateLimit", "jwtProviders") if spec.get(k)]
        return {"TYPE": spec.get("type") or ",".join(kinds), "ACCEPTED": _cond(status, "Accepted"),
                "RESOLVED": _cond(status, "ResolvedRefs")}
    return {}


@app.command()
def get(
    kind: Annotated[str, typer.Argument(help="gateways, httproutes, gatewayclasses, ..., or errors.")],
    name: Annotated[str | None, typer.Argument(help="Only this object.")] = None,
    namespace: Annotated[str, typer.Option("-n", "--namespace")] = "default",
    all_namespaces: Annotated[bool, typer.Option("-A", "--all-namespaces")] = False,
    output: Annotated[str | None, typer.Option("-o", "--output", help="yaml or json.")] = None,
    admin_address: AdminOpt = "127.0.0.1:9095",
) -> None:
    """Show objects and their status from the running control plane, kubectl-style."""
    problems = _fetch(admin_address, "/api/v1/problems")["items"]
    if kind in ("errors", "error", "problems"):
        for p in problems:
            doc = f" (document {p['document']})" if p.get("document") else ""
            typer.echo(f"{p['file']}{doc}: {p['message']}")
        if not problems:
            typer.echo("no problems")
        return
    resolved = KIND_ALIASES.get(kind.lower())
    if resolved is None:
        typer.echo(f"error: unknown kind {kind!r}; try one of: {', '.join(sorted(set(KIND_ALIASES.values())))}, errors", err=True)
        raise typer.Exit(2)
    params = {"kind": resolved}
    if resolved not in CLUSTER_SCOPED and not all_namespaces:
        params["namespace"] = namespace
    if name:
        params["name"] = name
    items = _fetch(admin_address, "/api/v1/objects", **params)["items"]
    if name and not items:
        typer.echo(f'error: {resolved} "{name}" not found', err=True)
        raise typer.Exit(1)
    for p in problems:
        if p.get("object") and p["object"].split(" ", 1)[0] == resolved:
            typer.echo(f"warning: {p['file']}: {p['message']}", err=True)
    if output in ("json", "yaml"):
        shown: Any = items[0] if name else {"apiVersion": "v1", "kind": "List", "items": items}
        if output == "json":
            typer.echo(json.dumps(shown, indent=2))
        else:
            typer.echo(yaml.safe_dump(shown, sort_keys=False), nl=False)
        return
    if output not in (None, "wide"):
        typer.echo(f"error: unknown output format {output!r}; use yaml or json", err=True)
        raise typer.Exit(2)
    if not items:
        where = "" if resolved in CLUSTER_SCOPED else (" in any namespace" if all_namespaces else f" in {namespace} namespace")
        typer.echo(f"No resources found{where}.", err=True)
        return
    proxies = {p["gateway"]: p for p in _fetch(admin_address, "/api/v1/proxies")["items"]} if resolved == "Gateway" else {}
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    rows = []
    for obj in items:
        row = {}
        if all_namespaces and resolved not in CLUSTER_SCOPED:
            row["NAMESPACE"] = obj["metadata"].get("namespace", "")
        row["NAME"] = obj["metadata"]["name"]
        row.update(_columns(resolved, obj, proxies))
        row["AGE"] = _age(obj)
        rows.append(row)
    for col in rows[0]:
        table.add_column(col)
    for row in rows:
        table.add_row(*row.values())
    Console(width=200).print(table)


@app.command()
def logs(
    gateway: Annotated[str, typer.Argument(help="Gateway name.")],
    namespace: Annotated[str, typer.Option("-n", "--namespace")] = "default",
    follow: Annotated[bool, typer.Option("-f", "--follow")] = False,
    state_dir: Annotated[Path | None, typer.Option(envvar="LYCHGATE_STATE_DIR")] = None,
) -> None:
    """Print the Envoy log of a Gateway's proxy (local mode)."""
    settings = _settings(state_dir=state_dir)
    path = settings.state_dir / "proxies" / namespace / gateway / "envoy.log"
    if not path.exists():
        typer.echo(f"error: no log for Gateway {namespace}/{gateway} at {path}", err=True)
        raise typer.Exit(1)
    with path.open("rb") as f:
        sys.stdout.buffer.write(f.read())
        sys.stdout.flush()
        while follow:
            chunk = f.read()
            if chunk:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
            else:
                time.sleep(0.2)


@app.command()
def echo(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 3000,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    pod: Annotated[str, typer.Option(help="Pod name to report.")] = "echo",
) -> None:
    """Run a small echo backend that answers with JSON describing each request."""
    from lychgate.echo import run_echo

    run_echo(host, port, pod=pod)


proxy_app = typer.Typer(help="Envoy's admin interface of a Gateway's proxy (spec §4.2).", no_args_is_help=True)
app.add_typer(proxy_app, name="proxy")

KubeOpt = Annotated[bool, typer.Option("--kube", help="Reach the proxy in Kubernetes through `kubectl port-forward`.")]
NsOpt = Annotated[str, typer.Option("-n", "--namespace")]


@contextlib.contextmanager
def _proxy_admin(gateway: str, namespace: str, admin: str, kube: bool) -> Iterator[str]:
    """The base URL of a proxy's Envoy admin, locally or through a port-forward."""
    if not kube:
        proxies = {p["gateway"]: p for p in _fetch(admin, "/api/v1/proxies")["items"]}
        proxy = proxies.get(f"{namespace}/{gateway}")
        if proxy is None:
            typer.echo(f"error: Gateway {namespace}/{gateway} has no proxy; see `lychgate get gateways`", err=True)
            raise typer.Exit(1)
        yield f"http://{proxy['admin']}"
        return
    forward = subprocess.Popen(
        ["kubectl", "-n", namespace, "port-forward", f"deployment/{gateway}", ":19000"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()
        match = re.search(r"127\.0\.0\.1:(\d+)", line)
        if match is None:
            typer.echo(f"error: kubectl port-forward failed: {line.strip()}", err=True)
            raise typer.Exit(1)
        yield f"http://127.0.0.1:{match.group(1)}"
    finally:
        forward.terminate()


def _envoy_admin(base: str, method: str, path: str, **params: str) -> str:
    try:
        resp = httpx.request(method, base + path, params=params, timeout=10)
    except httpx.HTTPError as err:
        typer.echo(f"error: cannot reach the proxy's admin at {base}: {err}", err=True)
        raise typer.Exit(1) from None
    if resp.status_code >= 400:
        typer.echo(f"error: {resp.status_code} {resp.text.strip()}", err=True)
        raise typer.Exit(1)
    return resp.text


@proxy_app.command("config-dump")
def proxy_config_dump(
    gateway: str, namespace: NsOpt = "default", admin_address: AdminOpt = "127.0.0.1:9095", kube: KubeOpt = False,
    resource: Annotated[str | None, typer.Option(help="e.g. dynamic_route_configs, dynamic_active_clusters")] = None,
) -> None:
    """The configuration the proxy holds (Envoy /config_dump)."""
    with _proxy_admin(gateway, namespace, admin_address, kube) as base:
        typer.echo(_envoy_admin(base, "GET", "/config_dump", **({"resource": resource} if resource else {})))


@proxy_app.command("listeners")
def proxy_listeners(gateway: str, namespace: NsOpt = "default", admin_address: AdminOpt = "127.0.0.1:9095",
                    kube: KubeOpt = False) -> None:
    """The listeners configured on the proxy (Envoy /listeners)."""
    with _proxy_admin(gateway, namespace, admin_address, kube) as base:
        typer.echo(_envoy_admin(base, "GET", "/listeners"), nl=False)


@proxy_app.command("logging")
def proxy_logging(
    gateway: str, namespace: NsOpt = "default", admin_address: AdminOpt = "127.0.0.1:9095", kube: KubeOpt = False,
    level: Annotated[str | None, typer.Option(help="Set every logger to this level (e.g. debug).")] = None,
) -> None:
    """Log level of each proxy component; --level changes them at once (Envoy /logging)."""
    with _proxy_admin(gateway, namespace, admin_address, kube) as base:
        params = {"level": "warning" if level == "warn" else level} if level else {}
        typer.echo(_envoy_admin(base, "POST", "/logging", **params), nl=False)


@proxy_app.command("stats")
def proxy_stats(gateway: str, namespace: NsOpt = "default", admin_address: AdminOpt = "127.0.0.1:9095",
                kube: KubeOpt = False) -> None:
    """The proxy's metrics in Prometheus text format (Envoy /stats/prometheus)."""
    with _proxy_admin(gateway, namespace, admin_address, kube) as base:
        typer.echo(_envoy_admin(base, "GET", "/stats/prometheus"), nl=False)


@app.command()
def debug(
    gateway: Annotated[str | None, typer.Argument(help="Only this Gateway.")] = None,
    namespace: NsOpt = "default",
    output: Annotated[str | None, typer.Option("-o", "--output", help="json for scripts.")] = None,
    admin_address: AdminOpt = "127.0.0.1:9095",
) -> None:
    """Run the debug procedure (spec §4.5) and report what is wrong; exits 1 if anything is."""
    from lychgate import debug as procedure

    report = procedure.run(admin_address, gateway, namespace)
    if output == "json":
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        typer.echo(procedure.render(report))
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def version() -> None:
    """Print the lychgate version."""
    typer.echo(f"lychgate {__version__}")


def main() -> None:
    app()
