"""lychgate: a Gateway API control plane that serves Envoy over xDS."""

__version__ = "0.1.0"
