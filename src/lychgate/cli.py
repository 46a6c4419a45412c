"""The `lychgate` command line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from lychgate import __version__
from lychgate import log as logsetup
from lychgate.settings import Settings

app = typer.Typer(
    help="lychgate: a Gateway API control plane for Envoy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

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
    gcp_metadata_server: Annotated[str | None, typer.Option(
        help="HOST:PORT of the GCE metadata server for GCP Backends' identity tokens "
             "[default: metadata.google.internal:80].")] = None,
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
        gcp_metadata_server=gcp_metadata_server,
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
    gcp_metadata_server: Annotated[str | None, typer.Option(
        help="HOST:PORT of the GCE metadata server for GCP Backends' identity tokens "
             "(default: metadata.google.internal:80).")] = None,
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
            gcp_metadata_server=gcp_metadata_server, state_dir=state_dir,
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
    import httpx  # not at the top: with its CLI's rich and click, 7 MiB `lychgate run` would hold

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


@app.command()
def get(
    kind: Annotated[str, typer.Argument(help="gateways (gtw), httproutes, tlsroutes, listenersets (lset), ..., all, or errors.")],
    name: Annotated[str | None, typer.Argument(help="Only this object.")] = None,
    namespace: Annotated[str, typer.Option("-n", "--namespace")] = "default",
    all_namespaces: Annotated[bool, typer.Option("-A", "--all-namespaces")] = False,
    output: Annotated[str | None, typer.Option("-o", "--output", help="yaml or json.")] = None,
    admin_address: AdminOpt = "127.0.0.1:9095",
) -> None:
    """Show objects and their status from the running control plane, kubectl-style
    (every kind it reads, by kubectl's plural, singular or short name; `all`; `errors`)."""
    from lychgate import cli_get  # rich and every kind's columns: not for the other commands

    cli_get.show(lambda path, **params: _fetch(admin_address, path, **params), kind, name, namespace,
                 all_namespaces, output)


@app.command()
def logs(
    gateway: Annotated[str, typer.Argument(help="Gateway name.")],
    namespace: Annotated[str, typer.Option("-n", "--namespace")] = "default",
    follow: Annotated[bool, typer.Option("-f", "--follow")] = False,
    state_dir: Annotated[Path | None, typer.Option(envvar="LYCHGATE_STATE_DIR")] = None,
    access: Annotated[bool, typer.Option("--access", help="The requests (file access logs a ListenerPolicy "
                                                          "asks for) instead of Envoy's own log.")] = False,
    admin_address: AdminOpt = "127.0.0.1:9095",
) -> None:
    """Print the Envoy log of a Gateway's proxy, or its access log (local mode)."""
    if access:
        _access_logs(admin_address, gateway, namespace, follow)
        return
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


def _access_logs(admin: str, gateway: str, namespace: str, follow: bool) -> None:
    import httpx  # see _fetch

    from lychgate import access_log_files

    proxy = {p["gateway"]: p for p in _fetch(admin, "/api/v1/proxies")["items"]}.get(f"{namespace}/{gateway}")
    if proxy is None or not proxy.get("admin"):
        typer.echo(f"error: Gateway {namespace}/{gateway} has no running proxy; see `lychgate get gateways`", err=True)
        raise typer.Exit(1)
    try:
        paths = access_log_files.proxy_paths(proxy["admin"])
    except httpx.HTTPError as err:
        typer.echo(f"error: cannot read the proxy's configuration at {proxy['admin']}: {err}", err=True)
        raise typer.Exit(1) from None
    if not paths:
        typer.echo(f"error: Gateway {namespace}/{gateway} writes no access log file; attach a ListenerPolicy "
                   "with httpSettings.accessLog[].fileSink (docs/observability.md)", err=True)
        raise typer.Exit(1)
    envoy_log = Path(proxy.get("log", ""))
    for line in access_log_files.read(paths, envoy_log):
        typer.echo(line)
    if follow:
        with contextlib.suppress(KeyboardInterrupt):
            for line in access_log_files.follow(paths, envoy_log):
                typer.echo(line)


@app.command()
def echo(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 3000,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    pod: Annotated[str, typer.Option(help="Pod name to report.")] = "echo",
    llm: Annotated[bool, typer.Option("--llm", help="Answer OpenAI chat completions instead (an LLM to try "
                                                    "the AI gateway with: docs/ai.md).")] = False,
    key: Annotated[str, typer.Option(help="With --llm: the API key it accepts.")] = "sk-echo",
) -> None:
    """Run a small echo backend that answers with JSON describing each request."""
    from lychgate.echo import run_echo

    if llm:
        from aiohttp import web

        from lychgate.echo_llm import llm_app

        web.run_app(llm_app(key), host=host, port=port, print=None)
        return
    run_echo(host, port, pod=pod)


# Options of the processes beside Envoy (`ai-extension`, `mcp-relay`).
MetricsAddressOpt = Annotated[str | None, typer.Option(
    help="Address the metrics bind (in a Pod: 0.0.0.0, for scrapers); default: the host of --listen.")]
HelperLogLevelOpt = Annotated[str, typer.Option(help="debug, info, warning or error.")]


def _helper_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@app.command("ai-extension")
def ai_extension(
    config: Annotated[Path, typer.Option(help="The AI config file the control plane writes (watched).")],
    listen: Annotated[str, typer.Option(help="Address:port of the ext_proc server Envoy calls.")] = "127.0.0.1:9097",
    metrics_port: Annotated[int, typer.Option(help="Port of the Prometheus metrics (token counts); 0: none.")] = 0,
    metrics_address: MetricsAddressOpt = None,
    log_level: HelperLogLevelOpt = "info",
) -> None:
    """Run the AI extension: the ext_proc server beside Envoy that speaks to LLM providers
    (`lychgate run` starts it by itself; in Kubernetes it is a container of the proxy's pod)."""
    from lychgate.ai.extension import serve
    _helper_logging(log_level)
    if metrics_port:
        from prometheus_client import start_http_server

        from lychgate.ai.metrics import REGISTRY

        start_http_server(metrics_port, addr=metrics_address or listen.rpartition(":")[0] or "127.0.0.1",
                          registry=REGISTRY)
    asyncio.run(serve(listen, config))


@app.command("mcp-relay")
def mcp_relay(
    config: Annotated[Path, typer.Option(help="The MCP config file the control plane writes (watched).")],
    listen: Annotated[str, typer.Option(help="Address:port Envoy's MCP routes reach.")] = "127.0.0.1:9978",
    metrics_port: Annotated[int, typer.Option(help="Port of the Prometheus metrics (tool calls); 0: none.")] = 0,
    metrics_address: MetricsAddressOpt = None,
    log_level: HelperLogLevelOpt = "info",
) -> None:
    """Run the MCP relay: the upstream of MCP routes that serves each MCP Backend's targets as
    one MCP server (`lychgate run` starts it by itself; in Kubernetes it is a container of the
    proxy's pod)."""
    from lychgate.mcp.relay import serve

    _helper_logging(log_level)
    asyncio.run(serve(listen, config, metrics_port or None, metrics_host=metrics_address))


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
    import httpx  # see _fetch

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
def convert(
    paths: Annotated[list[str], typer.Argument(help="kgateway manifests: files, directories (their YAML files, "
                                                     "recursively) or - for standard input.")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here, mirroring the inputs "
                                                                       "(default: standard output).")] = None,
) -> None:
    """Rewrite kgateway manifests as lychgate manifests; say on stderr what does not carry over.

    Exits 0 when every input was converted (the notes are information), 1 when an input
    cannot be read or is not YAML (the others are still converted)."""
    from lychgate import convert as conv

    sources: list[tuple[str, str, Path]] = []  # (name shown, text, path under --output)
    failed = False
    for arg in paths:
        if arg == "-":
            sources.append(("-", sys.stdin.read(), Path("stdin.yaml")))
            continue
        if not Path(arg).exists():
            typer.echo(f"error: {arg} does not exist", err=True)
            failed = True
            continue
        for file, rel in conv.inputs(Path(arg)):
            try:
                sources.append((str(file), file.read_text(), rel))
            except (OSError, UnicodeDecodeError) as err:
                typer.echo(f"error: {file}: cannot read it ({err})", err=True)
                failed = True
    renamed: set[str] = set()
    for _, text, _ in sources:
        with contextlib.suppress(conv.YAMLError):
            renamed |= conv.class_parameters(text)
    written: list[str] = []
    for name, text, rel in sources:
        try:
            result = conv.convert_text(text, name, renamed)
        except (conv.YAMLError, ValueError) as err:  # not YAML, or a value not where the parser put it
            typer.echo(f"error: {name}: cannot convert it ({str(err).splitlines()[0]}); not converted", err=True)
            failed = True
            continue
        for note in result.notes:
            typer.echo(str(note), err=True)
        if output is None:
            written.append(result.text)
        else:
            target = output / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(result.text)
    if output is None:
        sys.stdout.write("---\n".join(t if t.endswith("\n") else t + "\n" for t in written))
    if failed:
        raise typer.Exit(1)


