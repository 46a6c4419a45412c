"""One bad route never blocks anyone else (spec §7; docs/validation.md), with real Envoy.

A Gateway shared by teams: each bad HTTPRoute carries one rule Envoy refuses
beside a valid sibling (`/fine`). Whatever the validation level, only the bad
rule answers 500, its sibling and every other route serve, a route added
afterwards serves, the status names the rule, the field and the reason, and
Envoy never rejects an update (its `update_rejected` counters stay 0). What
translation misses is caught by Envoy itself (strict preflight, or a NACK in
the standard level) and quarantined the same way, without a restart.
"""

from __future__ import annotations

import re
import textwrap

import httpx
import pytest

from tests.harness import EchoBackends, Lychgate, gateway_yaml, service_yaml, wait_for

pytestmark = pytest.mark.e2e

# name -> (the bad rule's matches and filters, the field its status must name,
# words of the reason). Each was found by feeding it to `envoy --mode validate`.
REFUSED = {
    "lookahead": ('matches: [{path: {value: /bad}, headers: [{name: x-id, type: RegularExpression, value: "a(?=b)"}]}]',
                  "matches[0].headers[0].value", "no lookaround"),
    "backref": ('matches: [{path: {value: /bad}, queryParams: [{name: q, type: RegularExpression, value: "(a+)\\\\1"}]}]',
                "matches[0].queryParams[0].value", "RE2 cannot compile"),
    "program-size": ('matches: [{path: {value: /bad}, headers: [{name: x-ids, type: RegularExpression, '
                     'value: "([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}){1,20}"}]}]',
                     "matches[0].headers[0].value", "program size is 1423"),
    "host-header": ("matches: [{path: {value: /bad}}]\n"
                    "filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: Host, value: x.example.com}]}}]",
                    "filters[0].requestHeaderModifier.set[0].name", "URLRewrite"),
    "line-break": ("matches: [{path: {value: /bad}}]\n"
                   'filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: x-a, value: "a\\r\\nb"}]}}]',
                   "filters[0].responseHeaderModifier.add[0].value", "carriage return"),
    "cors-origin": ("matches: [{path: {value: /bad}}]\n"
                    "filters: [{type: CORS, cors: {allowOrigins: [\"https://*." + "a" * 60 + "." + "b" * 60 + ".com\"]}}]",
                    "filters[0].cors.allowOrigins[0]", "program size"),
}


def route_yaml(name: str, host: str, rules: str) -> str:
    return textwrap.dedent("""\
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {name: NAME}
        spec:
          parentRefs: [{name: gw}]
          hostnames: [HOST]
          rules:
        """).replace("NAME", name).replace("HOST", host) + textwrap.indent(rules, "    ")


def bad_route(case: str, bad_rule: str) -> str:
    rules = "- name: bad\n" + textwrap.indent(bad_rule, "  ") + "\n  backendRefs: [{name: v1, port: 80}]\n"
    if "RequestRedirect" in bad_rule:
        rules = rules.replace("  backendRefs: [{name: v1, port: 80}]\n", "")
    rules += "- name: fine\n  matches: [{path: {value: /fine}}]\n  backendRefs: [{name: v1, port: 80}]\n"
    return route_yaml(case, f"{case}.example.com", rules)


def team_route(name: str) -> str:
    return route_yaml(name, f"{name}.example.com", "- backendRefs: [{name: v2, port: 80}]\n")


def _setup(lg: Lychgate, backends: EchoBackends) -> None:
    for name in ("v1", "v2"):
        lg.write(f"svc-{name}.yaml", service_yaml(name, 80, backends.start(pod=name)))
    lg.write("gateway.yaml", gateway_yaml())
    lg.write("team-a.yaml", team_route("team-a"))


def _parent_conditions(lg: Lychgate, name: str) -> dict[str, dict[str, str]]:
    parents = lg.status("HTTPRoute", name).get("parents") or [{}]
    return {c["type"]: c for c in parents[0].get("conditions", [])}


def rejected_updates(lg: Lychgate) -> int:
    """The sum of Envoy's update_rejected counters (every xDS subscription has one)."""
    admin = lg.proxies()["default/gw"]["admin"]
    stats = httpx.get(f"http://{admin}/stats", params={"filter": "update_rejected"}, timeout=5).text
    return sum(int(v) for v in re.findall(r"update_rejected: (\d+)", stats))


