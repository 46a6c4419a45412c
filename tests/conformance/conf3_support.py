"""Checks for the mirror, CORS, retry and BackendTLSPolicy cases (upstream's
ExpectMirroredRequest,
MakeRequestAndExpectFailure, BackendTLSPolicyMustHaveCondition...), and the
certificates the Go suite creates for the tls-backend pods.
"""

from __future__ import annotations

import http.client
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.certs import CA
from tests.conformance import echo
from tests.conformance import manifests as mf
from tests.conformance.suite import (
    CONSISTENCY_TIMEOUT,
    INFRA,
    POLL,
    Answer,
    CaseFailure,
    Cond,
    Exp,
    Suite,
    check_conditions,
    compare,
    consistently,
    ensure,
    eventually,
    send,
)

# --- mirrors ---------------------------------------------------------------------------


def log_mark() -> int:
    """Where the echo pods' request log is now (upstream reads pod logs since a time)."""
    return len(echo.REQUEST_LOG)


def mirrored_count(since: int, backend: str, path: str, namespace: str = INFRA) -> int:
    """How many requests for `path` the pods of `backend` logged since `since`."""
    return sum(1 for ns, pod, seen in echo.REQUEST_LOG[since:]
               if ns == namespace and pod.startswith(f"{backend}-") and seen == path)


def expect_mirrored(since: int, path: str, *backends: str, namespace: str = INFRA) -> None:
    """Upstream's ExpectMirroredRequest: each mirror backend logged the request."""
    for backend in backends:
        def check(backend: str = backend) -> None:
            ensure(mirrored_count(since, backend, path, namespace) > 0,
                   f"{namespace}/{backend} logged no request to {path}")
        eventually(check, f"a request to {path} mirrored to {backend}", CONSISTENCY_TIMEOUT)


def mirror_share(address: str, exp: Exp, backend: str, total: int, concurrency: int = 10) -> int:
    """Send `total` requests (`concurrency` at a time); how many `backend` got mirrored."""
    since = log_mark()

    def one(_: int) -> None:
        answer = send(address, exp)
        compare(exp, answer, address)

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(total)))
    # Mirrored requests are sent asynchronously, after the answer: count once the log has not
    # grown for a second. (Settled after one quiet 0.25 s, a loaded CI machine counted some
    # mirrors short, and their late arrival into the next try's count: 86..118 of 500 at 20%.)
    path, count, quiet = exp.path.split("?")[0], -1, 0
    for _ in range(40):
        time.sleep(0.25)
        now = mirrored_count(since, backend, path)
        quiet = quiet + 1 if now == count else 0
        count = now
        if quiet == 4:
            break
    return count


def expect_consistently(s: Suite, address: str, exp: Exp, check: Callable[[Answer], None],
                        timeout: float = CONSISTENCY_TIMEOUT) -> None:
    """Upstream's MakeRequestAndExpectEventuallyConsistentResponse with a custom comparison."""
    consistently(lambda: send(address, exp, s.certs.ca.pem), check, f"{exp.describe()} to {address}", timeout)


FAILURE_THRESHOLD = 5  # upstream's MakeRequestAndExpectFailure waits for 5 in a row


def expect_failure(s: Suite, address: str, exp: Exp) -> None:
    """Upstream's MakeRequestAndExpectFailure: FAILURE_THRESHOLD answers in a row that are
    not a 200 (a request that gets no answer, or a timeout status, does not count); a 200
    fails the case at once."""
    streak, last = 0, "no request sent"
    deadline = time.monotonic() + CONSISTENCY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            answer = send(address, exp, s.certs.ca.pem)
        except (OSError, http.client.HTTPException) as err:
            streak, last = 0, f"no answer ({err})"
        else:
            ensure(answer.status != 200, f"{exp.describe()} to {address} answered 200, want a failure")
            if answer.status in (408, 504):
                streak, last = 0, f"timeout status {answer.status}"
            else:
                streak += 1
                if streak >= FAILURE_THRESHOLD:
                    return
                continue
        time.sleep(POLL)
    raise CaseFailure(f"{exp.describe()} to {address}: want {FAILURE_THRESHOLD} failures in a row, {last}")


# --- retries -------------------------------------------------------------------------------


