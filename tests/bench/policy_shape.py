"""The Gateway shape real users have (issue 17), as manifests: hostnames shared by
path routes, a Gateway-wide TrafficPolicy and a TrafficPolicy on every 10th route.

`hosts` hostnames x PATHS PathPrefix routes each (`/`, /p1 ... /p9), one file per
hostname; with policies, a Gateway-wide TrafficPolicy (request timeout) and one
per hostname on its `/` route (a request header `x-policy: initial`). The
translation, shapes and proxies benchmarks build the same objects from here.
"""

from __future__ import annotations

from tests.bench.common import SERVICE_POOL, path_route_yaml

PATHS = 10  # path routes per hostname: a TrafficPolicy on the / route is one on every 10th route


def host(h: int) -> str:
    return f"host-{h:03d}.shapes.test"


def path(p: int) -> str:
    return "/" if p == 0 else f"/p{p}"


def route(h: int, p: int) -> str:
    """The name of path route p of hostname h."""
    return f"s-{h:03d}-{p}"


def policy_yaml(name: str, kind: str, target: str, body: str) -> str:
    return f"""\
apiVersion: gateway.lychgate.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: {kind}, name: {target}}}]
{body}"""


def header_policy_yaml(name: str, route_name: str, value: str) -> str:
    """A route's TrafficPolicy: sets the request header x-policy (the echo backend shows it)."""
    return policy_yaml(name, "HTTPRoute", route_name, f"""\
  headerModifiers:
    request:
      set: [{{name: x-policy, value: "{value}"}}]
""")


def gateway_policy_yaml(gateway: str) -> str:
    return policy_yaml(f"{gateway}-timeouts", "Gateway", gateway, "  timeouts: {request: 30s}\n")


def route_policy(h: int) -> tuple[str, str]:
    """(file, policy name) of hostname h's per-route TrafficPolicy."""
    return f"policy-{h:03d}.yaml", f"p-{h:03d}"


def files(gateway: str, hosts: int, policies: bool) -> list[tuple[str, str]]:
    """[(file name, its text)] of the shape on `gateway`; backends are svc-0 ... svc-(SERVICE_POOL - 1)."""
    out = [(f"shaped-{h:03d}.yaml", "---\n".join(
        path_route_yaml(route(h, p), gateway, host(h), path(p), f"svc-{(h * PATHS + p) % SERVICE_POOL}")
        for p in range(PATHS))) for h in range(hosts)]
    if policies:
        out.append(("policy-gateway.yaml", gateway_policy_yaml(gateway)))
        for h in range(hosts):
            file, name = route_policy(h)
            out.append((file, header_policy_yaml(name, route(h, 0), "initial")))
    return out
