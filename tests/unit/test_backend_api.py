"""Backend manifests in both of kgateway's shapes load; what its CRD refuses is
refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from lychgate.api.backend import Backend
from lychgate.api.registry import ManifestError, parse


def lambda_backend(aws: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "Backend",
            "metadata": {"name": "fn", "namespace": "default"}, "spec": {"aws": aws}}


@pytest.mark.parametrize(("aws", "account"), [
    ({"lambda": {"accountId": "111122223333", "functionName": "hello", "qualifier": "dev"}}, "111122223333"),
    ({"accountId": "000000000000", "lambda": {"functionName": "hello"}}, "000000000000"),
    # kgateway reads lambda.accountId first when both are written
    ({"accountId": "000000000000", "lambda": {"accountId": "111122223333", "functionName": "hello"}}, "111122223333"),
])
def test_lambda_account_in_either_place(aws: dict[str, Any], account: str) -> None:
    backend = parse(lambda_backend(aws))
    assert isinstance(backend, Backend) and backend.spec.aws is not None
    assert backend.spec.aws.account == account


@pytest.mark.parametrize(("aws", "message"), [
    ({"lambda": {"functionName": "hello"}}, "lambda.accountId (or the older accountId) must be specified"),
    ({"lambda": {"accountId": "12", "functionName": "hello"}}, "spec.aws.lambda.accountId"),
    ({"lambda": {"accountId": "111122223333", "functionName": "hello", "qualifier": "a b"}},
     "spec.aws.lambda.qualifier"),
])
def test_what_the_crd_refuses(aws: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match="Backend default/fn") as err:
        parse(lambda_backend(aws))
    assert message in str(err.value)


def backend(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "gateway.lychgate.dev/v1alpha1", "kind": "Backend",
            "metadata": {"name": "pg", "namespace": "default"}, "spec": spec}


def test_priority_groups_load_with_or_without_the_deprecated_type() -> None:
    groups = [{"backendRefs": [{"name": "primary"}]}, {"backendRefs": [{"name": "a"}, {"name": "b"}]}]
    for spec in ({"priorityGroups": groups}, {"type": "PriorityGroups", "priorityGroups": groups}):
        pg = parse(backend(spec))
        assert isinstance(pg, Backend) and pg.spec.kind == "PriorityGroups"
        assert pg.spec.priority_groups is not None
        assert [[r.name for r in g.backend_refs] for g in pg.spec.priority_groups] == [["primary"], ["a", "b"]]


@pytest.mark.parametrize(("spec", "message"), [
    ({"priorityGroups": []}, "spec.priorityGroups"),
    ({"priorityGroups": [{"backendRefs": []}]}, "spec.priorityGroups[0].backendRefs"),
    ({"priorityGroups": [{"backendRefs": [{"name": "a", "namespace": "other"}]}]}, "namespace"),
    ({"priorityGroups": [{"backendRefs": [{"name": "a"}]}], "static": {"hosts": [{"host": "h", "port": 80}]}},
     "exactly one of ai, aws, static, dynamicForwardProxy, mcp, or priorityGroups"),
    ({"type": "Static", "priorityGroups": [{"backendRefs": [{"name": "a"}]}]}, "must match the specified type"),
])
def test_priority_groups_the_crd_refuses(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match="Backend default/pg") as err:
        parse(backend(spec))
    assert message in str(err.value)
