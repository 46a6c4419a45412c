"""`gcp` Backends: a Google Cloud service (Cloud Run, Cloud Functions, anything that
checks Google-signed identity tokens) called with the identity of the proxy's
service account.

The service is `host`:443 over TLS, its SNI and Host `host`, its certificate
checked against the system CAs for that name (kgateway sends the SNI but checks
nothing). A BackendConfigPolicy `tls` on the Backend replaces that trust (its CA,
client certificate, versions); its `sni` and names default to `host` there too.

Each request routed to it carries `Authorization: Bearer <token>`, a token for
`audience` (default `https://<host>`) that Envoy's gcp_authn filter asks the GCE
metadata server for (xds/translator/gcp_authn.py). Where that server is is the
controller setting `gcp_metadata_server` (Helm `controller.gcpMetadataServer`;
default `metadata.google.internal:80`, which GCE and GKE, Workload Identity
included, answer): a test, or a cluster outside Google Cloud running its own
metadata endpoint, points it elsewhere. Without a token the request never reaches
the service: Envoy's filter lets a request through when the fetch fails, so
lychgate checks for the token in the cluster itself and answers 503.
"""

from __future__ import annotations

import dataclasses
import re

from lychgate import ir
from lychgate.api.backend import Backend

PORT = 443  # kgateway's: a GCP service is always HTTPS on 443
# The GCE metadata server, as kgateway (and Google's client libraries) reach it.
DEFAULT_METADATA_SERVER = "metadata.google.internal:80"
# A DNS name or an IPv4 address: the host is also the SNI and the Host header.
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


# Why a GCP Backend cannot be named where Envoy calls it on its own account (a JWKS or
# token fetch, an extension or collector, a mirror's copy): gcp_authn adds the token to
# routed requests only (xds/translator/gcp_authn.py), and the Backend's cluster answers
# 503 to a request without one, so the call would never reach the service.
ROUTES_ONLY = "a GCP Backend gets its identity token on routes only"


def not_here(namespace: str, name: str, use: str) -> str:
    """The message refusing GCP Backend `namespace/name` as `use` ("a mirror's backend")."""
    return f"Backend {namespace}/{name} is a GCP Backend and cannot be {use}: {ROUTES_ONLY}"


def is_gcp(cluster: ir.Cluster | None) -> bool:
    return cluster is not None and cluster.gcp_audience is not None


def problem(backend: Backend) -> str:
    """Why a `gcp` Backend cannot be served, naming the field, or ""."""
    gcp = backend.spec.gcp
    assert gcp is not None
    if not _HOST.match(gcp.host) or len(gcp.host) > 253:
        return (f"spec.gcp.host: {gcp.host!r} is not a host name such as my-service-abc123-uc.a.run.app "
                "(no scheme, path or port: the service is reached over HTTPS on port 443)")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in gcp.audience_url):
        return f"spec.gcp.audience: {gcp.audience_url!r} holds spaces or control characters"
    return ""


def cluster(backend: Backend, name: str, config: ir.BackendConfig | None, by_address: bool) -> ir.Cluster:
    """The service's cluster (`by_address`: `host` is an IP address, not resolved)."""
    gcp = backend.spec.gcp
    assert gcp is not None
    host = gcp.host
    tls: ir.UpstreamTLS | None = ir.UpstreamTLS(sni=host, ca=None, sans=(("Hostname", host),))
    if config is not None and config.tls is not None:
        # The policy's trust wins (cluster_policy.py applies it when `tls` is None); the
        # service's name stays the default SNI and the name its certificate must carry.
        tls = None
        config = dataclasses.replace(config, tls=dataclasses.replace(
            config.tls, sni=config.tls.sni or host, sans=config.tls.sans or (host,)))
    return ir.Cluster(name=name, endpoints=(ir.Endpoint(host, PORT),), discovery="static" if by_address else "dns",
                      tls=tls, config=config, gcp_audience=gcp.audience_url)


def finish(gateways: dict[str, ir.GatewayIR], metadata_server: str) -> None:
    """Gateways with GCP clusters learn where the metadata server is."""
    for ref, gw in gateways.items():
        if any(c.gcp_audience is not None for c in gw.clusters):
            gateways[ref] = dataclasses.replace(gw, gcp_metadata_server=metadata_server)
