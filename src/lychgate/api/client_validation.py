"""kgateway's per-listener client certificate validation (a ListenerPolicy's
`default.clientCertificateValidation`): which CAs a listener trusts for client
certificates, and whether a client must present one.

The shape is kgateway's `ClientCertificateValidationConfig`; what it does to a
listener, and how it meets the Gateway's `spec.tls.frontend`, is decided by
translate/listener_mtls.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lychgate.api.base import Model
from lychgate.api.gateway import ObjectRef

# Require: a client without a valid certificate is refused in the handshake.
# Optional: a client may present none; one it presents must verify (unlike the
# Gateway's AllowInsecureFallback, which lets a bad one in).
ClientCertificateValidationMode = Literal["Require", "Optional"]


class ClientCertificateValidationConfig(Model):
    mode: ClientCertificateValidationMode
    # ConfigMaps or Secrets holding PEM under `ca.crt`, trusted together.
    ca_certificate_refs: list[ObjectRef] = Field(min_length=1, max_length=8)
