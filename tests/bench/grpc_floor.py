"""The floor under the fan-out figures: the same simulated proxies against a bare gRPC server.

`python -m tests.bench.grpc_floor PORT` serves delta ADS with grpc.aio and the
server options of lychgate's ADS server (xds/server.py), and the collector's
thresholds of the control plane, but no control plane at all: it answers each
stream's first request with one RouteConfiguration, and for each line read from
its stdin (a size in bytes) writes one answer to every stream (the same bytes to
all, as lychgate hands its proxies: virtual hosts of lychgate's shape, one or as
many as make that size), then reads their ACKs without decoding them. The writes are
started by one loop over the streams, each a task of its own, the cheapest
way grpc.aio offers (measured against a writer task per stream woken by an Event,
4 µs more per stream on the server's main thread, and a response generator, 5-8).

The fleet part (tests/bench/fleet.py, _floor) runs the same simulated proxies
against it after lychgate, with the smallest answer and with one of the size
lychgate's answers had: a push reaching every proxy here is what gRPC in Python and
the simulated proxies cost on this machine for an answer of that size, the least a
Python control plane's fan-out can take, whatever it does before the first write.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Coroutine
from typing import Any

import grpc
from envoy.config.route.v3 import route_pb2
from envoy.service.discovery.v3 import discovery_pb2

from lychgate.controlplane import tune_gc
from lychgate.xds import types
from lychgate.xds.server import SERVER_OPTIONS

GATEWAY = "default/floor"  # (any: the server answers every stream alike)


def answer(nonce: int, size: int = 0) -> bytes:
    """A RouteConfiguration of virtual hosts like lychgate's (a hostname, two matches to one
    cluster, 0.2 KiB each), as many as make it `size` bytes, at least one."""
    config = route_pb2.RouteConfiguration(name="floor-scope")
    while not config.virtual_hosts or config.ByteSize() < size:
        h = len(config.virtual_hosts)
        host = config.virtual_hosts.add(name=f"floor-host-{h}", domains=[f"fleet-route-{h:05d}.example.com"])
        for prefix in ("/", f"/v/fleet-route-{h:05d}/1"):
            route = host.routes.add(name=f"httproute/default/fleet-route-{h:05d}/rule/0")
            route.match.prefix = prefix
            route.route.cluster = f"kube_default_fsvc-{h}_80"
    response = discovery_pb2.DeltaDiscoveryResponse(type_url=types.ROUTE, system_version_info=str(nonce),
                                                     nonce=str(nonce))
    resource = response.resources.add(name=config.name, version=str(nonce))
    resource.resource.Pack(config)
    return response.SerializeToString()


class FloorServer:
    """Each stream is read by its handler; pushes write to all of them."""

    def __init__(self) -> None:
        self.streams: dict[Any, asyncio.Task[None] | None] = {}  # context -> its last write
        self.pushes = 0

    async def DeltaAggregatedResources(self, request_iterator: Any, context: Any) -> None:
        await context.read()
        await context.write(answer(0))
        self.streams[context] = None
        try:
            while await context.read() is not grpc.aio.EOF:
                pass
        finally:
            self.streams.pop(context, None)

    def push(self, size: int) -> None:
        """A write task per stream; where the last push's is still running (gRPC takes one write at
        a time; its completion can come after the proxy ACKed), after it."""
        self.pushes += 1
        encoded = answer(self.pushes, size)
        loop = asyncio.get_running_loop()
        for context, last in self.streams.items():
            write = context.write(encoded) if last is None or last.done() else _after(last, context.write(encoded))
            self.streams[context] = loop.create_task(write)


async def _after(last: asyncio.Task[None], write: Coroutine[Any, Any, None]) -> None:
    with contextlib.suppress(Exception):
        await last
    await write


async def serve(port: int) -> None:
    tune_gc()
    floor = FloorServer()
    server = grpc.aio.server(options=SERVER_OPTIONS)
    handler = grpc.stream_stream_rpc_method_handler(floor.DeltaAggregatedResources)
    service = "envoy.service.discovery.v3.AggregatedDiscoveryService"
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {
        "DeltaAggregatedResources": handler}),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    closed = asyncio.Event()

    pending = bytearray()

    def read() -> None:  # a push for each line ("BYTES"); stdin closed: the end
        data = os.read(sys.stdin.fileno(), 4096)
        pending.extend(data)
        while (end := pending.find(b"\n")) >= 0:
            floor.push(int(pending[:end] or 0))
            del pending[:end + 1]
        if not data:
            closed.set()

    asyncio.get_running_loop().add_reader(sys.stdin.fileno(), read)
    print("ready", flush=True)
    await closed.wait()
    await server.stop(None)


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
