"""ir.TLSParams -> Envoy's TlsParameters, and the certificate checks of TLS options,
shared by downstream (listener) and upstream (cluster) TLS contexts."""

from __future__ import annotations

from envoy.extensions.transport_sockets.tls.v3 import common_pb2
from envoy.type.matcher.v3 import string_pb2

from lychgate import ir

_VERSIONS = {"AUTO": common_pb2.TlsParameters.TLS_AUTO, "1.0": common_pb2.TlsParameters.TLSv1_0, "1.1": common_pb2.TlsParameters.TLSv1_1,
             "1.2": common_pb2.TlsParameters.TLSv1_2, "1.3": common_pb2.TlsParameters.TLSv1_3}


def apply(params: ir.TLSParams | None, out: common_pb2.TlsParameters) -> None:
    """Set what `params` asks for on `out`; unset fields keep Envoy's defaults."""
    if params is None:
        return
    if params.min_version is not None:
        out.tls_minimum_protocol_version = _VERSIONS[params.min_version]
    if params.max_version is not None:
        out.tls_maximum_protocol_version = _VERSIONS[params.max_version]
    out.cipher_suites.extend(params.cipher_suites)
    out.ecdh_curves.extend(params.ecdh_curves)
    out.signature_algorithms.extend(params.signature_algorithms)


def verify(validation: common_pb2.CertificateValidationContext, hashes: tuple[str, ...],
           dns_names: tuple[str, ...] = ()) -> None:
    """The peer certificate's SHA-256 fingerprint must be one of `hashes`, and it must
    carry one of `dns_names` (each check only when given)."""
    validation.verify_certificate_hash.extend(hashes)
    validation.match_typed_subject_alt_names.extend(
        common_pb2.SubjectAltNameMatcher(san_type=common_pb2.SubjectAltNameMatcher.DNS,
                                         matcher=string_pb2.StringMatcher(exact=name))
        for name in dns_names)
