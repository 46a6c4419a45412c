"""BackendConfigPolicy manifests as kgateway users write them load; what kgateway's
CRD refuses is refused with the field named."""

from __future__ import annotations

import pytest
import yaml

from lychgate.api.backend_config import BackendConfigPolicy
from lychgate.api.registry import ManifestError, parse

KGATEWAY_EXAMPLE = """
apiVersion: gateway.lychgate.dev/v1alpha1
kind: BackendConfigPolicy
metadata: {name: httpbin-policy, namespace: httpbin}
spec:
  targetRefs: [{name: httpbin, group: "", kind: Service}]
  connectTimeout: 5s
  perConnectionBufferLimitBytes: 1024
  tcpKeepalive: {keepAliveProbes: 3, keepAliveTime: 30s, keepAliveInterval: 5s}
  commonHttpProtocolOptions: {idleTimeout: 10s, maxHeadersCount: 15, maxStreamDuration: 30s, maxRequestsPerConnection: 100}
  http1ProtocolOptions: {enableTrailers: true, overrideStreamErrorOnInvalidHttpMessage: true, preserveHttp1HeaderCase: true}
  loadBalancer:
    healthyPanicThreshold: 50
    maglev: {useHostnameForHashing: true, hashPolicies: [{sourceIP: {}}, {cookie: {name: s, ttl: 30m, sameSite: Strict}}]}
  outlierDetection: {consecutive5xx: 7, enforcingConsecutive5xx: 100, maxEjectionPercent: 15}
  dns: {refreshRate: 60s, jitter: 5s, respectTTL: true}
  tls: {wellKnownCACertificates: System, simpleTLS: true}
  upstreamProxyProtocol: {version: V2}
"""


def test_kgateway_manifest_loads_unchanged() -> None:
    policy = parse(yaml.safe_load(KGATEWAY_EXAMPLE))
    assert isinstance(policy, BackendConfigPolicy)
    assert policy.spec.outlier_detection is not None and policy.spec.outlier_detection.consecutive_5xx == 7
    assert policy.spec.dns is not None and policy.spec.dns.respect_ttl is True
    assert policy.spec.tls is not None and policy.spec.tls.simple_tls is True


def test_dns_older_names_read_as_the_newer_ones() -> None:
    """kgateway's e2e manifests still write `dnsRefreshRate`/`dnsJitter`; they mean what
    `refreshRate`/`jitter` mean."""
    raw = yaml.safe_load(KGATEWAY_EXAMPLE)
    raw["spec"]["dns"] = {"dnsRefreshRate": "60s", "dnsJitter": "15s"}
    policy = parse(raw)
    assert isinstance(policy, BackendConfigPolicy) and policy.spec.dns is not None
    assert (policy.spec.dns.refresh_rate, policy.spec.dns.jitter) == ("60s", "15s")
    assert policy.spec.dns.dns_refresh_rate is None and policy.spec.dns.dns_jitter is None


@pytest.mark.parametrize(("tls", "system"), [
    ({"sni": "api.example.com"}, True),  # kgateway: the system CAs verify it, for that name
    ({"sni": "api.example.com", "insecureSkipVerify": False}, True),  # false is the same as unset
    ({"secretRef": {"name": "a"}, "insecureSkipVerify": False}, False),
    ({"insecureSkipVerify": True}, False),
    ({"wellKnownCACertificates": "System"}, True),
])
def test_tls_trust_sources_kgateway_accepts(tls: dict[str, object], system: bool) -> None:
    raw = yaml.safe_load(KGATEWAY_EXAMPLE)
    raw["spec"] = {"targetRefs": raw["spec"]["targetRefs"], "tls": tls}
    policy = parse(raw)
    assert isinstance(policy, BackendConfigPolicy) and policy.spec.tls is not None
    assert policy.spec.tls.system_trust is system


@pytest.mark.parametrize(("change", "message"), [
    ({"loadBalancer": {"random": {}, "roundRobin": {}}}, "exactly one of leastRequest, roundRobin, ringHash, maglev, random"),
    ({"loadBalancer": {}}, "exactly one of leastRequest"),
    ({"http1ProtocolOptions": {}, "http2ProtocolOptions": {}}, "at most one of http1ProtocolOptions, http2ProtocolOptions"),
    ({"tls": {"secretRef": {"name": "a"}, "insecureSkipVerify": True}},
     "at most one of secretRef, files, insecureSkipVerify, wellKnownCACertificates"),
    ({"tls": {"files": {"rootCA": "/ca.pem"}, "wellKnownCACertificates": "System", "sni": "a"}}, "at most one of"),
    ({"tls": {}}, "sni is required when no trust source is set"),
    ({"tls": {"insecureSkipVerify": False}}, "sni is required when no trust source is set"),
    ({"connectTimeout": "5 seconds"}, "spec.connectTimeout"),
    ({"dns": {"refreshRate": "60s", "dnsRefreshRate": "30s"}}, "refreshRate and dnsRefreshRate are two names"),
    ({"circuitBreakers": {"trackRemaining": True}}, "at least one of maxConnections"),
    ({"healthCheck": {"timeout": "1s", "interval": "1s", "unhealthyThreshold": 1, "healthyThreshold": 1}},
     "exactly one of http, grpc, tcp"),
    ({"loadBalancer": {"ringHash": {"hashPolicies": [{"header": {"name": "a"}, "sourceIP": {}}]}}},
     "exactly one of header, cookie, sourceIP"),
])
def test_what_the_crd_refuses(change: dict[str, object], message: str) -> None:
    raw = yaml.safe_load(KGATEWAY_EXAMPLE)
    raw["spec"] = {"targetRefs": raw["spec"]["targetRefs"], **change}
    with pytest.raises(ManifestError, match="BackendConfigPolicy httpbin/httpbin-policy") as err:
        parse(raw)
    assert message in str(err.value)
