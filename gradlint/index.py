"""The project index: which file of the project an import names, and that file's parsed source.

The model never touches the file system: when the walk meets ``from models import Net`` it asks
the index (through a ``ProjectView``, the index seen from one file) for the module ``models`` as
that file would import it, and gets a ``ModuleSource`` (path, text, libcst tree) or None. What is
not a file of the project (third-party and standard-library modules, torch itself) is None: the
model's own tables stay its knowledge of torch.

- **The project root**: the nearest folder above a file holding ``pyproject.toml``,
  ``setup.cfg``, ``setup.py`` or ``.git``; without one, the file's import root (below).
- **Import roots** of a file, in Python's order: the file's own import root (its folder, or for
  a module inside packages the folder above its top package: where ``python train.py`` or
  ``python -m pkg.train`` puts it on ``sys.path``), the project root and ``<root>/src``. Packages
  (folders with ``__init__.py``) and namespace packages (without) both resolve; modules outside
  the project root never do.
- **Parsing**: each file is read and parsed at most once per process while its bytes are
  unchanged (``parsed``; the engine's own parse of a linted file goes through it too), in a
  cache bounded by the total size of the sources it holds (least recently used first out).
- **Overlay**: the language server lends the texts of open, unsaved documents; they take the
  place of the files' bytes.

Nothing here imports or runs the user's code.
"""

from __future__ import annotations

import collections
import gc
import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
# never resolved to a project file, whatever the project holds: the model knows them by name
KNOWN_PACKAGES = frozenset({"torch", "numpy", "copy", "__future__"})
# Set by a lint run of ours (engine.few_collections, the pool's workers): a parsed tree is moved
# out of the cyclic collector's sight as soon as it is made (gc.freeze), and the collector does
# not run during the parse. A tree has no reference cycles and lives as long as the index keeps
# it (reference counting frees it when dropped); without this each of its objects is traversed
# by a young collection (about 3 s of CPU on pytorch-image-models, cold -j 1). A file's walk
# leaves little cyclic garbage to be frozen with it (engine._tear_down).
FREEZE_TREES = False
# the sources the parse cache may hold at once (a libcst tree takes about 110 times its source
# in memory: 16 MiB of source is about 1.8 GiB of trees). Measured on pytorch-image-models (5 MiB
# of source): with 4 MiB a cold -j 1 run parsed 457 times for 313 files (the imported modules
# evicted and parsed again), with 16 MiB each file once; the CPU time fell from 69 s to 43 s.
CACHE_SOURCE_BYTES = 16 * 1024 * 1024
MAX_FILE_BYTES = 1024 * 1024  # a larger module (generated code) is not followed
_TOP_IMPORT = re.compile(r"^(?:from[ \t]+(\.*[\w.]*)[ \t]+import\b|import[ \t]+([\w.]+(?:[ \t]+as[ \t]+\w+)?"
                         r"(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*))", re.M)
_TOP_GRAD_SWITCH = re.compile(r"^[\w.]*set_grad_enabled\(", re.M)


@dataclass
class ModuleSource:
    """A module of the project as the index read it."""

    path: str  # absolute, normalised
    name: str  # the dotted name it was imported as ("pkg.models"), "" when unknown
    text: str
    digest: str  # sha256 of its text (the cache's dependency record)
    module: Any  # the libcst tree
    is_package: bool  # an __init__.py
    # facts the model computes about the tree's nodes once per process (called names of a
    # function, whether it is a generator), keyed by node id: they live and die with the tree
    memo: Dict[Any, Any] = field(default_factory=dict)


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def find_root(path: str) -> str:
    """The project root of the file (or folder) ``path`` (see the module docstring)."""
    start = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path) or ".")
    d = start
    while True:
        if any(os.path.exists(os.path.join(d, m)) for m in ROOT_MARKERS):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return import_root(start)
        d = parent


def import_root(folder: str) -> str:
    """The folder Python puts on ``sys.path`` for a module in ``folder``: the first folder up
    that is not a package."""
    d = os.path.abspath(folder)
    while os.path.isfile(os.path.join(d, "__init__.py")):
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return d


