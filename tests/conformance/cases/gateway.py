"""Gateway and GatewayClass conformance cases (upstream conformance/tests/gateway-*.go and
gatewayclass-*.go), in upstream's file order."""

from __future__ import annotations

import os
from typing import Any

from tests.conformance import manifests as mf
from tests.conformance.cases import case
from tests.conformance.conf1_support import (
    client_validation_docs,
    condition,
    expect_tls,
    expect_tls_failure,
    latest_conditions,
    listeners_are,
    listeners_have,
)
from tests.conformance.features import BACKEND_TLS_POLICY, GATEWAY, HTTPROUTE, REFERENCE_GRANT
from tests.conformance.suite import (
    INFRA,
    LISTENER_READY,
    Cond,
    Exp,
    Listener,
    Ref,
    Suite,
    check_conditions,
    ensure,
    eventually,
    send,
)

V1, V2 = "infra-backend-v1", "infra-backend-v2"
READY = (Cond("Accepted"), Cond("ResolvedRefs"))
NOT_READY = (Cond("ResolvedRefs", "False"), Cond("Accepted", "False", "NoValidCACertificate"),
             Cond("Programmed", "False"))
FRONTEND_VALIDATION = "GatewayFrontendClientCertificateValidation"
BACKEND_CLIENT_CERT = "GatewayBackendClientCertificate"


def t(name: str) -> list[str]:
    return [f"tests/{name}.yaml"]


def ip_of(address: str) -> str:
    return address.rpartition(":")[0]


def route_names(s: Suite, ref: Ref, *routes: str) -> str:
    """GatewayAndHTTPRoutesMustBeAccepted (exactly one parent entry per route, Accepted;
    listeners ready) followed by ResolvedRefs on each route."""
    address = s.routes_accepted(ref, *routes)
    for route in routes:
        s.resolved_refs(route, INFRA, ref)
    return address


def isolation_requests() -> list[Exp]:
    """Each path reaches the backend only through the listener whose hostname the Host matches."""
    listeners = {"bar.com": "/empty-hostname", "bar.example.com": "/wildcard-example-com",
                 "bar.foo.example.com": "/wildcard-foo-example-com", "abc.foo.example.com": "/abc-foo-example-com"}
    return [Exp(path, host, backend=V1) if path == own else Exp(path, host, status=404)
            for host, own in listeners.items() for path in listeners.values()]


@case("GatewayHTTPListenerIsolation", [GATEWAY, "GatewayHTTPListenerIsolation", HTTPROUTE],
      t("gateway-http-listener-isolation") + t("gateway-http-listener-isolation-with-hostname-intersection"))
def http_listener_isolation(s: Suite) -> None:
    """Listener isolation for HTTP listeners with multiple listeners and HTTPRoutes"""
    suffixes = ("empty-hostname", "wildcard-example-com", "wildcard-foo-example-com", "abc-foo-example-com")
    for gateway, route_suffix in (("http-listener-isolation", ""),
                                  ("http-listener-isolation-with-hostname-intersection", "-with-hostname-intersection")):
        address = route_names(s, Ref(gateway), *[f"attaches-to-{x}{route_suffix}" for x in suffixes])
        s.expect(address, *isolation_requests())


@case("GatewayInfrastructure", [GATEWAY, "GatewayInfrastructurePropagation"], t("gateway-infrastructure"),
      provisional=True)
def infrastructure(s: Suite) -> None:
    """Propagation of metadata from Gateway infrastructure to generated components"""
    ref = Ref("gateway-with-infrastructure-metadata")
    gw = latest_conditions(s, ref)
    condition(s, ref, Cond("Accepted"))
    infra = gw["spec"].get("infrastructure") or {}
    labels, annotations = infra.get("labels") or {}, infra.get("annotations") or {}
    found = False
    for kind in ("ServiceAccount", "Pod", "Service"):
        for obj in s.objects(kind, INFRA):
            meta = obj.get("metadata") or {}
            if (meta.get("labels") or {}).get("gateway.networking.k8s.io/gateway-name") != ref.name:
                continue
            found = True
            ensure(labels.items() <= (meta.get("labels") or {}).items(),
                   f"{kind} {meta.get('name')} labels {meta.get('labels')} lack {labels}")
            ensure(annotations.items() <= (meta.get("annotations") or {}).items(),
                   f"{kind} {meta.get('name')} annotations {meta.get('annotations')} lack {annotations}")
            break
    ensure(found, "no ServiceAccount, Pod or Service carries the gateway-name label of the Gateway")


