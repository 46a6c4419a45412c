"""BackendConfigPolicy → ir.BackendConfig for the clusters of the Services and Backends it targets.

Several policies may target one backend. As for TrafficPolicies, they merge
field by field (a top-level spec field is the unit): a policy naming the
Service port (`sectionName`) beats one for the whole Service, and among equals
the oldest wins. A policy with an unusable value (a Secret that is missing, a
window size out of range) is not Accepted and applies nowhere: half of a
policy is not what its author asked for.

Status: one ancestor per Gateway whose routes use a targeted backend, with
`Accepted` (is the policy valid) and `Attached` (what it sets on each target,
and which fields older policies set there instead).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from lychgate import envoy_limits, ir
from lychgate.api import backend_config as api
from lychgate.api.backend import GROUPS as BACKEND_GROUPS
from lychgate.api.backend import Backend
from lychgate.api.base import ObjectKey
from lychgate.api.core import Secret, Service
from lychgate.store import Store
from lychgate.translate.conditions import CONTROLLER_NAME, condition
from lychgate.translate.secrets import secret_value, tls_secret
from lychgate.translate.values import (
    Invalid,
    duration_ms,
    envoy_check,
    header_name,
    quantity_bytes,
)

KIND = "BackendConfigPolicy"

Settings = dict[str, Any]  # keyword arguments of ir.BackendConfig


@dataclass(frozen=True)
class Target:
    """A backend a policy may apply to: a Service (port) or a Backend."""

    kind: str  # "Service" | "Backend"
    namespace: str
    name: str
    labels: tuple[tuple[str, str], ...] = ()
    section: str | None = None  # the Service port's name
    port: int | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.name}" + (f" port {self.section or self.port}" if self.port else "")


def for_service(store: Store, service: Service, port_name: str | None, port: int) -> ir.BackendConfig | None:
    if not store.count(KIND):
        return None  # every backendRef asks: answer without listing policies
    return config_for(store, Target("Service", service.namespace, service.name,
                                    tuple(sorted(service.metadata.labels.items())), port_name, port))


def for_backend(store: Store, backend: Backend) -> ir.BackendConfig | None:
    if not store.count(KIND):
        return None
    return config_for(store, Target("Backend", backend.namespace, backend.name,
                                    tuple(sorted(backend.metadata.labels.items()))))


def config_for(store: Store, target: Target) -> ir.BackendConfig | None:
    settings, _ = _merged(store, target)
    return ir.BackendConfig(**settings) if settings else None


def hash_policies(clusters: Iterable[ir.Cluster | None]) -> tuple[ir.HashPolicy, ...]:
    """The consistent-hashing key of a rule: that of its first backend that hashes."""
    return next((c.config.hash_policies for c in clusters
                 if c is not None and c.config is not None and c.config.hash_policies), ())


# --- which policies apply where ---------------------------------------------------------


def _kind_matches(group: str, kind: str, target: Target) -> bool:
    if target.kind == "Service":
        return group in ("", "core") and kind == "Service"
    return group in BACKEND_GROUPS and kind == "Backend"


def _section_matches(section: str | None, target: Target) -> bool:
    return section is None or section == target.section or section == str(target.port)


def _specificity(policy: api.BackendConfigPolicy, target: Target) -> int | None:
    """0: names the target's port, 1: the whole target, None: does not target it."""
    best: int | None = None
    for ref in policy.spec.target_refs:
        if _kind_matches(ref.group, ref.kind, target) and ref.name == target.name \
                and _section_matches(ref.section_name, target):
            rank = 0 if ref.section_name is not None else 1
            best = rank if best is None else min(best, rank)
    labels = dict(target.labels)
    for sel in policy.spec.target_selectors:
        if _kind_matches(sel.group, sel.kind, target) and _section_matches(sel.section_name, target) \
                and all(labels.get(k) == v for k, v in sel.match_labels.items()):
            rank = 0 if sel.section_name is not None else 1
            best = rank if best is None else min(best, rank)
    return best


def _ordered(store: Store, target: Target) -> list[api.BackendConfigPolicy]:
    ranked = [(rank, p.created, p.name, p) for p in store.list(api.BackendConfigPolicy, target.namespace)
              if (rank := _specificity(p, target)) is not None]
    return [p for *_, p in sorted(ranked, key=lambda r: r[:3])]


