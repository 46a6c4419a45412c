"""A port picked now for a process that binds it later (the AI extension, a test's
control plane): taken from below the kernel's ephemeral range, so that no outgoing
connection in between (Envoy's to a backend, say) can be handed the same port."""

from __future__ import annotations

import random
import socket

LOW, HIGH = 20000, 32768  # Linux's ephemeral ports start at 32768 by default
# Ports handed out by this process: two picks before either is bound (a control plane's
# xDS, admin and metrics ports) must not be the same free port.
_given: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    for _ in range(500):
        port = random.randrange(LOW, HIGH)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port on {host} between {LOW} and {HIGH}")