@case("GatewayFrontendInvalidDefaultClientCertificateValidation", [GATEWAY, HTTPROUTE, FRONTEND_VALIDATION],
      t("gateway-invalid-default-frontend-client-certificate-validation"), setup=client_validation_docs)
def invalid_default_client_validation(s: Suite) -> None:
    """Invalid Gateway's default Client Certificate Validation Config should only affect HTTPS traffic"""
    ref = Ref("invalid-default-client-validation-config")
    ip = ip_of(s.gateway_address(ref))
    listeners_have(s, ref, LISTENER_READY, "http")
    s.expect(f"{ip}:80", Exp("/", "example.org", backend=V1))
    listeners_have(s, ref, (Cond("ResolvedRefs", "False", "InvalidCACertificateRef"),
                            Cond("Accepted", "False", "NoValidCACertificate"), Cond("Programmed", "False")), "https")
    expect_tls_failure(s, f"{ip}:443", Exp("/", "example.org"), None)


@case("GatewayListenerUnsupportedProtocol", [GATEWAY], t("gateway-invalid-listeners-unsupported-protocol"))
def unsupported_protocol(s: Suite) -> None:
    """A Gateway should set the Accepted condition to False with reason UnsupportedProtocol on listeners whose protocol is not supported. The Gateway itself should only be Accepted if at least one of its listeners is accepted."""
    unsupported = Listener("invalid", (), (Cond("Accepted", "False", "UnsupportedProtocol"),), 0)
    only = Ref("gateway-only-unsupported-protocols")
    latest_conditions(s, only)
    condition(s, only, Cond("Accepted", "False", "ListenersNotValid"))
    listeners_are(s, only, [unsupported])
    mixed = Ref("gateway-supported-and-unsupported-protocols")
    latest_conditions(s, mixed)
    condition(s, mixed, Cond("Accepted", "True", "ListenersNotValid"))
    listeners_are(s, mixed, [Listener("http", ("HTTPRoute",), (Cond("Accepted", "True", "Accepted"),), 0),
                             unsupported])


@case("GatewayInvalidParametersRef", [GATEWAY], t("gateway-invalid-parameters-ref"))
def invalid_parameters_ref(s: Suite) -> None:
    """A Gateway referencing an invalid or non-existent parametersRef should set the Accepted condition to False with reason InvalidParameters."""
    ref = Ref("gateway-invalid-parameters-ref")
    latest_conditions(s, ref)
    condition(s, ref, Cond("Accepted", "False", "InvalidParameters"))


@case("GatewayInvalidRouteKind", [GATEWAY], t("gateway-invalid-route-kind"))
def invalid_route_kind(s: Suite) -> None:
    """A Gateway in the gateway-conformance-infra namespace should fail to become ready an invalid Route kind is specified."""
    invalid = (Cond("ResolvedRefs", "False", "InvalidRouteKinds"),)
    listeners_are(s, Ref("gateway-only-invalid-route-kind"), [Listener("http", (), invalid, 0)])
    listeners_are(s, Ref("gateway-supported-and-invalid-route-kind"), [Listener("http", ("HTTPRoute",), invalid, 0)])


@case("GatewayInvalidTLSBackendConfiguration", [GATEWAY, BACKEND_CLIENT_CERT, HTTPROUTE, BACKEND_TLS_POLICY],
      t("gateway-invalid-tls-backend-configuration"))
def invalid_tls_backend_configuration(s: Suite) -> None:
    """A Gateway should have ResolvedRefs condition set false if the Gateway has an invalid backend TLS configuration"""
    for name, reason in (("gateway-client-certificate-nonexistent-secret", "InvalidClientCertificateRef"),
                         ("gateway-client-certificate-unsupported-group", "InvalidClientCertificateRef"),
                         ("gateway-client-certificate-unsupported-kind", "InvalidClientCertificateRef"),
                         ("gateway-client-certificate-malformed-secret", "InvalidClientCertificateRef"),
                         ("gateway-client-certificate-missing-reference-grant", "RefNotPermitted")):
        ref = Ref(name)
        latest_conditions(s, ref)
        condition(s, ref, Cond("ResolvedRefs", "False", reason))
        condition(s, ref, Cond("Accepted", "True", "Accepted"))


