"""The Inference Extension conformance machinery: one `lychgate run --inference-extension`,
local Pods, and the checks of upstream's Go helpers (conformance/utils/kubernetes and
http), built on the Gateway API runner's (tests/conformance/suite.py).

Waits poll the control plane's /api/v1/objects and are bounded by the Gateway API
runner's timeouts (upstream's are minutes; a local control plane settles in well
under a second).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conformance.manifests import GATEWAY_CLASS, key
from tests.conformance.suite import (
    STATUS_TIMEOUT,
    Answer,
    CaseFailure,
    Cond,
    Exp,
    check_conditions,
    compare,
    consistently,
    ensure,
    eventually,
    find_condition,
    known_objects,
    send,
)
from tests.harness import Lychgate
from tests.inference_conformance import manifests as mf

INFRA = "inference-conformance-infra"
APP = "inference-conformance-app-backend"
PRIMARY_GW = "conformance-primary"
SECONDARY_GW = "conformance-secondary"
PRIMARY_POOL = "primary-inference-pool"
SECONDARY_POOL = "secondary-inference-pool"
PRIMARY_LABEL = "primary-inference-model-server"
SECONDARY_LABEL = "secondary-inference-model-server"
PRIMARY_DEPLOYMENT = "primary-inference-model-server-deployment"
PRIMARY_EPP_SERVICE = "primary-endpoint-picker-svc"
REPLICAS = 3

ACCEPTED = Cond("Accepted", "True", "Accepted")
RESOLVED = Cond("ResolvedRefs", "True", "ResolvedRefs")


class InferenceSuite:
    """One lychgate control plane with the base manifests applied, shared by all cases."""

    def __init__(self, root: Path) -> None:
        self.lg = Lychgate(root)
        self.pods = mf.LocalPods()
        self.base: list[dict[str, Any]] = []
        self._files: dict[str, list[tuple[str, str, str]]] = {}
        self._docs: dict[str, list[dict[str, Any]]] = {}

    # --- lifecycle -----------------------------------------------------------------

    def start(self) -> InferenceSuite:
        self.lg.start("--inference-extension")
        eventually(self._class_accepted, f"GatewayClass {GATEWAY_CLASS} to be accepted")
        self.base = mf.load("resources/base.yaml")
        self.apply("base", self.base)
        return self

    def _class_accepted(self) -> None:
        gc = self.lg.objects("GatewayClass", name=GATEWAY_CLASS)[0]
        check_conditions(f"GatewayClass {GATEWAY_CLASS}", (gc.get("status") or {}).get("conditions") or [],
                         [Cond("Accepted")])

    def close(self) -> None:
        self.lg.close()
        self.pods.close()

    # --- manifests -----------------------------------------------------------------

    def apply(self, name: str, docs: list[dict[str, Any]]) -> None:
        """Write (or rewrite) one manifest file; Deployments become local Pods."""
        self._docs[name] = docs
        local = self.pods.localize(docs)
        self._files[name] = [key(d) for d in local]
        self.lg.write(f"{name}.yaml", mf.dump(local))

    def delete(self, name: str) -> None:
        """Remove a manifest file and wait until its objects are gone."""
        keys = self._files.pop(name, [])
        self._docs.pop(name, None)
        if (self.lg.manifests / f"{name}.yaml").exists():
            self.lg.delete(f"{name}.yaml")
        self._wait_gone(keys, f"the objects of {name}")

    def delete_object(self, kind: str, namespace: str, name: str) -> None:
        """Delete one applied object (like a client's Delete) and wait until it is gone."""
        file = next((f for f, docs in self._docs.items() if any(key(d) == (kind, namespace, name) for d in docs)),
                    None)
        ensure(file is not None, f"{kind} {namespace}/{name} was not applied")
        assert file is not None
        self.apply(file, [d for d in self._docs[file] if key(d) != (kind, namespace, name)])
        self._wait_gone([(kind, namespace, name)], f"{kind} {namespace}/{name}")

    def _wait_gone(self, keys: list[tuple[str, str, str]], what: str) -> None:
        def gone() -> None:
            for kind, ns, obj in keys:
                ensure(not self.objects(kind, ns, obj), f"{kind} {ns}/{obj} still exists")
        eventually(gone, f"{what} to be deleted")

    def case_files(self) -> list[str]:
        return [name for name in self._files if name != "base"]

    def objects(self, kind: str, namespace: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        return known_objects(self.lg, kind, namespace, name)

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        items = self.objects(kind, namespace, name)
        ensure(bool(items), f"{kind} {namespace}/{name} not found")
        return items[0]

    # --- upstream's kubernetes helpers --------------------------------------------

    def gateway_address(self, gateway: str) -> str:
        """GetGatewayEndpoint: the Gateway's address and its first listener's port."""
        def check() -> str:
            gw = self.get("Gateway", gateway, INFRA)
            address = next((a["value"] for a in (gw.get("status") or {}).get("addresses") or []), None)
            ensure(address is not None, f"Gateway {INFRA}/{gateway} has no address yet")
            return f"{address}:{gw['spec']['listeners'][0]['port']}"
        return eventually(check, f"Gateway {INFRA}/{gateway} to get an address")

    def route_condition(self, route: str, gateway: str, cond: Cond, namespace: str = APP) -> None:
        """gateway-api's HTTPRouteMustHaveCondition: the route's parent entry for the Gateway
        has the condition, of the route's latest generation."""
        def check() -> None:
            obj = self.get("HTTPRoute", route, namespace)
            parents = [p for p in (obj.get("status") or {}).get("parents") or []
                       if (p.get("parentRef") or {}).get("name") == gateway
                       and (p.get("parentRef") or {}).get("namespace", namespace) == INFRA]
            ensure(bool(parents), f"HTTPRoute {route} has no parent status for Gateway {gateway}")
            check_conditions(f"HTTPRoute {namespace}/{route}", parents[0].get("conditions") or [], [cond],
                             obj["metadata"].get("generation"))
        eventually(check, f"HTTPRoute {namespace}/{route} to have {cond} from {gateway}")

    def route_accepted_and_resolved(self, route: str, gateway: str) -> None:
        """HTTPRouteMustBeAcceptedAndResolved."""
        self.route_condition(route, gateway, ACCEPTED)
        self.route_condition(route, gateway, RESOLVED)

    def pool_condition(self, pool: str, gateway: str, *allowed: Cond) -> None:
        """InferencePoolMustHaveOneOfConditions: the pool's parent entry for the Gateway
        (parentRef namespace set and equal) has one of the conditions."""
        def check() -> None:
            obj = self.get("InferencePool", pool, APP)
            parents = (obj.get("status") or {}).get("parents") or []
            ensure(bool(parents), f"InferencePool {pool} has no parent statuses")
            for parent in parents:
                ref = parent.get("parentRef") or {}
                if ref.get("namespace") == INFRA and ref.get("name") == gateway:
                    conditions = parent.get("conditions") or []
                    for want in allowed:
                        got = find_condition(conditions, want.type)
                        if got and got.get("status") == want.status and (not want.reason or
                                                                         got.get("reason") == want.reason):
                            return
            raise CaseFailure(f"InferencePool {pool}: no parent {gateway} with one of {allowed}: {parents}")
        eventually(check, f"InferencePool {APP}/{pool} conditions from {gateway}")

    def pool_accepted(self, pool: str, gateway: str) -> None:
        """InferencePoolMustBeAcceptedByParent."""
        self.pool_condition(pool, gateway, ACCEPTED)

    def pool_has_no_parents(self, pool: str) -> None:
        """InferencePoolMustHaveNoParents (a pool that is gone counts as having none)."""
        def check() -> None:
            items = self.objects("InferencePool", APP, pool)
            parents = ((items[0].get("status") or {}).get("parents") or []) if items else []
            ensure(not parents, f"InferencePool {pool} still has {len(parents)} parent statuses")
        eventually(check, f"InferencePool {APP}/{pool} to have no parents")

    def pods_with_labels(self, labels: dict[str, str]) -> list[dict[str, Any]]:
        """GetPodsWithLabel: running Pods with an IP, by name. Local mode's API is the manifests:
        the Pods are those written (with the IP and phase written), once the control plane has them."""
        pods = sorted((p for w in self.pods.workloads.values() if w.namespace == APP for p in w.pods
                       if labels.items() <= p["metadata"]["labels"].items()), key=lambda p: p["metadata"]["name"])

        def check() -> list[dict[str, Any]]:
            known = {p["metadata"]["name"] for p in self.objects("Pod", APP)}
            ensure(bool(pods), f"no Pods with labels {labels}")
            for p in pods:
                ensure(p["metadata"]["name"] in known, f"Pod {p['metadata']['name']} not seen by the control plane")
                ensure(bool(p["status"].get("podIP")) and p["status"].get("phase") == "Running",
                       f"Pod {p['metadata']['name']} is not running")
            return pods
        return eventually(check, f"Pods with labels {labels}")

    @contextmanager
    def service_unavailable(self, name: str, namespace: str = APP) -> Iterator[None]:
        """MakeServiceUnavailable: the Service's selector matches nothing until the block ends,
        with its EndpointSlices emptied, then restored (and waited for)."""
        original = copy.deepcopy(self.base)
        changed = copy.deepcopy(self.base)
        for doc in changed:
            if key(doc) == ("Service", namespace, name):
                doc["spec"]["selector"] = {"app": "do-not-match-for-testing"}
        self.apply("base", changed)
        self._wait_endpoints(name, namespace, 0)
        try:
            yield
        finally:
            self.apply("base", original)
            self._wait_endpoints(name, namespace, 1)

    def _wait_endpoints(self, service: str, namespace: str, count: int) -> None:
        def check() -> None:
            slices = [s for s in self.objects("EndpointSlice", namespace)
                      if ((s.get("metadata") or {}).get("labels") or {}).get("kubernetes.io/service-name") == service]
            got = sum(len(s.get("endpoints") or []) for s in slices)
            ensure(got == count, f"Service {service} has {got} endpoints, want {count}")
        eventually(check, f"Service {namespace}/{service} to have {count} endpoints", STATUS_TIMEOUT)

    # --- requests ---------------------------------------------------------------------

    def expect(self, address: str, exp: Exp) -> None:
        """MakeRequestAndExpectEventuallyConsistentResponse."""
        consistently(lambda: send(address, exp), lambda answer: compare(exp, answer, address),
                     f"{exp.describe()} to {address}")

    def many(self, address: str, exp: Exp, total: int, concurrency: int) -> list[Answer]:
        """`total` requests, `concurrency` at a time (upstream's errgroup with SetLimit);
        each must pass CompareRoundTrip. Returns the answers."""
        with ThreadPoolExecutor(concurrency) as pool:
            answers = list(pool.map(lambda _: send(address, exp), range(total)))
        for answer in answers:
            compare(exp, answer, address)
        return answers
