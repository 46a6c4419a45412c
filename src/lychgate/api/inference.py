"""InferencePool (inference.networking.k8s.io/v1), the Gateway API Inference Extension's backend.

An upstream kind: its CRD comes from the Inference Extension project, not from
lychgate's chart (tools/gen_crds.py only generates gateway.lychgate.dev kinds),
just as the Gateway API CRDs do. Only the v1 fields lychgate acts on are typed.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from lychgate.api.base import Model, Resource

GROUP = "inference.networking.k8s.io"


class PoolSelector(Model):
    match_labels: dict[str, str] = Field(min_length=1)


class PortNumber(Model):
    number: int = Field(ge=1, le=65535)


class EndpointPickerRef(Model):
    group: str = ""
    kind: str = "Service"
    name: str = Field(min_length=1)
    port: PortNumber | None = None
    failure_mode: Literal["FailOpen", "FailClose"] = "FailClose"


class InferencePoolSpec(Model):
    selector: PoolSelector
    # Several ports: one model server per port of each Pod (data-parallel ranks).
    target_ports: list[PortNumber] = Field(min_length=1, max_length=8)
    # How the proxy speaks to the model servers: HTTP/1.1, or HTTP/2 without TLS.
    app_protocol: Literal["http", "kubernetes.io/h2c"] = "http"
    # Optional in the CRD; a pool without one cannot be routed to (translate/inference.py).
    endpoint_picker_ref: EndpointPickerRef | None = None


class InferencePool(Resource):
    KIND: ClassVar[str] = "InferencePool"
    GROUP: ClassVar[str] = GROUP
    VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)
    spec: InferencePoolSpec