@case("GatewayInvalidTLSConfiguration", [GATEWAY], t("gateway-invalid-tls-configuration"))
def invalid_tls_configuration(s: Suite) -> None:
    """A Gateway should fail to become ready if the Gateway has an invalid TLS configuration"""
    expected = [Listener("https", ("HTTPRoute",), (Cond("ResolvedRefs", "False", "InvalidCertificateRef"),), 0)]
    for name in ("gateway-certificate-nonexistent-secret", "gateway-certificate-unsupported-group",
                 "gateway-certificate-unsupported-kind", "gateway-certificate-malformed-secret"):
        listeners_are(s, Ref(name), expected)


@case("GatewayModifyListeners", [GATEWAY], t("gateway-modify-listeners"))
def modify_listeners(s: Suite) -> None:
    """A Gateway in the gateway-conformance-infra namespace should handle adding and removing listeners."""
    file = "case-GatewayModifyListeners"
    add = Ref("gateway-add-listener")
    before = latest_conditions(s, add)["metadata"]["generation"]

    def add_listener(doc: dict[str, Any]) -> None:
        doc["spec"]["listeners"].append({"name": "http", "port": 80, "protocol": "HTTP", "hostname": "data.test.com",
                                         "allowedRoutes": {"namespaces": {"from": "All"}}})

    s.mutate(file, "Gateway", add.name, INFRA, add_listener)
    listeners_are(s, add, [Listener("https", ("HTTPRoute",), READY, 1), Listener("http", ("HTTPRoute",), READY, 1)])
    ensure(latest_conditions(s, add)["metadata"]["generation"] != before, "generation should change after an update")

    remove = Ref("gateway-remove-listener")
    before = latest_conditions(s, remove)["metadata"]["generation"]

    def remove_https(doc: dict[str, Any]) -> None:
        ensure(len(doc["spec"]["listeners"]) == 2, "the gateway must have 2 listeners")
        doc["spec"]["listeners"] = [x for x in doc["spec"]["listeners"] if x["name"] == "http"]

    s.mutate(file, "Gateway", remove.name, INFRA, remove_https)
    listeners_are(s, remove, [Listener("http", ("HTTPRoute",), READY, 1)])
    ensure(latest_conditions(s, remove)["metadata"]["generation"] != before, "generation should change after an update")


@case("GatewayObservedGenerationBump", [GATEWAY], t("gateway-observed-generation-bump"))
def observed_generation_bump(s: Suite) -> None:
    """A Gateway in the gateway-conformance-infra namespace should update the observedGeneration in all of its Status.Conditions after an update to the spec"""
    ref = Ref("gateway-observed-generation-bump")
    before = latest_conditions(s, ref)["metadata"]["generation"]

    def add_listener(doc: dict[str, Any]) -> None:
        doc["spec"]["listeners"].append({"name": "alternate", "hostname": "foo.com", "port": 80, "protocol": "HTTP",
                                         "allowedRoutes": {"namespaces": {"from": "All"}}})

    s.mutate("case-GatewayObservedGenerationBump", "Gateway", ref.name, INFRA, add_listener)
    eventually(lambda: ensure(s.get("Gateway", ref.name)["metadata"]["generation"] != before,
                              "generation did not change"), "the Gateway's generation to change")
    latest_conditions(s, ref)


@case("GatewayOptionalAddressValue", [GATEWAY, "GatewayAddressEmpty"], t("gateway-optional-address-value"),
      provisional=True)
def optional_address_value(s: Suite) -> None:
    """Check Gateway Support for GatewayAddressEmpty feature"""
    ref = Ref("gateway-without-address-value", sections=("http",))
    latest_conditions(s, ref)
    s.gateway_address(ref)


@case("GatewaySecretInvalidReferenceGrant", [GATEWAY, REFERENCE_GRANT], t("gateway-secret-invalid-reference-grant"))
def secret_invalid_reference_grant(s: Suite) -> None:
    """A Gateway in the gateway-conformance-infra namespace should fail to become ready if the Gateway has a certificateRef for a Secret in the gateway-conformance-web-backend namespace and a ReferenceGrant exists but does not grant permission to that specific Secret"""
    listeners_are(s, Ref("gateway-secret-invalid-reference-grant"),
                  [Listener("https", ("HTTPRoute",), (Cond("ResolvedRefs", "False", "RefNotPermitted"),))])


