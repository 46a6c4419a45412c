"""The `lychgate` command line."""

from __future__ import annotations

import asyncio
import json
import sys
import time
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
    )
    logsetup.setup(settings.log_level)
    from lychgate.local import run_local

    try:
        asyncio.run(run_local(directory, settings))
    except OSError as err:  # a port in use, missing TLS files: say it, no traceback
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


@app.command()
def version() -> None:
    """Print the lychgate version."""
    typer.echo(f"lychgate {__version__}")


def main() -> None:
    app()
