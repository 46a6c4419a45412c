"""TrafficPolicy and GatewayExtension: attachment, merging, features and status.

Each policy feature is one module registering a PolicyField (imported here,
in the order their settings are resolved); `attachment.PolicyIndex` applies
them to the routes translation produces and writes the policies' status.
"""

from __future__ import annotations

from lychgate.translate.policies import (  # noqa: F401  (imported to register their fields)
    acl,
    ai,
    api_key_auth,
    auto_host_rewrite,
    basic_auth,
    buffer,
    compression,
    cors,
    csrf,
    direct_response,
    ext_auth,
    ext_proc,
    fault_injection,
    header_modifiers,
    http_upgrade,
    internal_redirect,
    jwt_auth,
    oauth2,
    rate_limit,
    rbac,
    request_mirror,
    route_tracing,
    timeouts,
    transformation,
    url_rewrite,
)
from lychgate.translate.policies.attachment import INVALID_POLICY_BODY, PolicyIndex, Target

__all__ = ["INVALID_POLICY_BODY", "PolicyIndex", "Target"]