ValidationOpt = Annotated[str | None, typer.Option(
    "--validation", help="standard, or strict: also ask Envoy (envoy --mode validate) what it would reject, "
                         "as `lychgate run --validation-level strict` does [default: standard].")]
FromKgatewayOpt = Annotated[bool, typer.Option(
    "--from-kgateway", help="The inputs are kgateway manifests: convert them first (`lychgate convert`).")]
PathsArg = Annotated[list[str], typer.Argument(help="Manifests: files, directories (their YAML files, "
                                                    "recursively) or - for standard input.")]
StateDirOpt = Annotated[Path | None, typer.Option(
    help="`lychgate run`'s state directory: Gateways get the addresses they have there (read, never written).")]


def _evaluate(paths: list[str], from_kgateway: bool, validation: str | None, policy_merge: str | None,
              waypoint: bool | None, inference_extension: bool | None, state_dir: Path | None) -> Any:
    """Load and translate the manifests as `lychgate run` would, with nothing running."""
    from lychgate import offline

    settings = _settings(validation_level=validation, policy_merge=_json_option("--policy-merge", policy_merge),
                         waypoint_enabled=waypoint, inference_extension_enabled=inference_extension,
                         state_dir=state_dir)
    logging.disable(logging.CRITICAL)  # what goes wrong is the report, not log lines
    try:
        items = offline.inputs(paths)
        notes: list[Any] = []
        if from_kgateway:
            items, notes = offline.from_kgateway(items)
        return asyncio.run(offline.evaluate(items, settings, notes))
    except offline.UsageError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    finally:
        logging.disable(logging.NOTSET)


