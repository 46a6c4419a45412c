"""The ready endpoints of a Service port, from its EndpointSlices (Service backends, MCP
targets found by selector)."""

from __future__ import annotations

from lychgate import ir
from lychgate.api.core import Service, ServicePort
from lychgate.store import Store


def service_endpoints(store: Store, service: Service, port: ServicePort) -> list[ir.Endpoint]:
    """Ready endpoints of a Service port, from its EndpointSlices.

    The Service port is matched to the slice port by name (as kube-proxy does);
    an unnamed single port matches the slice's unnamed port.
    """
    out: list[ir.Endpoint] = []
    seen: set[tuple[str, int]] = set()
    for eps in sorted(store.endpoint_slices(service.namespace, service.name), key=lambda s: s.name):
        number = next(
            (p.port for p in eps.ports if (p.name or "") == (port.name or "") and p.port),
            None,
        )
        if number is None and isinstance(port.target_port, int):
            number = port.target_port
        if number is None:
            continue
        for endpoint in eps.endpoints:
            if endpoint.conditions.ready is False:
                continue
            for address in endpoint.addresses:
                if (address, number) not in seen:
                    seen.add((address, number))
                    out.append(ir.Endpoint(address, number))
    return out
