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
     "exactly one of ai, aws, static, dynamicForwardProxy, gcp, mcp, priorityGroups must be set"),
    ({"type": "Static", "priorityGroups": [{"backendRefs": [{"name": "a"}]}]}, "must match the specified type"),
])
def test_priority_groups_the_crd_refuses(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match="Backend default/pg") as err:
        parse(backend(spec))
    assert message in str(err.value)


# --- kgateway's newest shapes: gcp, aws.ec2, auth AssumeRole (loaded; ec2 and AssumeRole
# are refused at translation, tests/golden/in/backends-cloud.yaml) ---------------------

ROLE = "arn:aws:iam::111122223333:role/invoke"


def test_gcp_loads_with_its_default_audience() -> None:
    run = parse(backend({"type": "GCP", "gcp": {"host": "hello-abc-uc.a.run.app"}}))
    assert isinstance(run, Backend) and run.spec.kind == "GCP" and run.spec.gcp is not None
    assert run.spec.gcp.audience_url == "https://hello-abc-uc.a.run.app"
    other = parse(backend({"gcp": {"host": "h.example", "audience": "https://aud.example/x"}}))
    assert isinstance(other, Backend) and other.spec.gcp is not None
    assert other.spec.gcp.audience_url == "https://aud.example/x"


@pytest.mark.parametrize("aws", [
    {"ec2": {}},
    {"ec2": {"port": 8080, "addressType": "PublicIP",
             "filters": [{"key": "k" * 128}, {"keyValue": {"key": "env", "value": "v" * 256}}] + [{"key": "t"}] * 14}},
    {"lambda": {"accountId": "111122223333", "functionName": "f"},
     "auth": {"type": "AssumeRole", "assumeRole": {"roleArn": ROLE}}},
    {"ec2": {}, "auth": {"type": "AssumeRole", "assumeRole": {"roleArn": "arn:aws-us-gov:iam::111122223333:role/a/b"}}},
    {"ec2": {}, "auth": {"type": "Secret", "secretRef": {"name": "aws"}}},
])
def test_ec2_and_assume_role_load(aws: dict[str, Any]) -> None:
    loaded = parse(backend({"aws": aws}))
    assert isinstance(loaded, Backend) and loaded.spec.aws is not None


def test_ec2_defaults_are_kgateways() -> None:
    loaded = parse(backend({"aws": {"ec2": {}}}))
    assert isinstance(loaded, Backend) and loaded.spec.aws is not None and loaded.spec.aws.ec2 is not None
    assert (loaded.spec.aws.ec2.port, loaded.spec.aws.ec2.address_type) == (80, "PrivateIP")


@pytest.mark.parametrize(("spec", "message"), [
    ({"gcp": {"host": ""}}, "spec.gcp.host"),
    ({"gcp": {"host": "h", "audience": ""}}, "spec.gcp.audience"),
    ({"gcp": {}}, "spec.gcp.host"),
    ({"type": "GCP", "static": {"hosts": [{"host": "h", "port": 80}]}}, "must match the specified type"),
    ({"gcp": {"host": "h"}, "static": {"hosts": [{"host": "h", "port": 80}]}}, "exactly one of"),
    ({"aws": {}}, "exactly one of lambda, ec2 must be set"),
    ({"aws": {"ec2": {}, "lambda": {"accountId": "111122223333", "functionName": "f"}}}, "exactly one of lambda, ec2 must be set"),
    ({"aws": {"ec2": {"port": 0}}}, "spec.aws.ec2.port"),
    ({"aws": {"ec2": {"addressType": "IPv6"}}}, "spec.aws.ec2.addressType"),
    ({"aws": {"ec2": {"filters": [{"key": "t"}] * 17}}}, "spec.aws.ec2.filters"),
    ({"aws": {"ec2": {"filters": [{}]}}}, "exactly one of key, keyValue must be set"),
    ({"aws": {"ec2": {"filters": [{"key": "a", "keyValue": {"key": "a", "value": "b"}}]}}},
     "exactly one of key, keyValue must be set"),
    ({"aws": {"ec2": {"filters": [{"key": "k" * 129}]}}}, "spec.aws.ec2.filters[0].key"),
    ({"aws": {"ec2": {"filters": [{"key": ""}]}}}, "spec.aws.ec2.filters[0].key"),
    ({"aws": {"ec2": {"filters": [{"keyValue": {"key": "a", "value": ""}}]}}}, "spec.aws.ec2.filters[0].keyValue.value"),
    ({"aws": {"ec2": {"filters": [{"keyValue": {"key": "a", "value": "v" * 257}}]}}},
     "spec.aws.ec2.filters[0].keyValue.value"),
    ({"aws": {"ec2": {"filters": [{"keyValue": {"key": "k" * 129, "value": "v"}}]}}},
     "spec.aws.ec2.filters[0].keyValue.key"),
    ({"aws": {"ec2": {}, "auth": {"type": "AssumeRole"}}}, "assumeRole must be specified when type is 'AssumeRole'"),
    ({"aws": {"ec2": {}, "auth": {"type": "Secret", "assumeRole": {"roleArn": ROLE}, "secretRef": {"name": "a"}}}},
     "assumeRole must be nil if the type is not 'AssumeRole'"),
    ({"aws": {"ec2": {}, "auth": {"type": "AssumeRole", "assumeRole": {"roleArn": ROLE}, "secretRef": {"name": "a"}}}},
     "secretRef must be nil if the type is not 'Secret'"),
    ({"aws": {"ec2": {}, "auth": {"type": "Secret"}}}, "secretRef must be specified when type is 'Secret'"),
    ({"aws": {"ec2": {}, "auth": {"type": "Role"}}}, "spec.aws.auth.type"),
    ({"aws": {"ec2": {}, "auth": {"type": "AssumeRole", "assumeRole": {"roleArn": "arn:aws:iam::1234:role/x"}}}},
     "spec.aws.auth.assumeRole.roleArn"),
    ({"aws": {"ec2": {}, "auth": {"type": "AssumeRole", "assumeRole": {"roleArn": "arn:aws:iam::111122223333:user/x"}}}},
     "spec.aws.auth.assumeRole.roleArn"),
    ({"aws": {"ec2": {}, "auth": {"type": "AssumeRole", "assumeRole": {"roleArn": ROLE + "x" * 2048}}}},
     "spec.aws.auth.assumeRole.roleArn"),
])
def test_cloud_shapes_the_crd_refuses(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match="Backend default/pg") as err:
        parse(backend(spec))
    assert message in str(err.value)