@case("GatewaySecretMissingReferenceGrant", [GATEWAY, REFERENCE_GRANT], t("gateway-secret-missing-reference-grant"))
def secret_missing_reference_grant(s: Suite) -> None:
    """A Gateway in the gateway-conformance-infra namespace should fail to become programmed if the Gateway has a certificateRef for a Secret in the gateway-conformance-web-backend namespace and a ReferenceGrant granting permission to the Secret does not exist, regardless of whether the Secret exists"""
    listeners_are(s, Ref("gateway-secret-missing-reference-grant"),
                  [Listener("https", ("HTTPRoute",), (Cond("ResolvedRefs", "False", "RefNotPermitted"),), 0)])


GRANTED = (Cond("Programmed", "True", "Programmed"), Cond("ResolvedRefs"))


@case("GatewaySecretReferenceGrantAllInNamespace", [GATEWAY, REFERENCE_GRANT],
      t("gateway-secret-reference-grant-all-in-namespace"))
def secret_reference_grant_all_in_namespace(s: Suite) -> None:
    """A Gateway in the gateway-conformance-infra namespace should become programmed if the Gateway has a certificateRef for a Secret in the gateway-conformance-web-backend namespace and a ReferenceGrant granting permission to all Secrets in the namespace exists"""
    listeners_are(s, Ref("gateway-secret-reference-grant-all-in-namespace"),
                  [Listener("https", ("HTTPRoute",), GRANTED, 0)])


@case("GatewaySecretReferenceGrantSpecific", [GATEWAY, REFERENCE_GRANT], t("gateway-secret-reference-grant-specific"))
def secret_reference_grant_specific(s: Suite) -> None:
    """A Gateway in the gateway-conformance-infra namespace should become programmed if the Gateway has a certificateRef for a Secret in the gateway-conformance-web-backend namespace and a ReferenceGrant granting permission to the specific Secret exists"""
    listeners_are(s, Ref("gateway-secret-reference-grant-specific"), [Listener("https", ("HTTPRoute",), GRANTED, 0)])


# Addresses upstream asks the implementation for (suite.UsableNetworkAddresses and
# UnusableNetworkAddresses): a loopback address of this run's range, and a documentation one.
USABLE_ADDRESS = os.environ.get("LYCHGATE_LOCAL_ADDRESS_BASE", "127.0.0.1")
UNUSABLE_ADDRESS = "192.0.2.1"


def static_addresses_docs(s: Suite) -> list[dict[str, Any]]:
    docs = mf.load("tests/gateway-static-addresses.yaml")
    for doc in docs:
        for addr in doc["spec"].get("addresses") or []:
            if addr.get("value") in ("PLACEHOLDER_USABLE_ADDRS", "PLACEHOLDER_UNUSABLE_ADDRS"):
                usable = addr["value"] == "PLACEHOLDER_USABLE_ADDRS"
                addr.update(type="IPAddress", value=USABLE_ADDRESS if usable else UNUSABLE_ADDRESS)
    return docs


@case("GatewayStaticAddresses", [GATEWAY, "GatewayStaticAddresses"], setup=static_addresses_docs)
def static_addresses(s: Suite) -> None:
    """A Gateway in the gateway-conformance-infra namespace should be able to use previously determined addresses."""
    ref, file = Ref("gateway-static-addresses"), "case-GatewayStaticAddresses"
    gw = latest_conditions(s, ref)
    addresses = gw["spec"].get("addresses") or []
    ensure(len(addresses) == 3, f"expected 3 addresses on the Gateway, got {len(addresses)}")
    invalid, unusable, usable = addresses
    condition(s, ref, Cond("Accepted", "False", "UnsupportedAddress"))

    def drop(value: str) -> Any:
        def change(doc: dict[str, Any]) -> None:
            doc["spec"]["addresses"] = [a for a in doc["spec"]["addresses"] if a.get("value") != value]
        return change

    s.mutate(file, "Gateway", ref.name, INFRA, drop(invalid["value"]))
    latest_conditions(s, ref)
    condition(s, ref, Cond("Accepted", "True", "Accepted"))
    condition(s, ref, Cond("Programmed", "False", "AddressNotUsable"))
    s.mutate(file, "Gateway", ref.name, INFRA, drop(unusable["value"]))
    latest_conditions(s, ref)
    condition(s, ref, Cond("Accepted", "True", "Accepted"))
    condition(s, ref, Cond("Programmed", "True", "Programmed"))
    listeners_are(s, ref, [Listener("http", ("HTTPRoute",), READY, 0)])
    status = s.get("Gateway", ref.name).get("status") or {}
    got = [(a.get("type"), a.get("value")) for a in status.get("addresses") or []]
    ensure(got == [(usable.get("type", "IPAddress"), usable["value"])],
           f"status addresses {got}, want only the usable static address {usable['value']}")


