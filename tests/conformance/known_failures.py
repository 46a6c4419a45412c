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
    "ListenerSetHostnameConflict": (
        "a ListenerSet listener that loses a hostname conflict is Accepted=False/HostnameConflict and "
        "Conflicted=True as expected, but Programmed=False has reason Invalid; upstream expects reason "
        "HostnameConflict (the listener status built in translate/listeners.py uses a generic reason)"
    ),
    "ListenerSetProtocolConflict": (
        "a ListenerSet listener that loses a protocol conflict is Accepted=False/ProtocolConflict and "
        "Conflicted=True as expected, but Programmed=False has reason Invalid; upstream expects reason "
        "ProtocolConflict (same place as ListenerSetHostnameConflict)"
    ),
    "ListenerSetReferenceGrant": (
        "a ListenerSet whose only listener's certificateRef is not permitted (ResolvedRefs=False/"
        "RefNotPermitted, Programmed=False) is still Accepted=True/Programmed=True; upstream expects "
        "Accepted=False and Programmed=False with reason ListenersNotValid (translate/listenersets.py "
        "set_status counts that listener as usable)"
    ),
}
