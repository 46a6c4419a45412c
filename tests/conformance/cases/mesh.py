"""Mesh-only conformance tests (upstream conformance/tests/mesh/): listed, never run,
because lychgate does not claim the mesh profile. (The mesh halves of tests shared with
the Gateway profile, e.g. tests/mesh/httproute-*.yaml, belong to those tests.)"""

from __future__ import annotations

from tests.conformance.cases import mesh_case
from tests.conformance.features import GRPCROUTE, HTTPROUTE, MESH

mesh_case("MeshBasic", [MESH], ["tests/mesh/mesh-split.yaml"], "A mesh client reaches a mesh service")
mesh_case("MeshTrafficSplit", [MESH, HTTPROUTE], ["tests/mesh/mesh-split.yaml"],
          "An HTTPRoute with a Service parent splits traffic by path")
mesh_case("MeshConsumerRoute", [MESH, HTTPROUTE], ["tests/mesh/mesh-consumer-route.yaml"],
          "A consumer route applies only to clients in its namespace")
mesh_case("MeshFrontend", [MESH, HTTPROUTE], ["tests/mesh/mesh-frontend.yaml"],
          "An HTTPRoute with a Service parent applies to that Service's traffic")
mesh_case("MeshPorts", [MESH, HTTPROUTE], ["tests/mesh/mesh-ports.yaml"],
          "An HTTPRoute with a Service parent and port applies to that port only")
mesh_case("MeshGRPCRouteWeight", [MESH, GRPCROUTE], ["tests/mesh/grpcroute-weight.yaml"],
          "A GRPCRoute with a Service parent splits traffic by weight")