def policy_accepted(s: Suite, name: str, ancestor: Ref) -> None:
    """Upstream's BackendTLSPolicyMustHaveAcceptedConditionTrue."""
    def check() -> None:
        policy = s.get("BackendTLSPolicy", name)
        entries = [a for a in (policy.get("status") or {}).get("ancestors") or []
                   if (a.get("ancestorRef") or {}).get("name") == ancestor.name]
        ensure(bool(entries), f"BackendTLSPolicy {name} has no ancestor status for {ancestor.name}")
        check_conditions(f"BackendTLSPolicy {name}", entries[0].get("conditions") or [],
                         [Cond("Accepted", "True", "Accepted")], policy["metadata"].get("generation"))
    eventually(check, f"BackendTLSPolicy {name} to be accepted for {ancestor.name}")


def backend_client_cert_docs(s: Suite) -> list[dict[str, Any]]:
    """The client certificate the Gateway presents, and the CA the TLS backend trusts it with."""
    pair = s.certs.issue(INFRA, "tls-checks-client-certificate", ["gateway.example.com"])
    return [pair, mf.ca_configmap(INFRA, "tls-checks-ca-certificate", s.certs.ca.pem)]


@case("GatewayBackendClientCertificateFeature", [GATEWAY, BACKEND_CLIENT_CERT, HTTPROUTE, BACKEND_TLS_POLICY],
      t("gateway-tls-backend-client-certificate"), setup=backend_client_cert_docs)
def backend_client_certificate(s: Suite) -> None:
    """A Gateway with a client certificate configured should present the certificate when connecting to a backend using TLS."""
    name = "gateway-tls-backend-client-certificate"
    ref = Ref(name)
    address = route_names(s, ref, name)
    policy_accepted(s, "gateway-tls-backend-client-certificate-test", ref)
    condition(s, ref, Cond("ResolvedRefs", "True", "ResolvedRefs"))
    expected_cert = s.certs.issued[(INFRA, "tls-checks-client-certificate")][0].decode()

    def presented() -> None:
        answer = send(address, Exp("/", "abc.example.com"), s.certs.ca.pem)
        ensure(answer.status == 200, f"status {answer.status}, want 200")
        peers = (((answer.json() or {}).get("tls") or {}).get("peerCertificates")) or []
        ensure(peers[:1] == [expected_cert], f"the backend saw client certificates {peers}, want the configured one")
    eventually(presented, "the backend to see the Gateway's client certificate")


@case("GatewayWithAttachedRoutes", [GATEWAY, HTTPROUTE], t("gateway-with-attached-routes"))
def with_attached_routes(s: Suite) -> None:
    """A Gateway in the gateway-conformance-infra namespace should be attached to routes."""
    listeners_are(s, Ref("gateway-with-one-attached-route"), [Listener("http", ("HTTPRoute",), READY, 1)])
    listeners_are(s, Ref("gateway-with-two-attached-routes"), [Listener("http", ("HTTPRoute",), READY, 2)])
    unresolved = Ref("unresolved-gateway-with-one-attached-unresolved-route")
    listeners_are(s, unresolved, [Listener("tls", ("HTTPRoute",),
                                           (Cond("Programmed", "False"), Cond("ResolvedRefs", "False")), 1)])
    s.route_condition("HTTPRoute", "http-route-4", INFRA, unresolved, Cond("ResolvedRefs", "False"))


@case("GatewayWithAttachedRoutesWithPort8080", [GATEWAY, "GatewayPort8080", HTTPROUTE],
      t("gateway-with-attached-routes-with-port-8080"))
def with_attached_routes_port_8080(s: Suite) -> None:
    """A Gateway in the gateway-conformance-infra namespace should be attached to routes."""
    listeners_are(s, Ref("gateway-with-two-listeners-and-one-attached-route"),
                  [Listener("http-unattached", ("HTTPRoute",), READY, 0), Listener("http", ("HTTPRoute",), READY, 1)])


