"""Stand-ins, for strict validation, of the files a cluster's TLS names on the proxy.

A BackendConfigPolicy's `tls.files` names paths in the proxy's container (a
client certificate, its key, a CA bundle mounted there). `envoy --mode
validate` loads them, and on the controller's machine they are usually not
there: in Kubernetes they never are. Preflight (xds/validate.py) would then
withhold a cluster the proxy takes. A path that exists here is validated as it
is (local mode: the same machine); one that does not is replaced by a
self-signed certificate and its key, made once per validator, so what is
checked is the rest of the cluster. Whether the proxy has the file is the
proxy's to say (a NACK, reported in status).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

_UPSTREAM_TLS = tls_pb2.UpstreamTlsContext.DESCRIPTOR.full_name


class StandIns:
    """A certificate and key in `workdir`, written when first needed."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._paths: tuple[str, str] | None = None

    def paths(self) -> tuple[str, str]:
        """(certificate, key) files: a self-signed certificate, also good as a CA bundle."""
        if self._paths is None:
            # Imported here: 7 MiB of RSS a controller that never needs a stand-in does not pay.
            from cryptography import x509
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.x509.oid import NameOID

            key = ec.generate_private_key(ec.SECP256R1())
            name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lychgate preflight stand-in")])
            now = datetime.datetime.now(datetime.UTC)
            cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                    .serial_number(x509.random_serial_number())
                    .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=3650))
                    .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                    .sign(key, hashes.SHA256()))
            cert_path, key_path = self.workdir / "stand-in.crt", self.workdir / "stand-in.key"
            cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
            self._paths = (str(cert_path), str(key_path))
        return self._paths

    def cluster(self, cluster: cluster_pb2.Cluster) -> cluster_pb2.Cluster:
        """`cluster` (itself when no file is missing here) with its TLS files that do not exist stood in for."""
        sockets = [cluster.transport_socket, *(m.transport_socket for m in cluster.transport_socket_matches)]
        if not any(s.typed_config.TypeName() == _UPSTREAM_TLS and _missing(_context(s)) for s in sockets):
            return cluster
        out = cluster_pb2.Cluster()
        out.CopyFrom(cluster)
        for socket in [out.transport_socket, *(m.transport_socket for m in out.transport_socket_matches)]:
            if socket.typed_config.TypeName() != _UPSTREAM_TLS:
                continue
            context = _context(socket)
            cert, key = self.paths()
            for source, path in _sources(context, cert, key):
                if source.WhichOneof("specifier") == "filename" and not os.path.exists(source.filename):
                    source.filename = path
            socket.typed_config.Pack(context)
        return out


def _context(socket: base_pb2.TransportSocket) -> tls_pb2.UpstreamTlsContext:
    context = tls_pb2.UpstreamTlsContext()
    socket.typed_config.Unpack(context)
    return context


def _sources(context: tls_pb2.UpstreamTlsContext, cert: str, key: str) -> list[tuple[base_pb2.DataSource, str]]:
    """Each file data source of the context, with the stand-in for it."""
    common = context.common_tls_context
    out = []
    for pair in common.tls_certificates:
        out += [(pair.certificate_chain, cert), (pair.private_key, key)]
    validation = (common.combined_validation_context.default_validation_context
                  if common.HasField("combined_validation_context") else common.validation_context)
    out.append((validation.trusted_ca, cert))
    return out


def _missing(context: tls_pb2.UpstreamTlsContext) -> bool:
    return any(s.WhichOneof("specifier") == "filename" and not os.path.exists(s.filename)
               for s, _ in _sources(context, "", ""))
