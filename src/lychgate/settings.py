"""Control-plane settings: one model read from flags and `LYCHGATE_*` variables.

Every knob the Helm chart sets reaches the controller through an environment
variable named `LYCHGATE_<FIELD>` (upper case); the CLI flags of `lychgate run`
and `lychgate controller` override the same fields. Structured values
(`policy_merge`, `discovery_namespace_selectors`, `gateway_class_parameters_refs`)
are JSON in the environment, which is how pydantic-settings reads complex fields.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from lychgate import __version__

LogLevel = Literal["trace", "debug", "info", "warn", "error", "critical", "off"]


class ValidationLevel(enum.StrEnum):
    """Spec §7: what the proxy is allowed to see when input is invalid."""

    STANDARD = "standard"
    STRICT = "strict"


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "lychgate"


class Settings(BaseSettings):
    """All control-plane options. Field docs double as `--help` text."""

    model_config = SettingsConfigDict(
        env_prefix="LYCHGATE_", extra="forbid", validate_default=True
    )

    log_level: str = Field("info", description="Control-plane log level (all components).")
    xds_address: str = Field("127.0.0.1:9977", description="Main xDS gRPC server address.")
    agentgateway_xds_address: str = Field(
        "127.0.0.1:9978", description="Agent-gateway xDS gRPC server address."
    )
    admin_address: str = Field(
        "127.0.0.1:9095", description="Admin/debug server address (loopback by default)."
    )
    metrics_address: str = Field("127.0.0.1:9092", description="Prometheus metrics address.")
    health_address: str = Field("127.0.0.1:9093", description="Health probe address.")
    state_dir: Path = Field(
        default_factory=default_state_dir,
        description="Where local mode keeps proxy bootstraps, logs and allocated addresses.",
    )
    local_address_base: str = Field(
        "127.0.1.1",
        description="Local mode: the first loopback address handed to a Gateway's proxy "
        "(later Gateways get the next ones). Change it to run two lychgates side by side.",
    )
    namespace: str = Field("lychgate-system", description="Installation namespace.")
    validation_level: ValidationLevel = Field(
        ValidationLevel.STANDARD, description="standard or strict (case-insensitive)."
    )
    route_scope_threshold: int = Field(
        2000, description="Split an HTTP route table with this many routes (on 16 hosts or more) into "
        "scopes, so a change re-sends one small table (0: never; strict validation never splits).")
    native_scope_key: bool | None = Field(
        None, description="Key the scopes of a split route table with lychgate's Envoy module "
        "(liblychgate_scope.so, one pass over the Host) instead of CEL regexes (one per key bit). "
        "Unset: local mode uses the module when `make install` built it; Kubernetes mode only when "
        "set (Helm proxy.nativeScopeKey: the proxy image carries the module).")
    xds_tls_enabled: bool = Field(False, description="Serve xDS over TLS.")
    xds_tls_dir: Path = Field(
        Path("/etc/lychgate/xds-tls"),
        description="Directory holding tls.crt, tls.key and ca.crt for xDS TLS.",
    )
    xds_tls_require_client_cert: bool = Field(
        False, description="With xDS TLS: proxies must present a certificate signed by ca.crt."
    )
    global_policy_namespace: str | None = Field(
        None, description="Where TrafficPolicies live whose targetSelectors select routes and Gateways in "
        "every namespace (kgateway's globalPolicyNamespace). Unset: the installation namespace; \"\": none.")
    policy_merge: dict[str, Any] = Field(
        default_factory=dict,
        description='Policy merge settings, e.g. {"trafficPolicy": {"extProc": "DeepMerge"}}.',
    )
    discovery_namespace_selectors: list[dict[str, Any]] = Field(
        default_factory=list, description="Namespace label selectors (OR-ed); empty means all."
    )
    gateway_class_parameters_refs: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="GatewayClass name -> {name, namespace} of its GatewayParameters.",
    )
    gcp_metadata_server: str = Field(
        "metadata.google.internal:80",
        description="HOST:PORT of the GCE metadata server proxies ask for the identity tokens of GCP Backends "
        "(the default is what GCE and GKE answer; point it at another metadata endpoint elsewhere).")
    waypoint_enabled: bool = Field(False, description="Serve the lychgate-waypoint class.")
    inference_extension_enabled: bool = Field(False, description="Serve InferencePool backends.")
    agentgateway_enabled: bool = Field(False, description="Agent gateway integration.")
    leader_election: bool = Field(True, description="Kubernetes mode: elect one writer.")
    proxy_image: str = Field(
        "ghcr.io/lychgate/envoy:1.40.0", description="Default image of the Envoy proxies."
    )
    ai_extension_image: str = Field(
        f"ghcr.io/lychgate/lychgate:{__version__}",
        description="Default image of the AI extension in proxy Pods: lychgate's own (the chart "
        "passes the controller's).",
    )
    # --- Kubernetes mode (`lychgate controller`) -------------------------------------------
    kubeconfig: Path | None = Field(
        None,
        description="Kubeconfig file; unset: in-cluster service account, then $KUBECONFIG, "
        "then ~/.kube/config.",
    )
    xds_service_name: str = Field(
        "lychgate",
        description="The controller's Service; proxies dial <name>.<namespace>.svc (the chart's full name).",
    )
    xds_service_port: int = Field(
        9977, ge=1, le=65535, description="The xDS port of that Service, as proxies dial it."
    )
    leader_election_lease_name: str = Field(
        "lychgate", description="Name of the coordination.k8s.io Lease in the install namespace."
    )
    leader_election_identity: str = Field(
        "", description="This replica's name in the Lease; empty: host name plus a random suffix."
    )
    leader_election_lease_duration: float = Field(
        15.0, gt=0, description="Seconds a Lease is valid without renewal before another replica takes it."
    )
    leader_election_renew_deadline: float = Field(
        10.0, gt=0, description="Seconds the leader keeps writing without a successful renewal."
    )
    leader_election_retry_period: float = Field(
        2.0, gt=0, description="Seconds between attempts to acquire or renew the Lease."
    )

    @field_validator("validation_level", mode="before")
    @classmethod
    def _case_insensitive_level(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_log_level(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("gcp_metadata_server")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, port = split_host_port(value)
        if not 1 <= port <= 65535 or any(c.isspace() for c in host):
            raise ValueError(f"{value!r} is not HOST:PORT")
        return value

    @field_validator("gateway_class_parameters_refs")
    @classmethod
    def _refs_complete(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for klass, ref in value.items():
            missing = [k for k in ("name", "namespace") if not ref.get(k)]
            if missing:
                raise ValueError(
                    f"gatewayClassParametersRefs.{klass}: missing {' and '.join(missing)}"
                )
        return value


def split_host_port(address: str) -> tuple[str, int]:
    """'127.0.0.1:9977' -> ('127.0.0.1', 9977); '[::1]:9977' works too."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address {address!r} is not HOST:PORT")
    return host.strip("[]"), int(port)