def _merged(store: Store, target: Target) -> tuple[Settings, dict[str, api.BackendConfigPolicy]]:
    """The settings for `target`, and which policy won each spec field."""
    settings: Settings = {}
    winners: dict[str, api.BackendConfigPolicy] = {}
    for policy in _ordered(store, target):
        try:
            fields = compile_policy(store, policy)
        except Invalid:
            continue  # not Accepted; its status says why
        for name, values in fields.items():
            if name not in winners:
                winners[name] = policy
                settings.update(values)
    return settings, winners


# --- one policy, field by field -----------------------------------------------------------


def compile_policy(store: Store, policy: api.BackendConfigPolicy) -> dict[str, Settings]:
    """Each spec field the policy sets → its ir.BackendConfig settings. Raises Invalid."""
    spec = policy.spec
    out: dict[str, Settings] = {}
    for name, compile_field in _FIELDS.items():
        value = getattr(spec, name)
        if value is not None:
            out[name] = compile_field(store, policy, value)
    return out


def _ms(value: str | None, path: str, minimum_ms: int = 0) -> int | None:
    return None if value is None else duration_ms(value, path, minimum_ms)


def _seconds(value: str | None, path: str) -> int | None:
    ms = _ms(value, path, 1000)
    return None if ms is None else ms // 1000


def _connect_timeout(store: Store, policy: api.BackendConfigPolicy, value: str) -> Settings:
    return {"connect_timeout_ms": duration_ms(value, "spec.connectTimeout", 1)}


def _buffer_limit(store: Store, policy: api.BackendConfigPolicy, value: int) -> Settings:
    return {"per_connection_buffer_limit_bytes": value}


def _tcp_keepalive(store: Store, policy: api.BackendConfigPolicy, value: api.TCPKeepalive) -> Settings:
    path = "spec.tcpKeepalive"
    return {"tcp_keepalive": (value.keep_alive_probes, _seconds(value.keep_alive_time, f"{path}.keepAliveTime"),
                              _seconds(value.keep_alive_interval, f"{path}.keepAliveInterval"))}


def _common_http(store: Store, policy: api.BackendConfigPolicy, value: api.CommonHttpProtocolOptions) -> Settings:
    path = "spec.commonHttpProtocolOptions"
    return {
        "idle_timeout_ms": _ms(value.idle_timeout, f"{path}.idleTimeout"),
        "max_connection_duration_ms": _ms(value.max_connection_duration, f"{path}.maxConnectionDuration"),
        "max_headers_count": value.max_headers_count,
        "max_stream_duration_ms": _ms(value.max_stream_duration, f"{path}.maxStreamDuration"),
        "max_requests_per_connection": value.max_requests_per_connection or None,
    }


def _http1(store: Store, policy: api.BackendConfigPolicy, value: api.Http1ProtocolOptions) -> Settings:
    return {"http1_enable_trailers": value.enable_trailers,
            "http1_preserve_case": bool(value.preserve_http1_header_case),
            "http1_override_stream_error": value.override_stream_error_on_invalid_http_message}


def _window(value: int | str | None, path: str) -> int | None:
    if value is None:
        return None
    size = quantity_bytes(value, path)
    if not 65535 <= size <= 2147483647:
        raise Invalid(path, f"{value!r} must be between 65535 and 2147483647 bytes")
    return size


def _http2(store: Store, policy: api.BackendConfigPolicy, value: api.Http2ProtocolOptions) -> Settings:
    path = "spec.http2ProtocolOptions"
    keepalive = None
    if value.connection_keepalive is not None:
        k, kpath = value.connection_keepalive, f"{path}.connectionKeepalive"
        keepalive = (duration_ms(k.timeout, f"{kpath}.timeout", 1), _ms(k.interval, f"{kpath}.interval", 1),
                     _ms(k.connection_idle_interval, f"{kpath}.connectionIdleInterval", 1))
    return {"http2": True,
            "http2_initial_stream_window": _window(value.initial_stream_window_size, f"{path}.initialStreamWindowSize"),
            "http2_initial_connection_window": _window(value.initial_connection_window_size,
                                                       f"{path}.initialConnectionWindowSize"),
            "http2_max_concurrent_streams": value.max_concurrent_streams,
            "http2_override_stream_error": value.override_stream_error_on_invalid_http_message,
            "http2_keepalive": keepalive}


