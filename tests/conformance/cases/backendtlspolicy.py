"""BackendTLSPolicy conformance cases (upstream conformance/tests/backendtlspolicy*.go).

The tls-backend pods serve a certificate for abc.example.com, other.example.com and
spiffe://abc.example.com/test-identity signed by the run's CA, which the ConfigMap
tls-checks-ca-certificate holds; mismatch-ca-certificate holds an unrelated CA. The
Go suite creates both at setup; here each case's `setup` does (conf3_support).
"""

from __future__ import annotations

from typing import Any

from tests.conformance.cases import case
from tests.conformance.conf3_support import (
    backend_sni,
    backend_tls_setup,
    expect_consistently,
    expect_failure,
    policy_condition,
    policy_latest,
)
from tests.conformance.features import BACKEND_TLS_POLICY, GATEWAY, HTTPROUTE
from tests.conformance.suite import (
    INFRA,
    Answer,
    Cond,
    Exp,
    Ref,
    Suite,
    compare,
    ensure,
    eventually,
)

FEATURES = [GATEWAY, HTTPROUTE, BACKEND_TLS_POLICY]
SAME = Ref("same-namespace")
GW = SAME.name
HOST = "abc.example.com"
ACCEPTED = Cond("Accepted", "True", "Accepted")
RESOLVED = Cond("ResolvedRefs", "True", "ResolvedRefs")
CONFLICTED = Cond("Accepted", "False", "Conflicted")
NO_VALID_CA = Cond("Accepted", "False", "NoValidCACertificate")


def t(name: str) -> list[str]:
    return [f"tests/{name}.yaml"]


def accepted(s: Suite, route: str, ref: Ref = SAME, resolved: bool = True) -> str:
    """Upstream's GatewayAndRoutesMustBeAccepted (+ HTTPRouteMustHaveResolvedRefsConditionsTrue)."""
    address = s.routes_accepted(ref, route)
    if resolved:
        s.resolved_refs(route, INFRA, ref)
    return address


def expect_tls_backend(s: Suite, address: str, exp: Exp, sni: str) -> None:
    """A 200 from the tls-backend, reached over TLS with this SNI."""
    check_sni = backend_sni(sni)

    def check(answer: Answer) -> None:
        compare(exp, answer, address)
        check_sni(answer)

    expect_consistently(s, address, exp, check)


@case("BackendTLSPolicyConflictResolution", FEATURES, t("backendtlspolicy-conflict-resolution"),
      setup=backend_tls_setup)
def conflict_resolution(s: Suite) -> None:
    """Verifies that when multiple BackendTLSPolicies target the same Service, only one policy is accepted while conflicting policies are rejected, and traffic continues to route successfully."""
    address = accepted(s, "backendtlspolicy-conflict-resolution")
    for first, second, path in [
        ("conflicted-without-section-name-1", "conflicted-without-section-name-2",
         "/backendtlspolicy-conflicted-without-section-name"),
        ("conflicted-with-section-name-1", "conflicted-with-section-name-2",
         "/backendtlspolicy-conflicted-with-section-name"),
    ]:
        policy_condition(s, first, GW, ACCEPTED)
        policy_condition(s, second, GW, CONFLICTED)
        # The accepted (older) policy asks for other.example.com.
        expect_tls_backend(s, address, Exp(path, HOST), "other.example.com")
    policy_condition(s, "not-conflicted-with-section-name", GW, ACCEPTED)
    policy_condition(s, "not-conflicted-without-section-name", GW, ACCEPTED)
    # Port https-1 has its own policy (other.example.com); https-2 only the Service-wide one.
    expect_tls_backend(s, address, Exp("/backendtlspolicy-not-conflicted-with-section-name", HOST),
                       "other.example.com")
    expect_tls_backend(s, address, Exp("/backendtlspolicy-not-conflicted-without-section-name", HOST), HOST)


@case("BackendTLSPolicyInvalidCACertificateRef", FEATURES, t("backendtlspolicy-invalid-ca-certificate-ref"),
      setup=backend_tls_setup)
def invalid_ca_certificate_ref(s: Suite) -> None:
    """A BackendTLSPolicy that specifies a single invalid CACertificateRef should have the Accepted and ResolvedRefs status condition set False with appropriate reasons, and HTTP requests to a backend targeted by this policy should fail with a 5xx response."""
    address = accepted(s, "backendtlspolicy-invalid-ca-certificate-ref", resolved=False)
    for policy in ("nonexistent-ca-certificate-ref", "malformed-ca-certificate-ref"):
        policy_condition(s, policy, GW, NO_VALID_CA)
        policy_condition(s, policy, GW, Cond("ResolvedRefs", "False", "InvalidCACertificateRef"))
        s.expect(address, Exp(f"/backendtlspolicy-{policy}", HOST, status=(500, 502, 503)))


