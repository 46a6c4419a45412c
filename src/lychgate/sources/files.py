"""Local source: a directory of YAML manifests, watched for changes.

It behaves like a small API server in front of the store: it stamps the
metadata an API server would (uid, creationTimestamp, generation,
resourceVersion), and a manifest that fails validation is rejected the way
`kubectl apply` would be rejected: the last good version of that object stays
in place and the error is recorded against the file, the document and the field.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lychgate.api.base import ObjectKey, Resource, now
from lychgate.api.core import Pod
from lychgate.api.registry import BY_KIND, ManifestError, describe, parse
from lychgate.log import component_logger
from lychgate.sources import watcher
from lychgate.sources.locate import Positions, parse_path
from lychgate.store import Refusal, Store

log = component_logger("sources")

# libyaml is several times faster on large trees; pure Python if PyYAML lacks it.
_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):
    """Timestamps stay strings, as kubectl reads YAML: an unquoted `apiVersion: 2024-10-21`
    (Azure OpenAI's) is a string, not a date the field then refuses."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _Base.yaml_implicit_resolvers.items()}

SUFFIXES = watcher.SUFFIXES

# Kinds a cluster would run but local mode has no use for: skipped with a note
# instead of an error, so conformance and kubectl manifests load as they are.
# (Pods are read: InferencePools route to them, by the IP in their status; ConfigMaps
# are read: they hold the CA certificates of BackendTLSPolicies.)
IGNORED_KINDS = frozenset(
    {"Deployment", "ServiceAccount", "DaemonSet", "StatefulSet", "Role",
     "RoleBinding", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
)
# Another system's configuration kept beside the manifests (Istio's AuthorizationPolicy,
# ServiceEntry... for a waypoint): Istio reads it, lychgate never does.
IGNORED_GROUP_SUFFIX = ".istio.io"


@dataclass(frozen=True)
class Problem:
    """A manifest problem, as shown by the log and `lychgate get errors`."""

    file: str
    document: int | None  # 1-based index in a multi-document file
    object: str | None  # "HTTPRoute default/foo" when known
    message: str
    severity: str = "error"
    line: int | None = None  # 1-based, of the document (or of the YAML error)
    # (field path, message, its line) of each field the parser refused
    fields: tuple[tuple[str, str, int | None], ...] = ()

    def __str__(self) -> str:
        if self.line is not None:
            return f"{self.file}:{self.line}: {self.message}"
        where = self.file + (f" (document {self.document})" if self.document else "")
        return f"{where}: {self.message}"


# Where an object was read: its file, its document (1-based) and its index in a `List`.
Origin = tuple[str, int, int | None]


class FileSource:
    def __init__(self, directory: Path, store: Store, keep_positions: bool = False) -> None:
        # Resolved once: every path below derives from it, so the first load, the
        # watcher and a caller all name a file the same way (a relative
        # `lychgate run examples/quickstart` would otherwise own its files under
        # relative keys while the watcher reports absolute ones).
        self.directory = directory.resolve() if directory.is_dir() else canonical(directory)
        self.store = store
        # The keys of the objects each file holds (the objects are the store's): one key
        # tuple per object, shared by the store, this and `origins`.
        # Files are named by their canonical path as a string (a Path object per file held
        # 370 bytes: its parts, a list of them, its hash...).
        self._owned: dict[str, tuple[ObjectKey, ...]] = {}
        self.problems: dict[str, list[Problem]] = {}
        self._rv = itertools.count(1)
        # Where each object was read; its file is the object's owner.
        self.origins: dict[ObjectKey, Origin] = {}
        # `lychgate check` asks for the line of any object: it keeps each file's text.
        # `lychgate run` keeps none; a line is found when a file has a problem.
        self._keep_positions = keep_positions
        self._positions: dict[str, Positions] = {}
        # The objects each file holds a refused version of (store.refused says why).
        self._refused: dict[str, set[ObjectKey]] = {}

    # --- loading ------------------------------------------------------------

    def files(self) -> list[Path]:
        if self.directory.is_file():
            return [self.directory]
        return sorted(
            p for p in self.directory.rglob("*") if p.suffix in SUFFIXES and p.is_file()
        )

    def load_all(self) -> None:
        for path in self.files():
            self.reload(path)
        self.store.synced = True
        count = sum(len(v) for v in self._owned.values())
        log.info("loaded %d objects from %d files in %s", count, len(self._owned), self.directory)

    def reload(self, path: Path, text: str | None = None) -> None:
        """Bring the store in line with one file (created, edited or deleted); `text`:
        its content when it is not read from the disk (standard input, a conversion)."""
        path = canonical(path)
        file = str(path)
        problems: list[tuple[Problem, tuple[int, int | None]]] = []  # with where each was found
        previous = self._previous(file)
        if text is None and not path.exists():
            self._replace(file, previous, {})
            self._record_refusals(file, {})
            self.problems.pop(file, None)
            self._positions.pop(file, None)
            return
        try:
            if text is None:
                text = path.read_text(encoding="utf-8")
            documents = list(yaml.load_all(text, Loader=_Loader))
        except (yaml.YAMLError, UnicodeDecodeError, OSError) as err:
            # The whole file is unreadable: like a rejected apply, keep what it had.
            mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
            self._report(file, [Problem(self._rel(path), None, None, f"cannot parse: {_one_line(err)}",
                                        line=mark.line + 1 if mark is not None else None)])
            return
        current: dict[ObjectKey, Resource] = {}
        origins: dict[ObjectKey, tuple[int, int | None]] = {}
        refusals: dict[ObjectKey, Refusal] = {}
        for index, raw in enumerate(documents, start=1):
            if raw is None:
                continue
            self._admit_document(path, (index, None), raw, previous, current, origins, problems, refusals)
        self._replace(file, previous, current, origins)
        self._record_refusals(file, refusals)
        positions = Positions(text, _Loader)
        if self._keep_positions:
            self._positions[file] = positions
        self._report(file, [_placed(p, positions, origin) for p, origin in problems])

    def _admit_document(
        self,
        path: Path,
        where: tuple[int, int | None],
        raw: Any,
        previous: dict[ObjectKey, Resource],
        current: dict[ObjectKey, Resource],
        origins: dict[ObjectKey, tuple[int, int | None]],
        problems: list[tuple[Problem, tuple[int, int | None]]],
        refusals: dict[ObjectKey, Refusal],
    ) -> None:
        index = where[0]
        if isinstance(raw, dict) and raw.get("kind") == "List" and isinstance(raw.get("items"), list):
            for item, entry in enumerate(raw["items"]):
                self._admit_document(path, (index, item), entry, previous, current, origins, problems, refusals)
            return
        if isinstance(raw, dict) and (raw.get("kind") in IGNORED_KINDS or str(raw.get("apiVersion", "")).rpartition(
                "/")[0].endswith(IGNORED_GROUP_SUFFIX)):
            log.debug("%s: skipping %s (not used in local mode)", self._rel(path), describe(raw))
            return
        try:
            obj = parse(raw)
        except ManifestError as err:
            problems.append((Problem(self._rel(path), index, describe(raw), str(err),
                                     fields=tuple((f, m, None) for f, m in err.fields)), where))
            kept = self._identity(raw)
            if kept is not None and kept in previous:
                current[kept] = previous[kept]  # the last good version keeps serving
            refused = kept or _key_of(raw)
            if refused is not None:
                # The generation an API server would give this version: the next one.
                last = previous.get(refused) or self.store.get_key(refused)
                refusals[refused] = Refusal(str(err), err.fields, last.generation + 1 if last else 1,
                                            {k: v for k, v in raw.items() if k != "status"})
            return
        key = obj.key
        origin = self.origins.get(key)
        if origin is not None and origin[0] != str(path):
            problems.append((
                Problem(self._rel(path), index, str(key),
                        f"{key} is already defined in {self._rel(origin[0])}; this copy is ignored"), where))
            return
        if key in current:
            problems.append((
                Problem(self._rel(path), index, str(key),
                        f"{key} appears twice in this file; the later copy wins"), where))
        current[key] = self._stamp(obj, previous.get(key) or self.store.get_key(key))
        origins[key] = where

    def _identity(self, raw: Any) -> ObjectKey | None:
        if not isinstance(raw, dict):
            return None
        meta = raw.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            return None
        ns = meta.get("namespace") or "default"
        for key in (ObjectKey(str(raw.get("kind")), ns, meta["name"]),
                    ObjectKey(str(raw.get("kind")), "", meta["name"])):
            if key in self.origins:
                return key
        return None

    def _stamp(self, obj: Resource, old: Resource | None) -> Resource:
        """Set the metadata an API server would own; status is not read from files (but a Pod's)."""
        meta = obj.metadata
        spec_changed = old is None or _content(old) != _content(obj)
        generation = 1 if old is None else old.generation + (1 if spec_changed else 0)
        created = (old.metadata.creation_timestamp if old else None) or meta.creation_timestamp or now()
        uid = meta.uid or (old.metadata.uid if old else None) or _uid(obj.key)
        rv = str(next(self._rv)) if spec_changed or old is None else old.metadata.resource_version
        new_meta = meta.model_copy(
            update={"generation": generation, "creation_timestamp": created, "uid": uid,
                    "resource_version": rv}
        )
        # A Pod's status (its IP, readiness) is what InferencePools route to: the one input status.
        status = obj.status if isinstance(obj, Pod) else None
        return obj.model_copy(update={"metadata": new_meta, "status": status})

    def _previous(self, file: str) -> dict[ObjectKey, Resource]:
        """The objects `file` holds now (the store's, which are the file's)."""
        return {key: obj for key in self._owned.get(file, ()) if (obj := self.store.get_key(key)) is not None}

    def _replace(
        self, file: str, previous: dict[ObjectKey, Resource], current: dict[ObjectKey, Resource],
        origins: dict[ObjectKey, tuple[int, int | None]] | None = None,
    ) -> None:
        for key in {*self._owned.get(file, ()), *previous} - current.keys():
            self.store.delete(key)
            self.origins.pop(key, None)
        for key, obj in current.items():
            self.store.upsert(obj, key)
            if origins is not None and key in origins:  # (a refused version's last good one stays where it was)
                self.origins[key] = (file, *origins[key])
        if current:
            self._owned[file] = tuple(current)
        else:
            self._owned.pop(file, None)

    def _record_refusals(self, file: str, refusals: dict[ObjectKey, Refusal]) -> None:
        """Tell the store which objects of this file are refused now, and which no longer are."""
        for key in self._refused.pop(file, set()) - refusals.keys():
            self.store.unrefuse(key)
        for key, refusal in refusals.items():
            self.store.refuse(key, refusal)
        if refusals:
            self._refused[file] = set(refusals)

    def _report(self, file: str, problems: list[Problem]) -> None:
        old = self.problems.get(file, [])
        if problems:
            self.problems[file] = problems
        else:
            self.problems.pop(file, None)
        if problems != old:
            for problem in problems:
                log.error("%s", problem)
            if old and not problems:
                log.info("%s: all problems resolved", self._rel(file))

    def _rel(self, file: str | Path) -> str:
        path = Path(file)
        try:
            return str(path.relative_to(self.directory if self.directory.is_dir() else path.parent))
        except ValueError:
            return str(path)

    def all_problems(self) -> list[Problem]:
        return [p for problems in self.problems.values() for p in problems]

    def locate(self, key: ObjectKey, path: tuple[str | int, ...] = ()) -> tuple[str, int | None] | None:
        """The file (as problems name it) and line of an object, or of the deepest part of
        a field path it has; None for an object no file holds (the built-in GatewayClass)."""
        origin = self.origins.get(key)
        if origin is None:
            return None
        file, index, item = origin
        positions = self._positions.get(file)
        if positions is None:
            try:
                positions = Positions(Path(file).read_text(encoding="utf-8"), _Loader)
            except (OSError, UnicodeDecodeError):
                return self._rel(file), None
        return self._rel(file), positions.line(index, item, path)

    # --- watching -------------------------------------------------------------

    async def watch(self, stop: asyncio.Event) -> None:
        """Apply file changes as they happen until stop is set (sources/watcher.py)."""
        log.info("watching %s for changes", self.directory)
        async for batch in watcher.changes(self.directory, stop):
            # Files that are gone first: an editor's rename-over may report the
            # old name's deletion in the same batch as the new name's creation,
            # and the objects must leave their old owner before the new one claims them.
            changed = {*self.files(), *map(Path, self._owned)} if batch is None else {canonical(p) for p in batch}
            paths = sorted(changed, key=lambda p: (p.exists(), p))
            log.debug("sync: %d changed files", len(paths))
            for path in paths:
                self.reload(path)


def _key_of(raw: Any) -> ObjectKey | None:
    """The key a refused manifest of a known kind would have (None when it names none)."""
    if not isinstance(raw, dict) or not isinstance(kind := raw.get("kind"), str) or kind not in BY_KIND:
        return None
    meta = raw.get("metadata")
    if not isinstance(meta, dict) or not isinstance(name := meta.get("name"), str) or not name:
        return None
    namespace = (meta.get("namespace") or "default") if BY_KIND[kind].NAMESPACED else ""
    return ObjectKey(kind, namespace if isinstance(namespace, str) else "default", name)


def _one_line(err: Exception) -> str:
    """A YAML error on one line (its problem, then what it was in and where that started):
    problems are printed `file:line: message`, one a line."""
    problem, context = getattr(err, "problem", None), getattr(err, "context", None)
    if not isinstance(err, yaml.MarkedYAMLError) or problem is None:
        return " ".join(str(err).split())
    mark = err.problem_mark
    where = f" at column {mark.column + 1}" if mark is not None else ""  # the line is the problem's
    started = err.context_mark
    within = (f" ({context} that starts at line {started.line + 1}, column {started.column + 1})"
              if context and started is not None else f" ({context})" if context else "")
    return f"{problem}{where}{within}"


def _placed(problem: Problem, positions: Positions, where: tuple[int, int | None]) -> Problem:
    """A problem with the line of its object, and of each field it names."""
    index, item = where
    fields = tuple((f, m, positions.line(index, item, parse_path(f))) for f, m, _ in problem.fields)
    return dataclasses.replace(problem, line=positions.line(index, item), fields=fields)


def canonical(path: Path) -> Path:
    """The one name of a manifest file: absolute, its directory's symlinks resolved.

    The file itself is not resolved, so a symlinked manifest is owned under its own name.
    """
    return path.parent.resolve() / path.name


def _content(obj: Resource) -> Any:
    """Everything but metadata and status: what bumps generation in an API server."""
    return obj.model_dump(exclude={"metadata", "status"}, by_alias=True)


def _uid(key: ObjectKey) -> str:
    digest = hashlib.sha1(str(key).encode(), usedforsecurity=False).digest()
    return str(uuid.UUID(bytes=digest[:16]))
