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
