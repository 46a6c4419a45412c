"""Where this runner judges differently from the upstream Go suite (gateway-api v1.6.1),
and why: written into docs/conformance.md by report.py.

Each entry: (what, how it differs, why). Keep it true: when a case or a helper changes,
change its entry here.
"""

from __future__ import annotations

STRICTER: list[tuple[str, str, str]] = [
    ("Response headers", "`Headers`, `ValidHeaderValues` and `AbsentHeaders` are checked on every "
     "status; upstream's `CompareRoundTrip` checks them on a 200 only",
     "a 204 or 403 preflight with a stray `access-control-allow-origin` should fail too"),
    ("Timeout statuses", "a 408/504 passes only when that status is listed; upstream accepts any timeout "
     "status when any expected status is one", "lychgate answers the status the route asks for"),
    ("Route parents", "a route accepted by one Gateway must have exactly one `status.parents` entry per "
     "expected (Gateway, section), written by lychgate, Accepted, of the route's latest generation; a route "
     "with several parents has each checked (HTTPRouteMultipleGateways lists both, the ListenerSet cases "
     "check each parent)", "upstream calls `GatewayAndRoutesMustBeAccepted` on routes that have further "
     "parents (ListenerSetHTTPRouting), so it cannot count the entries"),
    ("Time limits", "conditions must hold within 20 s and traffic must settle within 15 s (50 ms polls); "
     "upstream allows minutes for conditions and `MaxTimeToConsistency` (30 s) for traffic",
     "a local control plane settles in well under a second; shorter bounds only make a slow one fail"),
]

LOOSER_OR_DIFFERENT: list[tuple[str, str, str]] = [
    ("Backends", "echo backends are local processes standing in for the suite's Deployments: a pod is "
     "`<deployment>-<suffix>`, its namespace the manifest's; they answer with echo-basic's JSON fields "
     "(`path`, `host`, `method`, `headers`, `namespace`, `pod`, `tls`)",
     "local mode runs no Pods; the fields the Go suite reads are the same"),
    ("Mirrored requests", "counted from the echo pods' in-process request log since a mark; upstream reads "
     "the mirror backends' pod logs since a time", "there are no pod logs locally; both count requests "
     "the mirror received after the test started"),
    ("Refused TLS", "`MakeTLSRequestAndExpectEventuallyConnectionReset`: any failed handshake or closed "
     "connection counts as refused, three times in a row",
     "Envoy closes the connection of an unmatched SNI; the runner does not tell a reset from a close"),
    ("GatewayInfrastructurePropagation", "skipped (not claimed)",
     "local mode deploys no Services or Pods to carry the labels; tests/kube checks them in Kubernetes mode"),
    ("Mesh profile", "listed, never run", "lychgate does not claim the mesh profile"),
    ("Upstream sources read", "the shared checks follow upstream's `CompareRoundTrip`, `CaptureRoundTrip`, "
     "`AwaitConvergence`, `MakeRequestAndExpectFailure`, `GatewayAndRoutesMustBeAccepted`, "
     "`GatewayMustHaveZeroRoutes`, `RouteMustHaveNoAcceptedParents`, gRPC's `compareResponse` (the method "
     "the backend served), TCP's `WaitForValidTCPResponse` and `weight.TestWeightedDistribution`; "
     "each case was written from the Go test of its ShortName, and the CORS, multiple-Gateways, h2c, "
     "WebSocket and percentage-mirror cases were re-read against it",
     "where a helper's v1.6.1 text was not at hand, the newest version read was followed and the "
     "stricter reading taken; cases not re-read may still hold a looser check than their Go test"),
]


def markdown() -> list[str]:
    lines = ["## How this runner differs from the Go suite", "",
             "Every case makes the Go test's requests and status checks; a round trip is judged as "
             "upstream's `CompareRoundTrip` judges it (on a 200, the request the echo backend saw must be "
             "the expected one: path, method, namespace, host and headers; an answer that is not "
             "`application/json` captures only the method, so an expected empty path means the gateway "
             "must answer itself, as for CORS preflights).", "",
             "Stricter than upstream:", "", "| what | here | why |", "|---|---|---|"]
    lines += [f"| {what} | {how} | {why} |" for what, how, why in STRICTER]
    lines += ["", "Looser than upstream, or different, and why:", "", "| what | here | why |", "|---|---|---|"]
    lines += [f"| {what} | {how} | {why} |" for what, how, why in LOOSER_OR_DIFFERENT]
    return [*lines, ""]
