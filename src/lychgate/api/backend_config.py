"""BackendConfigPolicy (gateway.lychgate.dev/v1alpha1): how the gateway talks to a backend.

Field for field kgateway's `BackendConfigPolicy` (api/v1alpha1/kgateway/
backend_config_policy_types.go): connection settings, HTTP protocol options,
TLS origination, load balancing, active and passive health checking, circuit
breakers, DNS and the upstream PROXY protocol, for the Services (or Backends)
it targets. Shapes and ranges are checked here (and by the API server, through
the generated CRD); what the values mean together is checked by translation
(`translate/backend_config.py`), which reports problems on the policy's status.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, TypeVar

from pydantic import AfterValidator, Field, model_validator
from pydantic.json_schema import JsonDict

from lychgate.api.base import Duration, Model, Resource, renamed
from lychgate.api.gateway import BackendObjectReference
from lychgate.api.lychgate import GROUP, Quantity
from lychgate.api.policy import LocalPolicyTargetReference, LocalPolicyTargetSelector
from lychgate.api.rules import (
    CEL,
    at_least_one_of,
    at_most_one_of,
    duration_rules,
    exactly_one_of,
    field_rules,
)
from lychgate.api.rules import wire_name as field_name
from lychgate.api.status import PolicyStatus

CHECKS = "translate/backend_config.py"


class CircuitBreakers(Model):
    RULES = (at_least_one_of("max_connections", "max_pending_requests", "max_requests", "max_retries"),)

    max_connections: int | None = Field(None, ge=1)
    max_pending_requests: int | None = Field(None, ge=1)
    max_requests: int | None = Field(None, ge=1)
    max_retries: int | None = Field(None, ge=0)
    track_remaining: bool | None = None


class DNS(Model):
    RULES = (CEL("!(has(self.jitter) && has(self.refreshRate)) || duration(self.jitter) <= duration(self.refreshRate)",
                 "jitter must be less than or equal to refreshRate", CHECKS),)

    refresh_rate: Duration | None = Field(None, json_schema_extra=field_rules(
        *duration_rules(CHECKS, minimum="1ms", name="refreshRate")[1:]))
    jitter: Duration | None = None
    respect_ttl: bool | None = Field(None, alias="respectTTL")
    # kgateway's older names of refreshRate and jitter
    dns_refresh_rate: Duration | None = None
    dns_jitter: Duration | None = None

    @model_validator(mode="after")
    def _older_names(self) -> DNS:
        return renamed(renamed(self, "refresh_rate", "dns_refresh_rate"), "jitter", "dns_jitter")


class Http1ProtocolOptions(Model):
    enable_trailers: bool | None = None
    preserve_http1_header_case: bool | None = None
    override_stream_error_on_invalid_http_message: bool | None = None


class CommonHttpProtocolOptions(Model):
    idle_timeout: Duration | None = None
    max_connection_duration: Duration | None = None
    max_headers_count: int | None = Field(None, ge=0)
    max_stream_duration: Duration | None = None
    max_requests_per_connection: int | None = Field(None, ge=0)


class ConnectionKeepalive(Model):
    timeout: Duration
    interval: Duration | None = None
    connection_idle_interval: Duration | None = None


def _window_size(name: str) -> JsonDict:
    # kgateway's rule (backend_config_policy_types.go); quantity() is the API server's
    # quantity library (Kubernetes 1.29+). translate/backend_config.py checks the same bounds.
    return field_rules(CEL("(type(self) == int && int(self) >= 65535 && int(self) <= 2147483647) || "
                           "(type(self) == string && quantity(self).isGreaterThan(quantity('65534')) && "
                           "quantity(self).isLessThan(quantity('2147483648')))",
                           f"{name} must be between 65535 and 2147483647 bytes (inclusive)", CHECKS))


class Http2ProtocolOptions(Model):
    initial_stream_window_size: Quantity | None = Field(None, json_schema_extra=_window_size("InitialStreamWindowSize"))
    initial_connection_window_size: Quantity | None = Field(
        None, json_schema_extra=_window_size("InitialConnectionWindowSize"))
    max_concurrent_streams: int | None = Field(None, ge=1, le=2147483647)
    override_stream_error_on_invalid_http_message: bool | None = None
    connection_keepalive: ConnectionKeepalive | None = None


class TCPKeepalive(Model):
    keep_alive_probes: int | None = Field(None, ge=0)
    keep_alive_time: Duration | None = None
    keep_alive_interval: Duration | None = None


class SecretReference(Model):
    name: str = Field(min_length=1)


class TLSFiles(Model):
    RULES = (CEL("has(self.tlsCertificate) || has(self.tlsKey) || has(self.rootCA)",
                 "At least one of tlsCertificate, tlsKey, or rootCA must be set in TLSFiles", CHECKS),)

    tls_certificate: str | None = Field(None, min_length=1)
    tls_key: str | None = Field(None, min_length=1)
    root_ca: str | None = Field(None, alias="rootCA", min_length=1)


TLSVersion = Literal["AUTO", "1.0", "1.1", "1.2", "1.3"]


class TLSParameters(Model):
    min_version: TLSVersion | None = None
    max_version: TLSVersion | None = None
    cipher_suites: list[str] = Field(default_factory=list)
    ecdh_curves: list[str] = Field(default_factory=list)
    signature_algorithms: list[str] = Field(default_factory=list)


class TLS(Model):
    secret_ref: SecretReference | None = None
    files: TLSFiles | None = None
    well_known_ca_certificates: Literal["System"] | None = Field(None, alias="wellKnownCACertificates")
    insecure_skip_verify: bool | None = None
    sni: str | None = Field(None, min_length=1)
    verify_subject_alt_names: list[str] = Field(default_factory=list)
    parameters: TLSParameters | None = None
    alpn_protocols: list[str] = Field(default_factory=list)
    allow_renegotiation: bool | None = None
    simple_tls: bool | None = Field(None, alias="simpleTLS")

    @model_validator(mode="after")
    def _source(self) -> TLS:
        """At most one trust source, as kgateway; none means the system CAs (as
        `wellKnownCACertificates: System`), which need `sni` to check the certificate's
        name against. `insecureSkipVerify: false` is the same as leaving it out."""
        sources = ("secret_ref", "files", "insecure_skip_verify", "well_known_ca_certificates")
        given = [n for n in sources if getattr(self, n) not in (None, False)]
        if len(given) > 1:
            raise ValueError("at most one of " + ", ".join(field_name(TLS, n) for n in sources) + " may be set")
        if not given and self.sni is None:
            raise ValueError("sni is required when no trust source is set (the system CAs then verify the "
                             "backend's certificate for that name); set sni, or one of secretRef, files, "
                             "wellKnownCACertificates, or insecureSkipVerify: true")
        return self

    @property
    def system_trust(self) -> bool:
        """Verified with the system CAs: asked for, or no other trust source set."""
        return self.well_known_ca_certificates == "System" or (
            self.secret_ref is None and self.files is None and not self.insecure_skip_verify
            and self.well_known_ca_certificates is None)


class SlowStart(Model):
    window: Duration | None = None
    aggression: str | None = Field(None, pattern=r"^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$", json_schema_extra=field_rules(
        CEL("(self.matches('^-?(?:[0-9]+(?:\\\\.[0-9]*)?|\\\\.[0-9]+)$') && double(self) > 0.0)",
            "Aggression, if specified, must be a string representing a number greater than 0.0", CHECKS)))
    min_weight_percent: int | None = Field(None, ge=0, le=100)


class HeaderHash(Model):
    name: str = Field(min_length=1)


class CookieHash(Model):
    name: str = Field(min_length=1)
    path: str | None = None
    ttl: Duration | None = None
    secure: bool | None = None
    http_only: bool | None = None
    same_site: Literal["Strict", "Lax", "None"] | None = None


class SourceIP(Model):
    pass


class HashPolicy(Model):
    RULES = (exactly_one_of("header", "cookie", "source_ip"),)

    header: HeaderHash | None = None
    cookie: CookieHash | None = None
    source_ip: SourceIP | None = Field(None, alias="sourceIP")
    terminal: bool | None = None


class LeastRequest(Model):
    choice_count: int = 2
    slow_start: SlowStart | None = None


class RoundRobin(Model):
    slow_start: SlowStart | None = None


class RingHash(Model):
    minimum_ring_size: int | None = Field(None, ge=0)
    maximum_ring_size: int | None = Field(None, ge=0)
    use_hostname_for_hashing: bool | None = None
    hash_policies: list[HashPolicy] | None = Field(None, min_length=1, max_length=16)


class Maglev(Model):
    use_hostname_for_hashing: bool | None = None
    hash_policies: list[HashPolicy] | None = Field(None, min_length=1, max_length=16)


class Random(Model):
    pass


class ZoneAwareForce(Model):
    min_endpoints_in_zone_threshold: int | None = Field(None, ge=1)


class ZoneAwarePreferLocal(Model):
    force: ZoneAwareForce | None = None
    min_endpoints_threshold: int | None = Field(None, ge=1)
    routing_enabled: int | None = Field(None, ge=0, le=100)


class ZoneAware(Model):
    prefer_local: ZoneAwarePreferLocal | None = None


class LoadBalancer(Model):
    RULES = (exactly_one_of("least_request", "round_robin", "ring_hash", "maglev", "random"),)

    healthy_panic_threshold: int | None = Field(None, ge=0, le=100)
    update_merge_window: Duration | None = None
    least_request: LeastRequest | None = None
    round_robin: RoundRobin | None = None
    ring_hash: RingHash | None = None
    maglev: Maglev | None = None
    random: Random | None = None
    locality_type: Literal["WeightedLb"] | None = None
    zone_aware: ZoneAware | None = None
    close_connections_on_host_set_change: bool | None = None

    @model_validator(mode="after")
    def _algorithm(self) -> LoadBalancer:
        if self.locality_type is not None and self.zone_aware is not None:
            raise ValueError("localityType and zoneAware are mutually exclusive")
        if self.zone_aware is not None and (self.ring_hash is not None or self.maglev is not None):
            raise ValueError("zoneAware is not supported with ringHash or maglev load balancers")
        return self


class HealthCheckHttp(Model):
    host: str | None = None
    path: str
    method: Literal["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH"] | None = None


class HealthCheckGrpc(Model):
    service_name: str | None = None
    authority: str | None = None


_HEX = r"^([0-9A-Fa-f]{2})+$"


class HealthCheckTcp(Model):
    send: str | None = Field(None, min_length=1, max_length=1024, pattern=_HEX)
    receive: list[Annotated[str, Field(min_length=1, max_length=1024, pattern=_HEX)]] | None = Field(
        None, min_length=1, max_length=16)

    @model_validator(mode="after")
    def _pairs(self) -> HealthCheckTcp:
        if self.receive and self.send is None:
            raise ValueError("receive requires send to be set")
        return self


class HealthCheck(Model):
    RULES = (exactly_one_of("http", "grpc", "tcp"),)

    timeout: Duration
    interval: Duration
    unhealthy_threshold: int = Field(ge=0)
    healthy_threshold: int = Field(ge=0)
    http: HealthCheckHttp | None = None
    grpc: HealthCheckGrpc | None = None
    tcp: HealthCheckTcp | None = None


class OutlierDetection(Model):
    consecutive_5xx: int | None = Field(None, alias="consecutive5xx", ge=0)
    enforcing_consecutive_5xx: int | None = Field(None, alias="enforcingConsecutive5xx", ge=0, le=100)
    split_external_local_origin_errors: bool | None = None
    consecutive_local_origin_failure: int | None = Field(None, ge=0)
    enforcing_consecutive_local_origin_failure: int | None = Field(None, ge=0, le=100)
    interval: Duration | None = None
    base_ejection_time: Duration | None = None
    max_ejection_percent: int | None = Field(None, ge=0, le=100)


class UpstreamProxyProtocol(Model):
    version: Literal["V1", "V2"] = "V1"


class TunnelProxy(Model):
    backend_ref: BackendObjectReference


class TunnelHeaderSecret(Model):
    name: str = Field(min_length=1)
    key: str = Field(min_length=1)


class TunnelHeader(Model):
    """A header of the CONNECT request: a literal `value`, or one read from a Secret."""

    RULES = (exactly_one_of("value", "secret_ref"),)

    name: str = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$")
    value: str | None = None
    secret_ref: TunnelHeaderSecret | None = None


class Tunnel(Model):
    """Upstream connections opened through an HTTP CONNECT proxy."""

    proxy: TunnelProxy
    headers: list[TunnelHeader] = Field(default_factory=list, max_length=16)


# What a BackendConfigPolicy can configure: a Service, or a Backend under either group. kgateway
# also takes networking.istio.io/Hostname, which lychgate has no clusters for: refused, not ignored.
BACKEND_TARGET = ("(r.group == '' && r.kind == 'Service') || "
                  "((r.group == 'gateway.lychgate.dev' || r.group == 'gateway.kgateway.dev') && r.kind == 'Backend')")


R = TypeVar("R", LocalPolicyTargetReference, LocalPolicyTargetSelector)


def _backend_target(ref: R) -> R:
    """A policy on any other kind would apply nowhere and, having no Gateway to report on, say
    nothing (translate/backend_config.py writes status per Gateway): refused here instead."""
    if not ((ref.group in ("", "core") and ref.kind == "Service")
            or (ref.group in ("gateway.lychgate.dev", "gateway.kgateway.dev") and ref.kind == "Backend")):
        raise ValueError(f"{ref.group or 'core'}/{ref.kind} cannot be targeted; use a Service (group \"\") or "
                         "a Backend (group gateway.lychgate.dev or gateway.kgateway.dev)")
    return ref


def _targets(field: str) -> JsonDict:
    return field_rules(CEL(f"self.all(r, {BACKEND_TARGET})",
                           f"{field} must reference either a Kubernetes Service or a Backend", "the model"))


class BackendConfigPolicySpec(Model):
    RULES = (at_most_one_of("http1_protocol_options", "http2_protocol_options"),)

    target_refs: list[Annotated[LocalPolicyTargetReference, AfterValidator(_backend_target)]] = Field(
        default_factory=list, min_length=1, max_length=16, json_schema_extra=_targets("targetRefs"))
    target_selectors: list[Annotated[LocalPolicyTargetSelector, AfterValidator(_backend_target)]] = Field(
        default_factory=list, json_schema_extra=_targets("targetSelectors"))
    connect_timeout: Duration | None = None
    dns: DNS | None = None
    per_connection_buffer_limit_bytes: int | None = Field(None, ge=0)
    tcp_keepalive: TCPKeepalive | None = None
    common_http_protocol_options: CommonHttpProtocolOptions | None = None
    http1_protocol_options: Http1ProtocolOptions | None = None
    http2_protocol_options: Http2ProtocolOptions | None = None
    tls: TLS | None = None
    load_balancer: LoadBalancer | None = None
    health_check: HealthCheck | None = None
    outlier_detection: OutlierDetection | None = None
    circuit_breakers: CircuitBreakers | None = None
    upstream_proxy_protocol: UpstreamProxyProtocol | None = None
    tunnel: Tunnel | None = None



class BackendConfigPolicy(Resource):
    """Connection, load-balancing and health settings for the Services or Backends it targets."""

    KIND: ClassVar[str] = "BackendConfigPolicy"
    STATUS: ClassVar[type[Model] | None] = PolicyStatus
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1alpha1",)
    spec: BackendConfigPolicySpec = Field(default_factory=BackendConfigPolicySpec)
