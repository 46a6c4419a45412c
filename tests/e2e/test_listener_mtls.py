"""ListenerPolicy clientCertificateValidation through a real Envoy, with real TLS clients.

Listeners sharing a port each trust their own client CA (SNI picks the
listener, the listener picks the CAs); Require refuses a client without a
certificate, Optional lets it in but still refuses one from an unknown CA; a
policy whose CA cannot be loaded keeps its listener closed and says which
field, until the ConfigMap appears.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest

from tests.certs import CA
from tests.e2e.test_tls_and_streams import https_get, secret_yaml
from tests.harness import EchoBackends, Lychgate, service_yaml, wait_for

pytestmark = pytest.mark.e2e

PORT = 8443
REFUSED = "refused"


def _configmap(name: str, ca: CA) -> str:
    pem = "\n".join("    " + line for line in ca.pem.decode().splitlines())
    return f"""\
apiVersion: v1
kind: ConfigMap
metadata: {{name: {name}, namespace: default}}
data:
  ca.crt: |
{pem}
---
"""


def _policy(name: str, section: str, mode: str, configmap: str) -> str:
    return f"""\
apiVersion: gateway.lychgate.dev/v1alpha1
kind: ListenerPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: {section}}}]
  default:
    clientCertificateValidation:
      mode: {mode}
      caCertificateRefs: [{{name: {configmap}, kind: ConfigMap, group: ""}}]
---
"""


ROUTE = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
    - backendRefs: [{name: first, port: 80}]
"""


def _answer(address: str, sni: str, server_ca: CA, client: Path | None, port: int = PORT) -> int | str:
    """The status of one request, or REFUSED when the handshake (or the connection) was refused."""
    try:
        return https_get(address, sni, sni, "/", server_ca, port, client)[0]
    except (ssl.SSLError, OSError, IndexError):  # IndexError: closed before any answer
        return REFUSED


