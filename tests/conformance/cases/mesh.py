"""Mesh-only conformance tests (upstream conformance/tests/mesh/): listed, never run,
because lychgate does not claim the mesh profile."""

from __future__ import annotations

from tests.conformance.cases import mesh_case
from tests.conformance.features import HTTPROUTE, MESH

mesh_case("MeshBasic", [MESH], ["tests/mesh/mesh-split.yaml"], "A mesh client can reach a mesh service")
