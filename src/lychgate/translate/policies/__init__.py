"""TrafficPolicy and GatewayExtension: attachment, merging, features and status.

Each policy feature is one module registering a PolicyField (imported here,
in the order their settings are resolved); `attachment.PolicyIndex` applies
them to the routes translation produces and writes the policies' status.
"""

from __future__ import annotations

from lychgate.translate.policies import (  # noqa: F401  (imported to register their fields)
    acl,
    api_key_auth,
    basic_auth,
    buffer,
    cors,
    csrf,
    ext_auth,
    ext_proc,
    header_modifiers,
    jwt_auth,
    oauth2,
    rate_limit,
    rbac,
    timeouts,
    transformation,
)
from lychgate.translate.policies.attachment import INVALID_POLICY_BODY, PolicyIndex, Target

__all__ = ["INVALID_POLICY_BODY", "PolicyIndex", "Target"]