def _cond(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    return next(c for c in conditions if c["type"] == type_)


def test_listeners_on_one_port_trust_their_own_client_cas(
        lychgate: Lychgate, backends: EchoBackends, tmp_path: Path) -> None:
    server = CA("server CA")
    cert, key = server.issue("gw", ["tenant-a.example.org", "tenant-b.example.org", "optional.example.org"])
    tenant_a, tenant_b, gateway_ca = CA("tenant A CA"), CA("tenant B CA"), CA("gateway CA")
    client_a = tenant_a.write_tls_dir(tmp_path / "a", "client", ["client.tenant-a.example.org"])
    client_b = tenant_b.write_tls_dir(tmp_path / "b", "client", ["client.tenant-b.example.org"])
    client_gw = gateway_ca.write_tls_dir(tmp_path / "gw", "client", ["client.example.org"])
    stranger = CA("someone else").write_tls_dir(tmp_path / "x", "client", ["client.example.org"])
    first = backends.start("first")

    def listener(name: str) -> str:
        return (f"    - {{name: {name}, protocol: HTTPS, port: {PORT}, hostname: {name}.example.org, "
                "tls: {certificateRefs: [{name: serving}]}}\n")

    # The Gateway trusts its own CA on the port; the policies replace it on their listeners.
    lychgate.write("gw.yaml", """\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: lychgate
  tls: {frontend: {default: {validation: {caCertificateRefs: [{kind: ConfigMap, name: gateway-ca}]}}}}
  listeners:
""" + listener("tenant-a") + listener("tenant-b") + listener("optional") + "---\n"
        + secret_yaml("serving", cert, key) + "---\n" + _configmap("tenant-a-ca", tenant_a)
        + _configmap("tenant-b-ca", tenant_b) + _configmap("gateway-ca", gateway_ca))
    lychgate.write("policies.yaml", _policy("tenant-a", "tenant-a", "Require", "tenant-a-ca")
                   + _policy("tenant-b", "tenant-b", "Require", "tenant-b-ca")
                   + _policy("optional", "optional", "Optional", "tenant-a-ca"))
    lychgate.write("svc.yaml", service_yaml("first", 80, first))
    lychgate.write("route.yaml", ROUTE)
    lychgate.start()
    address = lychgate.address()

    def answer(sni: str, client: Path | None) -> int | str:
        return _answer(address, sni, server, client)

    wait_for(lambda: answer("tenant-a.example.org", client_a) == 200, 20, "tenant A's client on tenant-a")
    assert answer("tenant-b.example.org", client_a) == REFUSED  # same port, the other tenant's CA
    assert answer("tenant-b.example.org", client_b) == 200
    assert answer("tenant-a.example.org", client_b) == REFUSED
    assert answer("tenant-a.example.org", client_gw) == REFUSED  # the Gateway's CA is overridden here
    assert answer("tenant-a.example.org", None) == REFUSED  # Require: no certificate, no handshake
    # Optional: in without a certificate, or with a valid one; never with one that does not verify.
    assert answer("optional.example.org", None) == 200
    assert answer("optional.example.org", client_a) == 200
    assert answer("optional.example.org", stranger) == REFUSED
    assert answer("optional.example.org", client_b) == REFUSED

    applied = _cond(lychgate.status("ListenerPolicy", "tenant-a")["ancestors"][0]["conditions"], "Applied")
    assert (applied["status"], applied["reason"]) == ("True", "Applied")
    assert "clientCertificateValidation (listener tenant-a)" in applied["message"]


def test_a_missing_ca_keeps_its_listener_closed_until_the_configmap_exists(
        lychgate: Lychgate, backends: EchoBackends, tmp_path: Path) -> None:
    server, clients = CA("server CA"), CA("clients CA")
    cert, key = server.issue("locked.example.org", ["locked.example.org"])
    good = clients.write_tls_dir(tmp_path / "good", "client", ["client.example.org"])
    stranger = CA("someone else").write_tls_dir(tmp_path / "x", "client", ["client.example.org"])
    first = backends.start("first")
    lychgate.write("gw.yaml", f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: lychgate
  listeners:
    - {{name: http, protocol: HTTP, port: 8080}}
    - {{name: locked, protocol: HTTPS, port: {PORT}, tls: {{certificateRefs: [{{name: serving}}]}}}}
---
""" + secret_yaml("serving", cert, key))
    # Optional, and still closed: without its CA the listener could not check a certificate presented.
    lychgate.write("policy.yaml", _policy("locked", "locked", "Optional", "late-ca"))
    lychgate.write("svc.yaml", service_yaml("first", 80, first))
    lychgate.write("route.yaml", ROUTE)
    lychgate.start()
    address = lychgate.address()
    lychgate.wait_pod(address, "first")  # the HTTP listener serves

    def policy_applied() -> dict[str, Any]:
        ancestors = lychgate.status("ListenerPolicy", "locked").get("ancestors") or [{"conditions": []}]
        return next((c for c in ancestors[0]["conditions"] if c["type"] == "Applied"), {})

    applied = wait_for(lambda: policy_applied() or None, 15, "the policy's status")
    assert (applied["status"], applied["reason"]) == ("False", "InvalidCACertificateRef")
    assert "spec.default.clientCertificateValidation.caCertificateRefs[0] (ConfigMap default/late-ca): " \
           "ConfigMap not found" in applied["message"]
    locked = next(l for l in lychgate.status("Gateway", "gw")["listeners"] if l["name"] == "locked")
    accepted = _cond(locked["conditions"], "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "NoValidCACertificate")
    assert "caCertificateRefs[0]" in accepted["message"]
    assert _answer(address, "locked.example.org", server, None) == REFUSED  # not served at all

    # The ConfigMap appears: the listener opens, checking clients as the policy asks.
    lychgate.write("ca.yaml", _configmap("late-ca", clients))
    wait_for(lambda: _answer(address, "locked.example.org", server, None) == 200, 20,
             "the listener to open once its CA exists")
    assert _answer(address, "locked.example.org", server, good) == 200
    assert _answer(address, "locked.example.org", server, stranger) == REFUSED
    wait_for(lambda: policy_applied().get("status") == "True", 15, "the policy to be applied")