def _tls(store: Store, policy: api.BackendConfigPolicy, value: api.TLS) -> Settings:
    path = "spec.tls"
    cert: ir.Certificate | None = None
    ca: str | None = None
    cert_files: tuple[str, str] | None = None
    if value.secret_ref is not None:
        cert, ca, problem = tls_secret(store, policy.namespace, value.secret_ref.name)
        if problem:
            raise Invalid(f"{path}.secretRef", problem)
    if value.files is not None:
        f = value.files
        if (f.tls_certificate is None) != (f.tls_key is None):
            raise Invalid(f"{path}.files", "tlsCertificate and tlsKey go together")
        if f.tls_certificate is None and f.root_ca is None:
            raise Invalid(f"{path}.files", "at least one of tlsCertificate, tlsKey or rootCA must be set")
        if f.tls_certificate is not None and f.tls_key is not None:
            cert_files = (f.tls_certificate, f.tls_key)
    if value.simple_tls:
        cert, cert_files = None, None  # server-only TLS even when a client certificate is at hand
    params = value.parameters or api.TLSParameters()
    insecure = bool(value.insecure_skip_verify)
    if value.verify_subject_alt_names and insecure:
        raise Invalid(f"{path}.verifySubjectAltNames", "cannot be checked with insecureSkipVerify")
    sans = tuple(value.verify_subject_alt_names)
    ca_file = value.files.root_ca if value.files is not None else None
    # A secretRef without ca.crt (only a client certificate) or files without rootCA
    # name no CA: the system CAs verify, as with no trust source at all. kgateway sends
    # no validation context then (the backend's certificate is not checked); lychgate
    # fails closed, and insecureSkipVerify stays the one explicit way to skip the check.
    implicit = not insecure and not value.system_trust and ca is None and ca_file is None
    if implicit and not sans and value.sni is None:
        source = "the secretRef's Secret has no ca.crt" if value.secret_ref is not None \
            else "files sets no rootCA"
        raise Invalid(f"{path}.sni", f"required when {source}: the system CAs then verify the backend's "
                                     "certificate, and sni (or verifySubjectAltNames) names what it must be "
                                     "valid for; or give the backend's CA (ca.crt, rootCA)")
    system = value.system_trust or implicit
    if system and not sans and value.sni is not None:
        # kgateway: a certificate the system CAs verify must also be valid for sni, else
        # any certificate a public CA issued to anyone would do.
        sans = (value.sni,)
    return {"tls": ir.BackendTLS(
        sni=value.sni, ca=None if insecure else ca, ca_file=ca_file,
        system_ca=system, insecure=insecure,
        certificate=cert, certificate_files=cert_files, sans=sans,
        min_version=params.min_version, max_version=params.max_version,
        cipher_suites=tuple(params.cipher_suites), ecdh_curves=tuple(params.ecdh_curves),
        signature_algorithms=tuple(params.signature_algorithms), alpn=tuple(value.alpn_protocols),
        allow_renegotiation=bool(value.allow_renegotiation))}


def _slow_start(value: api.SlowStart | None, path: str) -> ir.SlowStart | None:
    if value is None:
        return None
    aggression = float(value.aggression) if value.aggression is not None else None
    if aggression is not None and aggression <= 0:
        raise Invalid(f"{path}.aggression", f"{value.aggression!r} must be greater than 0.0")
    return ir.SlowStart(_ms(value.window, f"{path}.window"), aggression, value.min_weight_percent)


def hash_policy(value: api.HashPolicy, path: str) -> ir.HashPolicy:
    terminal = bool(value.terminal)
    if value.header is not None:
        # Envoy's hash_policy header_name must be a header name, or the route is NACKed.
        return ir.HashPolicy(header=header_name(value.header.name, f"{path}.header.name"), terminal=terminal)
    if value.cookie is not None:
        c = value.cookie
        attributes = ((("Secure", ""),) if c.secure else ()) + ((("HttpOnly", ""),) if c.http_only else ()) \
            + ((("SameSite", c.same_site),) if c.same_site else ())
        return ir.HashPolicy(cookie=c.name, cookie_path=c.path, cookie_ttl_ms=_ms(c.ttl, f"{path}.cookie.ttl"),
                             cookie_attributes=attributes, terminal=terminal)
    return ir.HashPolicy(source_ip=True, terminal=terminal)