PolicyMergeOpt = Annotated[str | None, typer.Option(help="policyMerge as JSON, as for `lychgate run`.")]
WaypointOpt = Annotated[bool | None, typer.Option("--waypoint/--no-waypoint", help="As for `lychgate run`.")]
InferenceOpt = Annotated[bool | None, typer.Option("--inference-extension/--no-inference-extension",
                                                   help="As for `lychgate run`.")]


@app.command()
def check(
    paths: PathsArg,
    output: Annotated[str, typer.Option("-o", "--output", help="text, json, or github (workflow annotations).")] = "text",
    status: Annotated[bool, typer.Option("--status", help="Text: also print every object's conditions.")] = False,
    from_kgateway: FromKgatewayOpt = False,
    validation: ValidationOpt = None,
    policy_merge: PolicyMergeOpt = None,
    waypoint: WaypointOpt = None,
    inference_extension: InferenceOpt = None,
    state_dir: StateDirOpt = None,
) -> None:
    """Check manifests offline with the control plane's own loader, translation and status:
    every problem as file:line: Kind ns/name: field: message.

    Exits 0 when clean (warnings allowed), 1 when any object would be refused or any route
    would answer 500, 2 on usage errors."""
    from lychgate import check as checking

    if output not in ("text", "json", "github"):
        typer.echo(f"error: -o {output}: use text, json or github", err=True)
        raise typer.Exit(2)
    ev = _evaluate(paths, from_kgateway, validation, policy_merge, waypoint, inference_extension, state_dir)
    rep = checking.report(ev, lines_of_objects=output == "json" or status)
    if output == "json":
        typer.echo(checking.render_json(rep))
    elif output == "github":
        shown = checking.render_github(rep)
        if shown:
            typer.echo(shown)
        typer.echo(checking.render_text(rep, False).splitlines()[-1], err=True)
    else:
        typer.echo(checking.render_text(rep, status))
    if rep.errors:
        raise typer.Exit(1)


@app.command()
def translate(
    paths: PathsArg,
    gateway: Annotated[str | None, typer.Option(help="Only this Gateway: namespace/name (a bare name: default).")] = None,
    type_: Annotated[str, typer.Option("--type", help="lds, rds, cds, eds or all.")] = "all",
    output: Annotated[str, typer.Option("-o", "--output", help="yaml or json.")] = "yaml",
    from_kgateway: FromKgatewayOpt = False,
    validation: ValidationOpt = None,
    policy_merge: PolicyMergeOpt = None,
    waypoint: WaypointOpt = None,
    inference_extension: InferenceOpt = None,
    state_dir: StateDirOpt = None,
) -> None:
    """Print the xDS resources each Gateway's proxy would receive from `lychgate run`, as
    Envoy's /config_dump shows them: diff two commits' output to review a change."""
    from lychgate import offline
    from lychgate import translate_cmd as xds_out

    if output not in ("yaml", "json") or (type_ != "all" and type_ not in xds_out.KINDS):
        typer.echo(f"error: -o {output} --type {type_}: use -o yaml|json, --type lds|rds|cds|eds|all", err=True)
        raise typer.Exit(2)
    ev = _evaluate(paths, from_kgateway, validation, policy_merge, waypoint, inference_extension, state_dir)
    try:
        documents = xds_out.select(ev, gateway, type_)
    except offline.UsageError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(xds_out.render(documents, output), nl=output == "json")


@app.command()
def version() -> None:
    """Print the lychgate version."""
    typer.echo(f"lychgate {__version__}")


def main() -> None:
    app()