def expect_retry(s: Suite, address: str, path: str, code: int, succeed_after: int, want: int,
                 backend: str) -> None:
    """Upstream's assertConsistentRetryBehaviour: with a fresh simulation per probe, the
    backend fails `succeed_after` times with `code`; the gateway answers `want`."""
    def probe() -> None:
        exp = Exp(f"{path}?responseCode={code}&succeedAfter={succeed_after}&uuid={uuid.uuid4()}",
                  status=want, backend=backend)
        compare(exp, send(address, exp), address)

    eventually(probe, f"{path} (backend fails {succeed_after}x with {code}) to answer {want}",
               CONSISTENCY_TIMEOUT)


# --- BackendTLSPolicy ---------------------------------------------------------------------

TLS_CHECKS_SECRET = "tls-checks-certificate"
# The names the Go suite's tls-checks-certificate is valid for (suite setup).
TLS_CHECKS_HOSTS = ["abc.example.com", "spiffe://abc.example.com/test-identity", "other.example.com"]


def backend_tls_setup(s: Suite) -> list[dict[str, Any]]:
    """What the Go suite creates for the BackendTLSPolicy tests: the tls-backend pods'
    certificate (signed by the run's CA), a ConfigMap with that CA and one with an
    unrelated CA. The tls-backend pod restarts with the new certificate."""
    s.certs.issue(INFRA, TLS_CHECKS_SECRET, TLS_CHECKS_HOSTS)
    # Forget the TLS port of the pod so the case's Services get one serving the new certificate.
    s.backends._ports.pop((INFRA, "tls-backend", "http+tls"), None)
    cert, key = s.certs.pair(INFRA, TLS_CHECKS_SECRET)
    return [
        mf.tls_secret(INFRA, TLS_CHECKS_SECRET, cert, key),
        mf.ca_configmap(INFRA, "tls-checks-ca-certificate", s.certs.ca.pem),
        mf.ca_configmap(INFRA, "mismatch-ca-certificate", CA("an unrelated CA").pem),
    ]


def _ancestors_latest(policy: dict[str, Any]) -> list[dict[str, Any]]:
    generation = policy["metadata"].get("generation")
    ancestors: list[dict[str, Any]] = (policy.get("status") or {}).get("ancestors") or []
    for a in ancestors:
        for c in a.get("conditions") or []:
            ensure(c.get("observedGeneration") == generation,
                   f"BackendTLSPolicy {policy['metadata']['name']} ancestor {a.get('ancestorRef', {}).get('name')} "
                   f"condition {c.get('type')} is of generation {c.get('observedGeneration')}, not {generation}")
    return ancestors


def policy_condition(s: Suite, name: str, gateway: str, cond: Cond, namespace: str = INFRA) -> None:
    """Upstream's BackendTLSPolicyMustHaveCondition: every ancestor of the latest
    generation, and the Gateway's ancestor entry has the condition."""
    def check() -> None:
        policy = s.get("BackendTLSPolicy", name, namespace)
        ancestors = [a for a in _ancestors_latest(policy)
                     if (a.get("ancestorRef") or {}).get("name") == gateway
                     and (a.get("ancestorRef") or {}).get("namespace") in (None, namespace)]
        ensure(bool(ancestors), f"BackendTLSPolicy {name} has no ancestor status for Gateway {gateway}")
        check_conditions(f"BackendTLSPolicy {namespace}/{name} ancestor {gateway}",
                         ancestors[0].get("conditions") or [], [cond])
    eventually(check, f"BackendTLSPolicy {namespace}/{name} to have {cond} for Gateway {gateway}")


def policy_latest(s: Suite, name: str, namespace: str = INFRA) -> dict[str, Any]:
    """Upstream's BackendTLSPolicyMustHaveLatestConditions, on the policy as it is now."""
    policy = s.get("BackendTLSPolicy", name, namespace)
    _ancestors_latest(policy)
    return policy


def backend_sni(sni: str) -> Callable[[Answer], None]:
    """The backend saw this SNI on the gateway's TLS connection (upstream's ExpectedRequest SNI)."""
    def check(answer: Answer) -> None:
        tls = (answer.json() or {}).get("tls") or {}
        ensure(bool(tls), "the backend was reached without TLS")
        ensure(tls.get("serverName") == sni, f"the backend saw SNI {tls.get('serverName')!r}, want {sni!r}")
    return check