def _load_balancer(store: Store, policy: api.BackendConfigPolicy, value: api.LoadBalancer) -> Settings:
    path = "spec.loadBalancer"
    if value.zone_aware is not None:
        raise Invalid(f"{path}.zoneAware", "zone-aware routing is not supported yet")
    common: dict[str, Any] = {
        "healthy_panic_threshold": value.healthy_panic_threshold,
        "update_merge_window_ms": _ms(value.update_merge_window, f"{path}.updateMergeWindow"),
        "locality_weighted": value.locality_type == "WeightedLb",
        "close_connections_on_host_set_change": bool(value.close_connections_on_host_set_change),
    }
    hashes: list[api.HashPolicy] = []
    if value.least_request is not None:
        lb = ir.LoadBalancing("least_request", choice_count=value.least_request.choice_count,
                              slow_start=_slow_start(value.least_request.slow_start, f"{path}.leastRequest.slowStart"),
                              **common)
        if value.least_request.choice_count < 2:
            raise Invalid(f"{path}.leastRequest.choiceCount", "must be at least 2")
    elif value.round_robin is not None:
        lb = ir.LoadBalancing("round_robin",
                              slow_start=_slow_start(value.round_robin.slow_start, f"{path}.roundRobin.slowStart"),
                              **common)
    elif value.ring_hash is not None:
        r = value.ring_hash
        if r.minimum_ring_size and r.maximum_ring_size and r.minimum_ring_size > r.maximum_ring_size:
            raise Invalid(f"{path}.ringHash.minimumRingSize", "cannot be larger than maximumRingSize")
        lb = ir.LoadBalancing("ring_hash", ring_min=r.minimum_ring_size, ring_max=r.maximum_ring_size,
                              use_hostname_for_hashing=bool(r.use_hostname_for_hashing), **common)
        hashes = r.hash_policies or []
    elif value.maglev is not None:
        lb = ir.LoadBalancing("maglev", use_hostname_for_hashing=bool(value.maglev.use_hostname_for_hashing), **common)
        hashes = value.maglev.hash_policies or []
    else:
        lb = ir.LoadBalancing("random", **common)
    algorithm = "ringHash" if value.ring_hash is not None else "maglev"
    return {"load_balancing": lb, "hash_policies": tuple(
        hash_policy(h, f"{path}.{algorithm}.hashPolicies[{i}]") for i, h in enumerate(hashes))}


def _health_check(store: Store, policy: api.BackendConfigPolicy, value: api.HealthCheck) -> Settings:
    path = "spec.healthCheck"
    hc = ir.HealthCheck(
        timeout_ms=duration_ms(value.timeout, f"{path}.timeout", 1),
        interval_ms=duration_ms(value.interval, f"{path}.interval", 1),
        unhealthy_threshold=value.unhealthy_threshold, healthy_threshold=value.healthy_threshold)
    if value.http is not None:
        if not value.http.path.startswith("/"):
            raise Invalid(f"{path}.http.path", f"{value.http.path!r} must start with '/'")
        envoy_check(envoy_limits.header_value, value.http.path, f"{path}.http.path")
        if value.http.host is not None:
            envoy_check(envoy_limits.header_value, value.http.host, f"{path}.http.host")
        return {"health_check": ir.HealthCheck(**{**hc.__dict__, "http_path": value.http.path,
                                                  "http_host": value.http.host, "http_method": value.http.method})}
    if value.grpc is not None:
        return {"health_check": ir.HealthCheck(**{**hc.__dict__, "grpc": True, "grpc_service": value.grpc.service_name,
                                                  "grpc_authority": value.grpc.authority})}
    tcp = value.tcp or api.HealthCheckTcp()
    return {"health_check": ir.HealthCheck(**{**hc.__dict__, "tcp": True, "tcp_send": tcp.send,
                                              "tcp_receive": tuple(tcp.receive or ())})}


def _outlier(store: Store, policy: api.BackendConfigPolicy, value: api.OutlierDetection) -> Settings:
    path = "spec.outlierDetection"
    return {"outlier_detection": ir.OutlierDetection(
        consecutive_5xx=value.consecutive_5xx, enforcing_consecutive_5xx=value.enforcing_consecutive_5xx,
        split_external_local_origin_errors=bool(value.split_external_local_origin_errors),
        consecutive_local_origin_failure=value.consecutive_local_origin_failure,
        enforcing_consecutive_local_origin_failure=value.enforcing_consecutive_local_origin_failure,
        interval_ms=_ms(value.interval, f"{path}.interval", 1),
        base_ejection_time_ms=_ms(value.base_ejection_time, f"{path}.baseEjectionTime", 1),
        max_ejection_percent=value.max_ejection_percent)}