class ProjectIndex:
    """One per project root and process (``index_for``)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.overlay: Dict[str, str] = {}  # path -> text of an open, unsaved document
        self._parsed: "collections.OrderedDict[str, ModuleSource]" = collections.OrderedDict()
        self._bytes = 0
        self._exists: Dict[str, bool] = {}
        self._tops: Dict[str, Tuple[List[Tuple[str, int]], bool, Optional[str]]] = {}
        self._runs: Dict[str, List[Tuple[str, str, bool, Optional[str]]]] = {}
        self._resolved: Dict[Tuple[str, str, int], Optional[Tuple[str, str, bool]]] = {}
        self._folders: Dict[str, str] = {}  # importer -> its absolute folder (asked ~1,000 times a file)
        self.parses = 0  # how many parses the cache made (tests and bench read it)
        # what other modules compute from the whole project (gradlint.callers), dropped with the
        # rest of what the index knows of the files (refresh)
        self.derived: Dict[str, Any] = {}

    # ------------------------------------------------------------------ resolution
    def roots_for(self, importer: str) -> List[str]:
        out: List[str] = []
        for r in (import_root(os.path.dirname(os.path.abspath(importer))), self.root,
                  os.path.join(self.root, "src")):
            if r not in out and self._inside(r):
                out.append(r)
        return out

    def _inside(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    def _isfile(self, path: str) -> bool:
        hit = self._exists.get(path)
        if hit is None:
            hit = self._exists[path] = path in self.overlay or os.path.isfile(path)
        return hit

    def _isdir(self, path: str) -> bool:
        key = path + os.sep
        hit = self._exists.get(key)
        if hit is None:
            hit = self._exists[key] = os.path.isdir(path)
        return hit

    def _module_file(self, base: str, parts: List[str]) -> Optional[Tuple[str, bool]]:
        """(file, is_package) of the module ``parts`` under the folder ``base``."""
        d = base
        for part in parts[:-1]:
            d = os.path.join(d, part)
            if not self._isdir(d):
                return None
        last = os.path.join(d, parts[-1])
        if self._isfile(last + ".py"):
            return last + ".py", False
        if self._isfile(os.path.join(last, "__init__.py")):
            return os.path.join(last, "__init__.py"), True
        if self._isdir(last):
            return last, True  # a namespace package: no file, but its submodules resolve
        return None

    def resolve(self, importer: str, module: str, level: int = 0) -> Optional[Tuple[str, str, bool]]:
        """``(path, dotted name, is_package)`` of the module ``module`` (``a.b``; ``""`` with a
        ``level`` for ``from . import x``) as ``importer`` imports it; a namespace package's
        path is its folder. None when it is no module of the project."""
        folder = self._folders.get(importer)
        if folder is None:
            folder = self._folders[importer] = os.path.dirname(os.path.abspath(importer))
        key = (folder, module, level)
        if key in self._resolved:
            return self._resolved[key]
        found = self._resolved[key] = self._resolve(importer, module, level)
        return found

    def _resolve(self, importer: str, module: str, level: int) -> Optional[Tuple[str, str, bool]]:
        parts = [p for p in module.split(".") if p] if module else []
        if level:
            base = os.path.dirname(os.path.abspath(importer))
            for _ in range(level - 1):
                base = os.path.dirname(base)
            if not self._inside(base):
                return None
            if not parts:
                init = os.path.join(base, "__init__.py")
                return (init if self._isfile(init) else base), "", True
            found = self._module_file(base, parts)
            return (found[0], "", found[1]) if found is not None and self._inside(found[0]) else None
        if not parts or parts[0] in KNOWN_PACKAGES:
            return None
        for r in self.roots_for(importer):
            found = self._module_file(r, parts)
            if found is not None:
                return found[0], ".".join(parts), found[1]
        return None

    # ------------------------------------------------------------------ sources
    def load(self, path: str, name: str = "") -> Optional[ModuleSource]:
        """The parsed module at ``path`` (a .py file of the project), or None when it cannot be
        read, decoded or parsed (the file's own lint reports that)."""
        if not path.endswith(".py") or not self._inside(path):
            return None
        text = self.text_of(path)
        if text is None:
            return None
        return self.parsed_text(path, text, name)

    def text_of(self, path: str) -> Optional[str]:
        """The text of ``path`` now (an open document's unsaved text first), decoded as Python
        does; None when it cannot be read or decoded, or is too large to follow."""
        text = self.overlay.get(path)
        if text is not None:
            return text
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
        if len(data) > MAX_FILE_BYTES:
            return None
        from gradlint.engine import decode

        try:
            return decode(data)
        except (UnicodeDecodeError, SyntaxError, LookupError):
            return None

    def parsed_text(self, path: str, text: str, name: str = "") -> Optional[ModuleSource]:
        """The cached parse of ``path`` when its text is ``text``; else parse it and remember
        it. None when libcst cannot parse it (the file's own lint reports that)."""
        path = os.path.abspath(path)
        digest = digest_of(text)
        hit = self._parsed.get(path)
        if hit is not None and hit.digest == digest:
            self._parsed.move_to_end(path)
            if name and not hit.name:
                hit.name = name
            return hit
        import libcst as cst

        frozen = FREEZE_TREES and gc.isenabled()
        if frozen:
            gc.disable()
        try:
            module = cst.parse_module(text)
        except Exception:
            return None
        finally:
            if frozen:
                gc.enable()
                gc.freeze()
        self.parses += 1
        src = ModuleSource(path, name, text, digest, module, os.path.basename(path) == "__init__.py")
        self._remember(src)
        return src

    def _remember(self, src: ModuleSource) -> None:
        old = self._parsed.pop(src.path, None)
        if old is not None:
            self._bytes -= len(old.text)
        self._parsed[src.path] = src
        self._bytes += len(src.text)
        while self._bytes > CACHE_SOURCE_BYTES and len(self._parsed) > 1:
            _, gone = self._parsed.popitem(last=False)
            self._bytes -= len(gone.text)

    def forget(self, path: str) -> None:
        """``path`` changed (an edit in the editor, a file written by --fix)."""
        path = os.path.abspath(path)
        gone = self._parsed.pop(path, None)
        if gone is not None:
            self._bytes -= len(gone.text)
        self.refresh()

    def refresh(self) -> None:
        """Forget which files exist and what they import (a long-lived process: the language
        server)."""
        self._exists.clear()
        self._tops.clear()
        self._runs.clear()
        self._resolved.clear()
        self.derived.clear()

    def import_time(self, path: str) -> Tuple[List[Tuple[str, int]], bool, Optional[str]]:
        """What running ``path``'s top level does at import, read from its text without a
        parse: the modules its column-0 import statements name (``(module, level)``), whether a
        column-0 statement switches grad mode (``...set_grad_enabled(``), and its digest."""
        hit = self._tops.get(path)
        if hit is None:
            text = self.text_of(path) if path.endswith(".py") else None
            if text is None:
                hit = ([], False, None)
            else:
                names = []
                for m in _TOP_IMPORT.finditer(text):
                    name = m.group(1) if m.group(1) is not None else m.group(2)
                    for part in ([name] if m.group(1) is not None else [n.strip().split(" ")[0] for n in name.split(",")]):
                        level = len(part) - len(part.lstrip("."))
                        names.append((part[level:], level))
                hit = (names, _TOP_GRAD_SWITCH.search(text) is not None, digest_of(text))
            self._tops[path] = hit
        return hit

    def runs_at_import(self, path: str, dotted: str) -> List[Tuple[str, str, bool, Optional[str]]]:
        """``(path, dotted name, switches grad mode, digest)`` of each module of the project that
        importing ``path`` runs (itself and what its top level imports, transitively, each once),
        in the order their top levels finish (Python's order); memoised until ``refresh``."""
        hit = self._runs.get(path)
        if hit is None:
            hit = self._runs[path] = []
            self._run_order(path, dotted, set(), hit)
        return hit

    def _run_order(self, path: str, dotted: str, seen: set, out: List[Tuple[str, str, bool, Optional[str]]]) -> None:
        seen.add(path)
        names, switches, digest = self.import_time(path)
        for name, level in names:
            found = self.resolve(path, name, level)
            if found is None or found[0] in seen or self._isdir(found[0]):
                continue
            self._run_order(found[0], found[1], seen, out)
        out.append((path, dotted, switches, digest))

    def current_digest(self, path: str) -> Optional[str]:
        """The digest of ``path``'s text now (the cache checks its dependencies with it)."""
        self._exists.clear()
        text = self.text_of(path)
        return digest_of(text) if text is not None else None


class ProjectView:
    """The index as one linted file sees it: what the model may ask. It records every module it
    handed out (the file's result depends on them: the cache keeps their digests)."""

    def __init__(self, index: ProjectIndex, path: str) -> None:
        self.index = index
        self.path = os.path.abspath(path)
        self.used: Dict[str, str] = {}  # path -> digest of each module handed out
        # what this view handed out, by request: one lint sees one state of each file (and the
        # walk asks for the same modules thousands of times: each ask read and hashed the file)
        self._handed: Dict[Tuple[str, str, int], Optional[ModuleSource]] = {}

    def module(self, importer: str, name: str, level: int = 0) -> Optional[ModuleSource]:
        """The module ``name`` as ``importer`` (this file, or a module handed out before)
        imports it; a package gives its ``__init__.py``, a namespace package an empty module."""
        key = (importer, name, level)
        if key in self._handed:
            return self._handed[key]
        src = self._handed[key] = self._module(importer, name, level)
        return src

    def _module(self, importer: str, name: str, level: int) -> Optional[ModuleSource]:
        found = self.index.resolve(importer, name, level)
        if found is None:
            return None
        path, dotted, _ = found
        if self.index._isdir(path):
            return ModuleSource(path, dotted, "", "", None, True)  # a namespace package
        src = self.index.load(path, dotted)
        if src is not None and src.path != self.path:
            self.used[src.path] = src.digest
        return src

    def import_time_switches(self, importer: str, name: str, level: int, seen: set) -> List[ModuleSource]:
        """The modules of the project that importing ``name`` runs (the module, the packages
        above it, and what their top levels import, transitively; each once per ``seen``) whose
        top level switches grad mode, in the order Python runs them. Every module met is a
        dependency of the file's result."""
        out: List[ModuleSource] = []
        todo: List[Tuple[str, str, int]] = []
        parts = name.split(".") if name else []
        if level == 0 and parts:
            todo = [(importer, ".".join(parts[:i]), 0) for i in range(1, len(parts) + 1)]
        else:
            todo = [(importer, name, level)]
        self._closure(todo, seen, out)
        return out

    def _closure(self, todo: List[Tuple[str, str, int]], seen: set, out: List[ModuleSource]) -> None:
        for importer, name, level in todo:
            found = self.index.resolve(importer, name, level)
            if found is None or found[0] in seen or self.index._isdir(found[0]):
                continue
            # the modules importing found[0] runs, from the index's memo (the same for every
            # file: a file of timm walked ~100 modules' import lists for each of its imports),
            # less those this file's earlier imports ran already
            for path, dotted, switches, digest in self.index.runs_at_import(found[0], found[1]):
                if path in seen:
                    continue
                seen.add(path)
                if digest is not None and path != self.path:
                    self.used.setdefault(path, digest)
                if switches:
                    src = self.index.load(path, dotted)
                    if src is not None:
                        out.append(src)

    def submodule(self, package: ModuleSource, name: str) -> Optional[ModuleSource]:
        """``package.name`` as a module (``from pkg import models``)."""
        base = package.path if os.path.isdir(package.path) else os.path.dirname(package.path)
        return self.module(os.path.join(base, "__init__.py"), name, 1)


_INDEXES: Dict[str, ProjectIndex] = {}


_ROOTS: Dict[str, str] = {}


def index_for(path: str) -> ProjectIndex:
    """The process's index of the project ``path`` belongs to."""
    folder = os.path.dirname(os.path.abspath(path))
    root = _ROOTS.get(folder)
    if root is None:
        root = _ROOTS[folder] = find_root(path)
    found = _INDEXES.get(root)
    if found is None:
        found = _INDEXES[root] = ProjectIndex(root)
    return found


def view_for(path: Optional[str]) -> Optional[ProjectView]:
    if not path:
        return None
    return ProjectView(index_for(path), path)
