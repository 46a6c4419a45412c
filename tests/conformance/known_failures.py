"""Upstream tests of features lychgate claims that do not pass yet: ShortName -> why.

pytest runs these as strict xfail, so a case that starts passing fails the run
until its entry is removed here.
"""

from __future__ import annotations

KNOWN_FAILURES: dict[str, str] = {
    "HTTPRouteHostnameIntersection": (
        "the listener sets strip_any_host_port, so a backend sees `Host: very.specific.com` "
        "for a request to very.specific.com:1234; upstream expects the Host header forwarded as sent"
    ),
    "HTTPRouteRedirectPortAndScheme": (
        "a redirect with neither port nor scheme drops the listener port (8080) from Location; "
        "and the same-namespace-with-https-listener Gateway needs HTTPS listeners"
    ),
    "HTTPRouteHTTPSListener": (
        "HTTPS listeners are not supported yet: routes on same-namespace-with-https-listener are "
        "not accepted (NoMatchingParent)"
    ),
    "TLSRouteListenerTerminateNotSupported": (
        "lychgate implements TLS listeners in mode Terminate (the listener is Accepted, TLSRoute in "
        "supportedKinds) but the GatewayClass does not claim TLSRouteModeTerminate, so upstream expects "
        "Accepted=False/UnsupportedValue; add TLSRouteModeTerminate and TLSRouteModeMixed to "
        "SUPPORTED_FEATURES in translate/gateway.py (all five terminate/mixed cases pass with them claimed)"
    ),
}
