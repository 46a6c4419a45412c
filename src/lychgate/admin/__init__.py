"""The control plane's HTTP surfaces: the admin/debug server, metrics and health.

`server` builds the three aiohttp applications; `metrics` holds the Prometheus
objects the pipeline updates; `redact` strips secret material from anything
the admin server shows. See docs/debugging.md for what each endpoint gives.
"""

from lychgate.admin.server import (
    AdminProviders,
    build_admin_app,
    build_health_app,
    build_metrics_app,
    serve,
)

__all__ = [
    "AdminProviders",
    "build_admin_app",
    "build_health_app",
    "build_metrics_app",
    "serve",
]
