"""backendtlspolicy conformance tests (upstream conformance/tests/backendtlspolicy-*.go) not yet written as
lychgate cases: listed with their upstream ShortName, manifests and features, reported as
skipped. Replace a `pending_case` by a `@case` function to make it run."""

from __future__ import annotations

from tests.conformance.cases import pending_case
from tests.conformance.features import BACKEND_TLS_POLICY, GATEWAY, HTTPROUTE

pending_case("BackendTLSPolicyConflictResolution", [GATEWAY, HTTPROUTE, BACKEND_TLS_POLICY], ["tests/backendtlspolicy-conflict-resolution.yaml"])
pending_case("BackendTLSPolicyInvalidCACertificateRef", [GATEWAY, HTTPROUTE, BACKEND_TLS_POLICY], ["tests/backendtlspolicy-invalid-ca-certificate-ref.yaml"])
pending_case("BackendTLSPolicyInvalidKind", [GATEWAY, HTTPROUTE, BACKEND_TLS_POLICY], ["tests/backendtlspolicy-invalid-kind.yaml"])
pending_case("BackendTLSPolicyObservedGenerationBump", [GATEWAY, HTTPROUTE, BACKEND_TLS_POLICY], ["tests/backendtlspolicy-observed-generation-bump.yaml"])
pending_case("BackendTLSPolicySAN", [GATEWAY, HTTPROUTE, BACKEND_TLS_POLICY, "BackendTLSPolicySANValidation"], ["tests/backendtlspolicy-san.yaml"])
pending_case("BackendTLSPolicy", [GATEWAY, HTTPROUTE, BACKEND_TLS_POLICY], ["tests/backendtlspolicy.yaml"])
