from __future__ import annotations

import pytest
from pydantic import ValidationError

from lychgate.settings import Settings, ValidationLevel, split_host_port


def test_validation_level_is_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LYCHGATE_VALIDATION_LEVEL", "STRICT")
    assert Settings().validation_level is ValidationLevel.STRICT
    assert Settings(validation_level="Standard").validation_level is ValidationLevel.STANDARD
    with pytest.raises(ValidationError):
        Settings(validation_level="paranoid")


def test_class_parameter_refs_need_name_and_namespace() -> None:
    with pytest.raises(ValidationError, match=r"gatewayClassParametersRefs\.lychgate: missing namespace"):
        Settings(gateway_class_parameters_refs={"lychgate": {"name": "p"}})


def test_host_port() -> None:
    assert split_host_port("127.0.0.1:9977") == ("127.0.0.1", 9977)
    assert split_host_port("[::1]:9095") == ("::1", 9095)
    with pytest.raises(ValueError):
        split_host_port("localhost")


def test_gcp_metadata_server(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().gcp_metadata_server == "metadata.google.internal:80"  # what GCE and GKE answer
    monkeypatch.setenv("LYCHGATE_GCP_METADATA_SERVER", "169.254.169.254:80")
    assert Settings().gcp_metadata_server == "169.254.169.254:80"
    for bad in ("metadata.google.internal", "host:0", "host:99999", "a b:80"):
        with pytest.raises(ValidationError, match="gcp_metadata_server"):
            Settings(gcp_metadata_server=bad)
