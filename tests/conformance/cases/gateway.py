"""gateway conformance tests (upstream conformance/tests/gateway-*.go) not yet written as
lychgate cases: listed with their upstream ShortName, manifests and features, reported as
skipped. Replace a `pending_case` by a `@case` function to make it run."""

from __future__ import annotations

from tests.conformance.cases import pending_case
from tests.conformance.features import GATEWAY, HTTPROUTE, REFERENCE_GRANT

pending_case("GatewayHTTPListenerIsolationWithHostnameIntersection", [GATEWAY, HTTPROUTE, "GatewayHTTPListenerIsolation"], ["tests/gateway-http-listener-isolation-with-hostname-intersection.yaml"])
pending_case("GatewayHTTPListenerIsolation", [GATEWAY, HTTPROUTE, "GatewayHTTPListenerIsolation"], ["tests/gateway-http-listener-isolation.yaml"])
pending_case("GatewayInfrastructure", [GATEWAY, "GatewayInfrastructurePropagation"], ["tests/gateway-infrastructure.yaml"])
pending_case("GatewayInvalidDefaultFrontendClientCertificateValidation", [GATEWAY, "GatewayFrontendClientCertificateValidation"], ["tests/gateway-invalid-default-frontend-client-certificate-validation.yaml"])
pending_case("GatewayInvalidListenersUnsupportedProtocol", [GATEWAY], ["tests/gateway-invalid-listeners-unsupported-protocol.yaml"])
pending_case("GatewayInvalidParametersRef", [GATEWAY], ["tests/gateway-invalid-parameters-ref.yaml"])
pending_case("GatewayInvalidRouteKind", [GATEWAY], ["tests/gateway-invalid-route-kind.yaml"])
pending_case("GatewayInvalidTLSBackendConfiguration", [GATEWAY, "GatewayBackendClientCertificate"], ["tests/gateway-invalid-tls-backend-configuration.yaml"])
pending_case("GatewayInvalidTLSConfiguration", [GATEWAY], ["tests/gateway-invalid-tls-configuration.yaml"])
pending_case("GatewayModifyListeners", [GATEWAY], ["tests/gateway-modify-listeners.yaml"])
pending_case("GatewayObservedGenerationBump", [GATEWAY], ["tests/gateway-observed-generation-bump.yaml"])
pending_case("GatewayOptionalAddressValue", [GATEWAY, "GatewayAddressEmpty"], ["tests/gateway-optional-address-value.yaml"])
pending_case("GatewaySecretInvalidReferenceGrant", [GATEWAY, REFERENCE_GRANT], ["tests/gateway-secret-invalid-reference-grant.yaml"])
pending_case("GatewaySecretMissingReferenceGrant", [GATEWAY, REFERENCE_GRANT], ["tests/gateway-secret-missing-reference-grant.yaml"])
pending_case("GatewaySecretReferenceGrantAllInNamespace", [GATEWAY, REFERENCE_GRANT], ["tests/gateway-secret-reference-grant-all-in-namespace.yaml"])
pending_case("GatewaySecretReferenceGrantSpecific", [GATEWAY, REFERENCE_GRANT], ["tests/gateway-secret-reference-grant-specific.yaml"])
pending_case("GatewayStaticAddresses", [GATEWAY, "GatewayStaticAddresses"], ["tests/gateway-static-addresses.yaml"])
pending_case("GatewayTLSBackendClientCertificate", [GATEWAY, HTTPROUTE, "GatewayBackendClientCertificate"], ["tests/gateway-tls-backend-client-certificate.yaml"])
pending_case("GatewayWithAttachedRoutesWithPort8080", [GATEWAY, HTTPROUTE, "GatewayPort8080"], ["tests/gateway-with-attached-routes-with-port-8080.yaml"])
pending_case("GatewayWithAttachedRoutes", [GATEWAY, HTTPROUTE], ["tests/gateway-with-attached-routes.yaml"])
pending_case("GatewayFrontendClientCertificateValidationInsecureFallback", [GATEWAY, HTTPROUTE, "GatewayFrontendClientCertificateValidation", "GatewayFrontendClientCertificateValidationInsecureFallback"], ["tests/gateway-with-clientcertificate-validation-insecure-fallback.yaml"])
pending_case("GatewayFrontendClientCertificateValidation", [GATEWAY, HTTPROUTE, "GatewayFrontendClientCertificateValidation"], ["tests/gateway-with-clientcertificate-validation.yaml"])
pending_case("GatewayFrontendInvalidClientCertificateValidation", [GATEWAY, HTTPROUTE, "GatewayFrontendClientCertificateValidation"], ["tests/gateway-with-invalid-clientcertificate-validation.yaml"])
pending_case("GatewayClassObservedGenerationBump", [GATEWAY], ["tests/gatewayclass-observed-generation-bump.yaml"])