@case("GatewayFrontendClientCertificateValidationInsecureFallback",
      [GATEWAY, HTTPROUTE, FRONTEND_VALIDATION, "GatewayFrontendClientCertificateValidationInsecureFallback"],
      t("gateway-with-clientcertificate-validation-insecure-fallback"), setup=client_validation_docs)
def client_validation_insecure_fallback(s: Suite) -> None:
    """Gateway's client certificate validation set to AllowInsecureFallback allows any HTTPS traffic."""
    ref = Ref("client-validation-insecure-fallback")
    routes = ("client-cert-validation-insecure-fallback-test", "client-cert-validation-insecure-fallback-test-no-hostname")
    ip = ip_of(route_names(s, ref, *routes))
    condition(s, ref, Cond("InsecureFrontendValidationMode", "True", "ConfigurationChanged"))
    default = s.certs.issued[(INFRA, "tls-validity-checks-client-certificate")]
    per_port = s.certs.issued[(INFRA, "tls-validity-checks-per-port-client-certificate")]
    for port, host, backend in (("443", "example.org", V1), ("8443", "second-example.org", V2)):
        for client in (default, per_port, None):
            expect_tls(s, f"{ip}:{port}", Exp("/", host, backend=backend), client)


@case("GatewayFrontendClientCertificateValidation", [GATEWAY, HTTPROUTE, FRONTEND_VALIDATION],
      t("gateway-with-clientcertificate-validation"), setup=client_validation_docs)
def client_validation(s: Suite) -> None:
    """Gateway's Client Certificate Validation Config should be used for HTTPS traffic"""
    ref = Ref("client-validation-default")
    ip = ip_of(route_names(s, ref, "client-certificate-validation-https-test"))
    default = s.certs.issued[(INFRA, "tls-validity-checks-client-certificate")]
    per_port = s.certs.issued[(INFRA, "tls-validity-checks-per-port-client-certificate")]
    # Each listener trusts only its own CA: the default one on 443, the per-port one on 8443.
    expect_tls(s, f"{ip}:443", Exp("/", "example.org", backend=V1), default)
    expect_tls_failure(s, f"{ip}:8443", Exp("/", "second-example.org"), default)
    expect_tls(s, f"{ip}:8443", Exp("/", "second-example.org", backend=V2), per_port)
    expect_tls_failure(s, f"{ip}:443", Exp("/", "example.org"), per_port)


@case("GatewayInvalidFrontendClientCertificateValidation",
      [GATEWAY, HTTPROUTE, REFERENCE_GRANT, FRONTEND_VALIDATION],
      t("gateway-with-invalid-clientcertificate-validation"), setup=client_validation_docs)
def invalid_client_validation(s: Suite) -> None:
    """Gateway's should reject invalid Client Certificate Validation Config"""
    ref = Ref("gateway-with-invalid-client-cert-validation")
    listeners_have(s, ref, LISTENER_READY, "https")
    for listener, reason in (("https-unresolved", "InvalidCACertificateRef"),
                             ("https-invalid-kind", "InvalidCACertificateKind"),
                             ("https-grant-missing", "RefNotPermitted")):
        listeners_have(s, ref, (Cond("ResolvedRefs", "False", reason), *NOT_READY[1:]), listener)


def gatewayclass_docs(s: Suite) -> list[dict[str, Any]]:
    """The manifest names our controller, which upstream fills in at apply time."""
    docs = mf.load("tests/gatewayclass-observed-generation-bump.yaml")
    for doc in docs:
        doc["spec"]["controllerName"] = s.controller
    return docs


@case("GatewayClassObservedGenerationBump", [GATEWAY], setup=gatewayclass_docs)
def gatewayclass_observed_generation_bump(s: Suite) -> None:
    """A GatewayClass should update the observedGeneration in all of it's Status.Conditions after an update to the spec"""
    ref = Ref("gatewayclass-observed-generation-bump", "", kind="GatewayClass")
    before = latest_conditions(s, ref)["metadata"]["generation"]

    def describe(doc: dict[str, Any]) -> None:
        doc["spec"]["description"] = "new"

    s.mutate("case-GatewayClassObservedGenerationBump", "GatewayClass", ref.name, "", describe)
    eventually(lambda: ensure(s.get("GatewayClass", ref.name, "")["metadata"]["generation"] != before,
                              "generation did not change"), "the GatewayClass generation to change")
    latest_conditions(s, ref)