def _circuit_breakers(store: Store, policy: api.BackendConfigPolicy, value: api.CircuitBreakers) -> Settings:
    return {"circuit_breakers": ir.CircuitBreakers(
        value.max_connections, value.max_pending_requests, value.max_requests, value.max_retries,
        bool(value.track_remaining))}


def _dns(store: Store, policy: api.BackendConfigPolicy, value: api.DNS) -> Settings:
    refresh = _ms(value.refresh_rate, "spec.dns.refreshRate", 1)
    jitter = _ms(value.jitter, "spec.dns.jitter")
    if refresh is not None and jitter is not None and jitter > refresh:
        raise Invalid("spec.dns.jitter", "must be less than or equal to refreshRate")
    return {"dns_refresh_ms": refresh, "dns_jitter_ms": jitter, "dns_respect_ttl": value.respect_ttl}


def _proxy_protocol(store: Store, policy: api.BackendConfigPolicy, value: api.UpstreamProxyProtocol) -> Settings:
    return {"proxy_protocol": value.version}


# Envoy's limit on a header value.
_MAX_HEADER_VALUE = 16384


def _tunnel(store: Store, policy: api.BackendConfigPolicy, value: api.Tunnel) -> Settings:
    headers: list[tuple[str, str]] = []
    for i, header in enumerate(value.headers):
        path = f"spec.tunnel.headers[{i}]"
        text = header.value
        if header.secret_ref is not None:
            sref = header.secret_ref
            secret = store.get(Secret, policy.namespace, sref.name)
            if secret is None:
                raise Invalid(f"{path}.secretRef", f"Secret {policy.namespace}/{sref.name} not found")
            text = secret_value(secret, sref.key)
            if text is None:
                raise Invalid(f"{path}.secretRef", f"Secret {policy.namespace}/{sref.name} has no key {sref.key}")
        # Secret files often end with a newline; the value itself never shows in a message.
        text = (text or "").strip()
        if not text:
            raise Invalid(path, f"header {header.name} has an empty value")
        if any(c in text for c in "\r\n\0"):
            raise Invalid(path, f"header {header.name} value contains CR, LF or NUL")
        if len(text) > _MAX_HEADER_VALUE:
            raise Invalid(path, f"header {header.name} value is longer than {_MAX_HEADER_VALUE} bytes")
        headers.append((header.name, text))
    ref = value.proxy.backend_ref
    return {"tunnel": ir.TunnelConfig(ref.group, ref.kind, ref.namespace or policy.namespace, ref.name, ref.port,
                                      tuple(headers))}


_Compile = Callable[[Store, api.BackendConfigPolicy, Any], Settings]
# Spec attribute → compiler; the camelCase names are what status messages show.
_FIELDS: dict[str, _Compile] = {
    "connect_timeout": _connect_timeout,
    "per_connection_buffer_limit_bytes": _buffer_limit,
    "tcp_keepalive": _tcp_keepalive,
    "common_http_protocol_options": _common_http,
    "http1_protocol_options": _http1,
    "http2_protocol_options": _http2,
    "tls": _tls,
    "load_balancer": _load_balancer,
    "health_check": _health_check,
    "outlier_detection": _outlier,
    "circuit_breakers": _circuit_breakers,
    "dns": _dns,
    "upstream_proxy_protocol": _proxy_protocol,
    "tunnel": _tunnel,
}


def _camel(attr: str) -> str:
    return api.field_name(api.BackendConfigPolicySpec, attr)


# --- status -------------------------------------------------------------------------------


