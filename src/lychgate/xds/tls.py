"""xDS over TLS (spec §5.1): server credentials and what proxies need to verify them.

The certificate material is the `lychgate-xds-cert` Secret (`tls.crt`,
`tls.key`, `ca.crt`) mounted as a directory in Kubernetes, or any directory
with those three files locally.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from lychgate.deploy.bootstrap import XdsTarget

FILES = ("tls.crt", "tls.key", "ca.crt")


def check_dir(directory: Path) -> None:
    missing = [f for f in FILES if not (directory / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"xDS TLS is enabled but {directory} lacks {', '.join(missing)}; in Kubernetes create the "
            "Secret lychgate-xds-cert (type kubernetes.io/tls) with tls.crt, tls.key and ca.crt"
        )


def server_credentials(directory: Path, require_client_cert: bool) -> grpc.ServerCredentials:
    check_dir(directory)
    key = (directory / "tls.key").read_bytes()
    cert = (directory / "tls.crt").read_bytes()
    ca = (directory / "ca.crt").read_bytes()
    return grpc.ssl_server_credentials(
        [(key, cert)],
        root_certificates=ca if require_client_cert else None,
        require_client_auth=require_client_cert,
    )


def proxy_target(host: str, port: int, directory: Path, client_cert: bool) -> XdsTarget:
    """How a proxy dials a TLS xDS server: trust ca.crt, and show a certificate if asked."""
    return XdsTarget(
        host, port, ca_file=directory / "ca.crt",
        cert_file=directory / "tls.crt" if client_cert else None,
        key_file=directory / "tls.key" if client_cert else None,
    )