@case("BackendTLSPolicyInvalidKind", FEATURES, t("backendtlspolicy-invalid-kind"), setup=backend_tls_setup)
def invalid_kind(s: Suite) -> None:
    """A BackendTLSPolicy that specifies a single CACertificateRef with an invalid kind should have the Accepted and ResolvedRefs status condition set False with appropriate reasons, and HTTP requests to a backend targeted by this policy should fail with a 5xx response."""
    address = accepted(s, "backendtlspolicy-invalid-kind-test", resolved=False)
    policy_condition(s, "invalid-kind", GW, NO_VALID_CA)
    policy_condition(s, "invalid-kind", GW, Cond("ResolvedRefs", "False", "InvalidKind"))
    s.expect(address, Exp("/backendtlspolicy-invalid-kind", HOST, status=(500, 502, 503)))


@case("BackendTLSPolicyObservedGenerationBump", FEATURES, t("backendtlspolicy-observed-generation-bump"),
      setup=backend_tls_setup)
def observed_generation_bump(s: Suite) -> None:
    """A BackendTLSPolicy in the gateway-conformance-infra namespace should update the observedGeneration in all of its Status.Conditions after an update to the spec"""
    name = "observed-generation-bump"
    # Upstream reads the policy once its status exists (the suite waits for the manifests).
    eventually(lambda: policy_condition(s, name, GW, Cond("Accepted", "True")), f"BackendTLSPolicy {name} status")
    original = policy_latest(s, name)

    def new_hostname(doc: dict[str, Any]) -> None:
        doc["spec"]["validation"]["hostname"] = "foo.example.com"

    before = original["metadata"].get("generation")
    s.mutate("case-BackendTLSPolicyObservedGenerationBump", "BackendTLSPolicy", name, INFRA, new_hostname)
    # A patch bumps the generation at once in a cluster; a rewritten file is read shortly after.
    eventually(lambda: ensure(s.get("BackendTLSPolicy", name)["metadata"].get("generation") != before,
                              "generation should change after an update"), f"BackendTLSPolicy {name} to be updated")
    policy_condition(s, name, GW, Cond("Accepted", "True"))
    policy_latest(s, name)


@case("BackendTLSPolicySANValidation", [*FEATURES, "BackendTLSPolicySANValidation"], t("backendtlspolicy-san"),
      setup=backend_tls_setup)
def san_validation(s: Suite) -> None:
    """BackendTLSPolicySANValidation extend BackendTLSPolicy with SubjectAltNames validation"""
    address = accepted(s, "backendtlspolicy-san-test")
    for policy, path, ok in [
        ("san-dns", "/backendtlspolicy-san-dns", True),
        ("san-dns-mismatch", "/backendtlspolicy-san-dns-mismatch", False),
        ("san-uri", "/backendtlspolicy-san-uri", True),
        ("san-uri-mismatch", "/backendtlspolicy-san-uri-mismatch", False),
        ("multiple-sans", "/backendtlspolicy-multiple-sans", True),
        ("multiple-mismatch-sans", "/backendtlspolicy-multiple-mismatch-sans", False),
    ]:
        policy_condition(s, policy, GW, ACCEPTED)
        if ok:
            expect_tls_backend(s, address, Exp(path, HOST), HOST)
        else:
            expect_failure(s, address, Exp(path, HOST))


@case("BackendTLSPolicy", FEATURES, t("backendtlspolicy"), setup=backend_tls_setup)
def backend_tls_policy(s: Suite) -> None:
    """BackendTLSPolicy must be used to configure TLS connection between gateway and backend"""
    https = Ref("same-namespace-with-https-listener")
    address = accepted(s, "backendtlspolicy-reencrypt", https)
    for cond in (ACCEPTED, RESOLVED):
        policy_condition(s, "normative-test", https.name, cond)
    # Re-encrypt: HTTPS to the gateway, TLS again (SNI abc.example.com) to the backend.
    expect_tls_backend(s, address, Exp("/backendtlspolicy", "https-listener.org", scheme="https"), HOST)

    address = accepted(s, "backendtlspolicy")
    for cond in (ACCEPTED, RESOLVED):
        policy_condition(s, "normative-test", GW, cond)
    expect_tls_backend(s, address, Exp("/backendtlspolicy", HOST), HOST)
    for policy, exp in [
        ("host-mismatch", Exp("/backendtlspolicy-host-mismatch", "abc.example.org")),
        ("cert-mismatch", Exp("/backendtlspolicy-cert-mismatch", HOST)),
    ]:
        for cond in (ACCEPTED, RESOLVED):
            policy_condition(s, policy, GW, cond)
        expect_failure(s, address, exp)