def _targets(store: Store, policy: api.BackendConfigPolicy) -> Iterator[Target | str]:
    """The backends the policy names (a Target), or what cannot be found (a message)."""
    ns = policy.namespace
    for i, ref in enumerate(policy.spec.target_refs):
        where = f"targetRefs[{i}]"
        if ref.group in ("", "core") and ref.kind == "Service":
            svc = store.get(Service, ns, ref.name)
            if svc is None:
                yield f"{where}: Service {ns}/{ref.name} not found"
                continue
            ports = [p for p in svc.spec.ports if _section_matches(ref.section_name, Target(
                "Service", ns, ref.name, section=p.name, port=p.port))]
            if not ports:
                yield f"{where}: Service {ns}/{ref.name} has no port {ref.section_name}"
            for p in ports:
                yield Target("Service", ns, svc.name, tuple(sorted(svc.metadata.labels.items())), p.name, p.port)
        elif ref.group in BACKEND_GROUPS and ref.kind == "Backend":
            backend = store.get(Backend, ns, ref.name)
            if backend is None:
                yield f"{where}: Backend {ns}/{ref.name} not found"
            else:
                yield Target("Backend", ns, backend.name, tuple(sorted(backend.metadata.labels.items())))
        else:
            yield f"{where}: {ref.group or 'core'}/{ref.kind} is not a Service or a Backend"
    for sel in policy.spec.target_selectors:
        objects: Iterable[Service | Backend] = (
            store.list(Service, ns) if sel.group in ("", "core") and sel.kind == "Service"
            else store.list(Backend, ns) if sel.group in BACKEND_GROUPS and sel.kind == "Backend" else ())
        for obj in objects:
            labels = obj.metadata.labels
            if not all(labels.get(k) == v for k, v in sel.match_labels.items()):
                continue
            if isinstance(obj, Service):
                for p in obj.spec.ports:
                    if _section_matches(sel.section_name, Target("Service", ns, obj.name, section=p.name, port=p.port)):
                        yield Target("Service", ns, obj.name, tuple(sorted(labels.items())), p.name, p.port)
            else:
                yield Target("Backend", ns, obj.name, tuple(sorted(labels.items())))


def write_status(store: Store, users: dict[tuple[str, str, str], set[tuple[str, str]]],
                 out: dict[ObjectKey, dict[str, Any]]) -> None:
    """`users` maps (kind, namespace, name) of a backend to the Gateways (namespace, name) using it."""
    for policy in store.list(api.BackendConfigPolicy):
        gen = policy.generation
        gateways: set[tuple[str, str]] = set()
        notes: list[str] = []
        applied = 0
        try:
            compile_policy(store, policy)
            invalid = ""
        except Invalid as err:
            invalid = str(err)
        seen: set[Target] = set()
        for target in _targets(store, policy):
            if isinstance(target, str):
                notes.append(target)
                continue
            if target in seen:
                continue
            seen.add(target)
            gateways |= users.get((target.kind, target.namespace, target.name), set())
            if invalid:
                continue
            _, winners = _merged(store, target)
            lost = sorted({f"{_camel(f)} (set by {p.name})" for f, p in winners.items() if p.key != policy.key
                           and getattr(policy.spec, f) is not None})
            mine = [f for f, p in winners.items() if p.key == policy.key]
            applied += bool(mine)
            notes.append(f"{target.describe()}: " + (
                f"overridden: {', '.join(lost)}" if lost and not mine
                else f"applied; overridden: {', '.join(lost)}" if lost else "applied"))
        if not gateways:
            continue
        if invalid:
            accepted = condition("Accepted", False, "Invalid", invalid, gen)
            attached = condition("Attached", False, "Invalid", "the policy is not applied anywhere", gen)
        else:
            accepted = condition("Accepted", True, "Valid", "the policy is valid", gen)
            attached = (condition("Attached", True, "Attached", "; ".join(notes), gen) if applied
                        else condition("Attached", False, "Overridden", "; ".join(notes), gen))
        out[policy.key] = {"ancestors": [
            {"ancestorRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": ns, "name": name},
             "controllerName": CONTROLLER_NAME, "conditions": [accepted, attached]}
            for ns, name in sorted(gateways)]}


def backend_users(clusters: Iterable[tuple[tuple[str, str], Iterable[str]]]) -> dict[tuple[str, str, str], set[tuple[str, str]]]:
    """(kind, namespace, name) of each backend → Gateways, from cluster names
    (`kube_NS_SVC_PORT` for Services, `backend_NS_NAME_0[/...]` for Backends)."""
    out: dict[tuple[str, str, str], set[tuple[str, str]]] = {}
    kinds = {"kube": "Service", "backend": "Backend"}
    for gw, names in clusters:
        for name in names:
            parts = name.partition("/")[0].split("_")
            if len(parts) == 4 and parts[0] in kinds:
                out.setdefault((kinds[parts[0]], parts[1], parts[2]), set()).add(gw)
    return out
