"""One `lychgate run` + Envoy + test services per test module, shared by its tests.

Starting a control plane and an Envoy costs about a second, so the e2e tests of
a module share one; each test writes its own manifests (own hostnames, own
policy names) and waits for traffic to show the change, so tests do not see
each other's objects.
"""

from __future__ import annotations

import json
import random
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import Lychgate, gateway_yaml, service_yaml, wait_for
from tests.policies.servers import BodyEcho, Servers


class Stack:
    def __init__(self, root: Path, policy_merge: dict[str, Any] | None = None) -> None:
        self.servers = Servers()
        # Bound before Lychgate picks its ports, so free_port() cannot hand out one twice.
        self.echo: BodyEcho = self.servers.echo("app")
        self.lg = Lychgate(root)
        # A loopback address of its own: stacks (and other test runs) never share a port.
        address = f"127.0.{random.randint(100, 250)}.{random.randint(2, 250)}"
        self.lg.write("00-gateway.yaml", gateway_yaml().rstrip("\n") + f"\n  addresses: [{{type: IPAddress, value: {address}}}]\n")
        self.lg.write("00-app.yaml", service_yaml("app", 80, self.echo.port))
        extra = ["--policy-merge", json.dumps(policy_merge)] if policy_merge else []
        self.lg.start(*extra)
        self.addr = self.lg.address()

    def service(self, name: str, port: int, namespace: str = "default") -> None:
        self.lg.write(f"svc-{namespace}-{name}.yaml", service_yaml(name, port, port, namespace=namespace))

    def write(self, name: str, *documents: str) -> None:
        """Write one manifest file of one or more YAML documents."""
        self.lg.write(name, "\n---\n".join(textwrap.dedent(d).strip("\n") for d in documents) + "\n")

    def route(self, name: str, host: str, rules: str = "", labels: dict[str, str] | None = None) -> str:
        """An HTTPRoute to the app backend; `rules` replaces the single catch-all rule."""
        meta = f"{{name: {name}" + (f", labels: {json.dumps(labels)}" if labels else "") + "}"
        body = textwrap.dedent(rules).strip("\n") if rules else "- backendRefs: [{name: app, port: 80}]"
        return (
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
            f"metadata: {meta}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [{host}]\n  rules:\n"
            + textwrap.indent(body, "    ") + "\n"
        )

    def get(self, host: str, path: str = "/", **kwargs: Any) -> httpx.Response:
        # A connection per request: a new GatewayExtension changes the listener, and
        # Envoy lets connections opened before that drain on the old filter chain
        # (README: create extensions before the policies that use them).
        kwargs["headers"] = {"connection": "close", **kwargs.get("headers", {})}
        return self.lg.get(self.addr, path, host=host, **kwargs)

    def wait(self, host: str, check: Any, path: str = "/", what: str = "", timeout: float = 10, **kwargs: Any) -> httpx.Response:
        """Send the request until check(response) holds; return that response."""
        last: list[httpx.Response] = []

        def attempt() -> httpx.Response | None:
            resp = self.get(host, path, **kwargs)
            last[:] = [resp]
            return resp if check(resp) else None

        try:
            return wait_for(attempt, timeout, what or f"{host}{path}")
        except AssertionError as err:
            got = f"{last[0].status_code} {dict(last[0].headers)} {last[0].text[:300]!r}" if last else "nothing"
            raise AssertionError(f"{err}\nlast response: {got}\nlychgate log tail:\n{self.lg.log()[-3000:]}") from None

    def status(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any]:
        return self.lg.status(kind, name, namespace)

    def applied(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The policy's summary Applied condition (waits for the policy to have status)."""
        def check() -> dict[str, Any] | None:
            for c in self.status("TrafficPolicy", name, namespace).get("conditions", []):
                if c["type"] == "Applied":
                    return dict(c)
            return None

        return wait_for(check, 10, f"TrafficPolicy {namespace}/{name} status")

    def condition_when(self, kind: str, name: str, type_: str, check: Any, namespace: str = "default") -> dict[str, Any]:
        """The object's top-level condition once `check(condition)` holds: the status is
        written after the proxies get the configuration, so traffic can change first."""
        def found() -> dict[str, Any] | None:
            for c in self.status(kind, name, namespace).get("conditions", []):
                if c["type"] == type_ and check(c):
                    return dict(c)
            return None

        return wait_for(found, 10, f"{kind} {namespace}/{name} {type_} condition")

    def ancestors(self, name: str, namespace: str = "default") -> list[dict[str, Any]]:
        return list(self.status("TrafficPolicy", name, namespace).get("ancestors", []))

    def close(self) -> None:
        self.lg.close()
        self.servers.close()


def route_policy(name: str, route: str, body: str) -> str:
    """A TrafficPolicy on one HTTPRoute; `body` is the rest of its spec, indented two spaces."""
    return (f"apiVersion: gateway.lychgate.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: {name}}}\n"
            f"spec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: {route}}}]\n{body}")


def lychgate_object(kind: str, name: str, spec: str) -> str:
    """A gateway.lychgate.dev object; `spec` is its spec's body, indented two spaces."""
    return f"apiVersion: gateway.lychgate.dev/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}}}\nspec:\n{spec}"


def condition(conds: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    return next(c for c in conds if c["type"] == type_)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("policies"))
    yield s
    s.close()