@pytest.mark.parametrize("level", ["standard", "strict"])
def test_what_envoy_refuses_stays_in_its_rule(lychgate: Lychgate, backends: EchoBackends, level: str) -> None:
    lg = lychgate
    _setup(lg, backends)
    for case, (rule, _, _) in REFUSED.items():
        lg.write(f"{case}.yaml", bad_route(case, rule))
    lg.write("redirect.yaml", bad_route("redirect", "matches: [{path: {value: /bad}}]\nfilters: [{type: RequestRedirect, "
                                                    'requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: "/x\\ny"}}}]'))
    lg.start("--validation-level", level)
    addr = lg.address()
    lg.wait_pod(addr, "v2", host="team-a.example.com")
    for case in [*REFUSED, "redirect"]:
        host = f"{case}.example.com"
        lg.wait_pod(addr, "v1", "/fine", host=host)
        assert lg.get(addr, "/bad", host=host).status_code == 500, case
    for case, (_, field, reason) in REFUSED.items():
        cond = _parent_conditions(lg, case)
        assert cond["Accepted"]["status"] == "True", case
        message = cond["PartiallyInvalid"]["message"]
        assert f"rule bad: {field}" in message and reason in message, (case, message)
    message = _parent_conditions(lg, "redirect")["PartiallyInvalid"]["message"]
    assert "filters[0].requestRedirect.path" in message and "line break" in message
    # Later changes by another team still reach the proxy.
    lg.write("team-b.yaml", team_route("team-b"))
    lg.wait_pod(addr, "v2", host="team-b.example.com")
    assert rejected_updates(lg) == 0


def test_a_rejection_translation_missed_is_quarantined(
    lychgate: Lychgate, backends: EchoBackends, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Standard level, with lychgate's own checks off so Envoy sees the bad regex:
    Envoy NACKs, the control plane finds the rule with `envoy --mode validate`,
    serves it as 500 and the proxy converges on everything else within 5 s."""
    monkeypatch.setenv("LYCHGATE_ENVOY_LIMITS", "off")
    lg = lychgate
    _setup(lg, backends)
    lg.start()
    addr = lg.address()
    lg.wait_pod(addr, "v2", host="team-a.example.com")
    pid = lg.proxies()["default/gw"]["pid"]
    lg.write("bad.yaml", bad_route("lookahead", 'matches: [{path: {type: RegularExpression, value: "/look(?=ahead).*"}}]'))
    lg.write("team-b.yaml", team_route("team-b"))
    # Written together: the first snapshot with them is refused; the next one serves team-b.
    lg.wait_pod(addr, "v1", "/fine", host="lookahead.example.com", timeout=5)
    lg.wait_pod(addr, "v2", host="team-b.example.com", timeout=5)
    cond = wait_for(lambda: _parent_conditions(lg, "lookahead").get("Programmed"), 5, "the quarantine status")
    assert cond["status"] == "False" and cond["reason"] == "Rejected"
    assert "rule bad" in cond["message"] and "rejected it" in cond["message"] and "(?=" in cond["message"]
    assert 'lychgate_xds_quarantined{gateway="default/gw"} 1.0' in httpx.get(f"http://{lg.metrics}/metrics").text
    debug = lg.cli("debug").stdout
    assert "quarantined: rule 0 of HTTPRoute default/lookahead" in debug
    # The proxy took the next snapshot: the Gateway is programmed, no restart happened.
    wait_for(lambda: lg.status("Gateway", "gw")["conditions"][-1]["status"] == "True"
             and all(c["status"] == "True" for c in lg.status("Gateway", "gw")["conditions"]), 5, "Programmed")
    assert lg.proxies()["default/gw"]["pid"] == pid
    # Fixing the rule lifts the quarantine.
    lg.write("bad.yaml", bad_route("lookahead", 'matches: [{path: {type: RegularExpression, value: "/look[a-z]*"}}]'))
    lg.wait_pod(addr, "v1", "/lookahead", host="lookahead.example.com")
    wait_for(lambda: "Programmed" not in _parent_conditions(lg, "lookahead"), 5, "the quarantine to lift")
    assert 'lychgate_xds_quarantined{gateway="default/gw"} 0.0' in httpx.get(f"http://{lg.metrics}/metrics").text


def test_strict_quarantines_the_blamed_rule_and_applies_the_rest(
    lychgate: Lychgate, backends: EchoBackends, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strict level, lychgate's own checks off: the preflight blames the rule, the
    rule answers 500 with Programmed=False, every other change applies, and
    nothing Envoy refuses is ever sent."""
    monkeypatch.setenv("LYCHGATE_ENVOY_LIMITS", "off")
    lg = lychgate
    _setup(lg, backends)
    lg.start("--validation-level", "strict")
    addr = lg.address()
    lg.wait_pod(addr, "v2", host="team-a.example.com")
    lg.write("bad.yaml", bad_route("backref", 'matches: [{path: {value: /bad}, queryParams: '
                                              '[{name: q, type: RegularExpression, value: "(a+)\\\\1"}]}]'))
    lg.wait_pod(addr, "v1", "/fine", host="backref.example.com", timeout=5)
    assert lg.get(addr, "/bad", host="backref.example.com").status_code == 500
    cond = wait_for(lambda: _parent_conditions(lg, "backref").get("Programmed"), 5, "the quarantine status")
    assert cond["reason"] == "Rejected" and "strict validation" in cond["message"] and "\\1" in cond["message"]
    lg.write("team-b.yaml", team_route("team-b"))
    lg.wait_pod(addr, "v2", host="team-b.example.com", timeout=5)
    assert rejected_updates(lg) == 0
    metrics = httpx.get(f"http://{lg.metrics}/metrics").text
    assert 'lychgate_xds_blocked_snapshots_total{gateway="default/gw"} 1.0' in metrics
    assert 'lychgate_xds_quarantined{gateway="default/gw"} 1.0' in metrics
