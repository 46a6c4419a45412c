"""Route delegation the way platform teams run it (issue 29), as manifests: one parent
HTTPRoute on the Gateway hands a path prefix to each application team's namespace,
where the team's own HTTPRoutes (no parentRefs, no hostnames) serve paths under it.

TEAMS teams x `per_team` child routes: the parent `platform` (namespace default,
hostname HOST) delegates PathPrefix /team-NN to every HTTPRoute of namespace
team-NN (`name: "*"`); team NN's child route j serves PathPrefix /team-NN/rJJJ
from the team's Service svc. The Gateway API allows 16 rules and 16 backendRefs
a rule, so the parent has a rule per 15 teams, each with the teams' prefixes as
matches and their namespaces as backendRefs. At the default 100 routes a team
that is 3,000 routes under one parent. The translation and shapes benchmarks
build the same objects from here.
"""

from __future__ import annotations

from tests.bench.common import service_yaml

TEAMS = 30
HOST = "delegated.shapes.test"


def team(t: int) -> str:
    return f"team-{t:02d}"


def path(t: int, j: int) -> str:
    return f"/{team(t)}/r{j:03d}"


def child(t: int, j: int) -> str:
    return f"c-{t:02d}-{j:03d}"


TEAMS_PER_RULE = 15


def parent_yaml(gateway: str, teams: int = TEAMS) -> str:
    groups = [range(lo, min(lo + TEAMS_PER_RULE, teams)) for lo in range(0, teams, TEAMS_PER_RULE)]
    rules = "".join(f"""\
    - matches: [{", ".join(f"{{path: {{type: PathPrefix, value: /{team(t)}}}}}" for t in group)}]
      backendRefs: [{", ".join(f'{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: "*", namespace: {team(t)}}}'
                               for t in group)}]
""" for group in groups)
    return f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: platform, namespace: default}}
spec:
  parentRefs: [{{name: {gateway}}}]
  hostnames: [{HOST}]
  rules:
{rules}"""


def child_yaml(name: str, namespace: str, route_path: str, backend: str) -> str:
    """A team's route: no parentRefs and no hostnames, as delegated children are written."""
    return f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  rules:
    - matches: [{{path: {{type: PathPrefix, value: {route_path}}}}}]
      backendRefs: [{{name: {backend}, port: 80}}]
"""


def files(gateway: str, per_team: int, backend_port: int, teams: int = TEAMS) -> list[tuple[str, str]]:
    """[(file name, its text)]: the parent, then one file per team (its Service svc,
    pointing at `backend_port`, and its child routes)."""
    out = [("platform.yaml", parent_yaml(gateway, teams))]
    for t in range(teams):
        docs = [service_yaml("svc", backend_port, team(t))]
        docs += [child_yaml(child(t, j), team(t), path(t, j), "svc") for j in range(per_team)]
        out.append((f"{team(t)}.yaml", "---\n".join(docs)))
    return out
