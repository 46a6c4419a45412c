"""Envoy dynamic modules lychgate builds from C (`make install` compiles them here).

`lychgate_scope.c` computes the scope key of split route tables
(xds/translator/scoped.py). Envoy loads a module by name from
`$ENVOY_DYNAMIC_MODULES_SEARCH_PATH/lib<name>.so`, then from the system
library path: the local deployer points its proxies at this directory; a
proxy image carries the file itself (docs/gateway-api.md, "Large route tables").
"""

from __future__ import annotations

from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent
SCOPE_MODULE = "lychgate_scope"  # Envoy's DynamicModuleConfig.name: lib<name>.so


def scope_module() -> Path | None:
    """The built scope-key module, if `make install` could compile it."""
    path = DIRECTORY / f"lib{SCOPE_MODULE}.so"
    return path if path.is_file() else None
