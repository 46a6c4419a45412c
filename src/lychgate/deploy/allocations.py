"""Local mode: the loopback address and admin port of each Gateway's proxy.

In a cluster every Gateway gets its own Service address; locally each Gateway
gets its own address in 127.0.0.0/8, so two Gateways can both listen on port
80. Allocations are kept in the state directory so a Gateway keeps its address
and admin port across restarts of the control plane.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from pathlib import Path

FIRST_ADDRESS = ipaddress.IPv4Address("127.0.1.1")
FIRST_ADMIN_PORT = 19000


class Allocations:
    def __init__(self, path: Path, first_address: str = str(FIRST_ADDRESS), persist: bool = True) -> None:
        self.path = path
        # `lychgate check` and `translate` read the allocations of `lychgate run` and
        # allocate as it would, but never write its state directory.
        self.persist = persist
        self.first_address = ipaddress.IPv4Address(first_address)
        self.addresses: dict[str, str] = {}
        self.admin_ports: dict[str, int] = {}
        if path.exists():
            try:
                data = json.loads(path.read_text())
                self.addresses = dict(data.get("addresses", {}))
                self.admin_ports = {k: int(v) for k, v in data.get("adminPorts", {}).items()}
            except (ValueError, OSError):
                pass  # a damaged file only costs new allocations

    def address(self, gateway: str, requested: str | None = None) -> str:
        """The loopback address of a Gateway: the requested one, else a stable one."""
        if requested:
            return requested
        if gateway not in self.addresses:
            used = set(self.addresses.values())
            candidate = self.first_address
            while str(candidate) in used:
                candidate += 1
            self.addresses[gateway] = str(candidate)
            self._save()
        return self.addresses[gateway]

    def admin_port(self, gateway: str) -> int:
        if gateway not in self.admin_ports:
            used = set(self.admin_ports.values())
            port = FIRST_ADMIN_PORT
            while port in used or not _port_free(port):
                port += 1
            self.admin_ports[gateway] = port
            self._save()
        return self.admin_ports[gateway]

    def _save(self) -> None:
        if not self.persist:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"addresses": self.addresses, "adminPorts": self.admin_ports}, indent=2))
        tmp.replace(self.path)


def _port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
