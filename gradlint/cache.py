"""The results cache: the findings of each file, keyed by everything that decides them.

An entry's key is the sha256 of
- the file's bytes (not its path, name or mtime: a touched but unchanged file is a hit, and two
  files with the same content share an entry; the path is put back when the entry is read),
- the options that apply to the file (the rule codes selected for it after per-file-ignores,
  severity overrides, the pre-filter switch),
- the code fingerprint: gradlint's version, a hash of the source of every module of ``gradlint``
  and of the rules package, libcst's version and Python's version (GL000 messages come from
  Python's parser). Computed once per process, before the pool forks.

Layout: ``<dir>/.gitignore`` (``*``), ``<dir>/CACHEDIR.TAG``, ``<dir>/codes-<fingerprint>.json`` (the
rule codes, so that a fully cached run imports no rule module), ``<dir>/v1/<key>.json``, one small
JSON file per entry holding the findings (``Finding.to_dict()`` without the path, plus
``source_line``, ``statement_line`` and the fix, so that ``--fix`` works from cached findings).

Writes go to a temporary file in the same directory and are moved into place with
``os.replace``, so a reader (or a concurrent run) sees a whole entry or none; an entry that
cannot be read or does not have the expected shape is a miss (the file is linted again and the
entry rewritten). A cache that cannot be written (read-only directory) is silently skipped.
Files whose findings include GL001 (an internal error: a gradlint bug, or a resource limit) are
not cached. Source read from stdin is never cached (the engine only caches files).

Everything here runs in the worker processes: sources never travel between processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from typing import Any, Dict, List, Optional, Tuple

DEFAULT_DIR = ".gradlint_cache"
LAYOUT = "v2"
_TAG_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
_TAG = (_TAG_SIGNATURE + "\n# This file is a cache directory tag created by gradlint.\n"
        "# For information about cache directory tags see https://bford.info/cachedir/\n")

_CODE_FP: Optional[str] = None
_OPTIONS_FP: Dict[Any, bytes] = {}
_READY_DIRS: set = set()


# ----------------------------------------------------------------------------- keys
def _package_files() -> List[Tuple[str, str]]:
    """(label, path) of every module of gradlint and of the rules package, in a stable order."""
    import gradlint
    from gradlint.rule import _rules_package

    roots = [("gradlint", os.path.dirname(os.path.abspath(gradlint.__file__)))]
    for p in _rules_package().__path__:
        roots.append(("rules", os.path.abspath(p)))
    out: List[Tuple[str, str]] = []
    seen = set()
    for label, root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith(".py"):
                    full = os.path.join(dirpath, name)
                    if full not in seen:
                        seen.add(full)
                        out.append((f"{label}/{os.path.relpath(full, root)}", full))
    return out


def code_fingerprint() -> str:
    """A hash of what decides the findings besides the file and the options (once per process,
    about a millisecond: the package is ~300 KB of source)."""
    global _CODE_FP
    if _CODE_FP is None:
        import gradlint

        h = hashlib.sha256()
        h.update(f"gradlint {gradlint.__version__}\0{LAYOUT}\0".encode())
        h.update(f"python {sys.implementation.name} {sys.version_info[:3]}\0".encode())
        h.update(f"libcst {_libcst_version()}\0".encode())
        for label, path in _package_files():
            h.update(label.encode() + b"\0")
            try:
                with open(path, "rb") as fh:
                    h.update(hashlib.sha256(fh.read()).digest())
            except OSError:
                h.update(b"?")
        _CODE_FP = h.hexdigest()
    return _CODE_FP


def _libcst_version() -> str:
    # libcst's own version file, read (not imported: a warm run imports neither libcst nor the
    # heavy importlib.metadata); the installed metadata where that file is missing
    try:
        import importlib.util

        spec = importlib.util.find_spec("libcst")
        if spec is not None and spec.origin:
            with open(os.path.join(os.path.dirname(spec.origin), "_version.py"), encoding="utf-8") as fh:
                return fh.read().strip()[-200:]
    except (OSError, ImportError, ValueError):
        pass
    try:
        from importlib.metadata import version

        return version("libcst")
    except Exception:  # pragma: no cover - a broken installation: still a stable key
        return "unknown"


def _options_fingerprint(options: Any) -> bytes:
    fp = _OPTIONS_FP.get(options)
    if fp is None:
        text = json.dumps([sorted(options.codes), [list(p) for p in options.severity],
                           bool(options.prefilter), bool(getattr(options, "follow_imports", False))],
                          separators=(",", ":"))
        fp = _OPTIONS_FP[options] = text.encode()
    return fp


def key(data: bytes, options: Any, place: str = "") -> str:
    """``place``: the folder of the file (its imports resolve from there: the same text in
    another folder may import other modules)."""
    from gradlint.rule import docs_url

    h = hashlib.sha256(code_fingerprint().encode())
    h.update(b"\0")
    h.update(docs_url().encode())  # findings carry the rule's URL
    h.update(b"\0")
    h.update(_options_fingerprint(options))
    h.update(b"\0")
    h.update(hashlib.sha256(data).digest())
    h.update(b"\0" + place.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _entry_path(cache_dir: str, k: str) -> str:
    return os.path.join(cache_dir, LAYOUT, k + ".json")


# ----------------------------------------------------------------------------- entries
def _encode(findings: List[Any], display: str = "", deps: Optional[Dict[str, str]] = None) -> Optional[str]:
    rows = []
    for f in findings:
        if f.code == "GL001":
            return None
        d = f.to_dict()
        del d["path"]
        if display and f.path != display:  # in a module the file imports: where it is
            d["file"] = os.path.abspath(f.path)
        d["source_line"] = f.source_line
        d["statement_line"] = f.statement_line
        if f.raw_line:
            d["raw_line"] = f.raw_line
        if f.fix is not None:
            d["fix"] = {"edits": [[e.start, e.end, e.text] for e in f.fix.edits],
                        "safe": f.fix.safe, "description": f.fix.description}
        rows.append(d)
    return json.dumps({"findings": rows, "deps": deps or {}}, separators=(",", ":"), ensure_ascii=False)


def _decode(text: str, display: str, current: Any = None) -> Optional[List[Any]]:
    """The entry's findings; None when a module the file's findings depended on has changed
    (``current(path)``: the digest of that module's text now)."""
    from gradlint.positions import display_path
    from gradlint.rule import Edit, Finding, Fix, Severity

    entry = json.loads(text)
    deps = entry.get("deps") or {}
    if deps:
        if current is None:
            return None
        for path, digest in deps.items():
            if current(path) != digest:
                return None
    out = []
    for d in entry["findings"]:
        fix = None
        fd = d.get("fix")
        if fd is not None:
            fix = Fix(edits=tuple(Edit(int(s), int(e), str(t)) for s, e, t in fd["edits"]),
                      safe=bool(fd["safe"]), description=str(fd["description"]))
        out.append(Finding(
            path=display_path(d["file"], display) if "file" in d else display, line=int(d["line"]), column=int(d["column"]), end_line=int(d["end_line"]),
            end_column=int(d["end_column"]), code=str(d["code"]), name=str(d["name"]),
            severity=Severity(d["severity"]), message=str(d["message"]), hint=str(d["hint"]),
            fixable=bool(d["fixable"]), url=str(d["url"]), source_line=str(d["source_line"]),
            statement_line=int(d["statement_line"]), fix=fix,
            related=tuple((int(r["line"]), int(r["column"]), str(r["message"])) for r in d.get("related", ())),
            cell=int(d.get("cell", 0)), raw_line=int(d.get("raw_line", 0)),
        ))
    return out


def load(cache_dir: str, k: str, display: str, current: Any = None) -> Optional[List[Any]]:
    """The cached findings for key ``k`` (with ``display`` as their path), or None for a miss
    (no entry, one that cannot be read or decoded, or one whose dependencies changed: see
    ``_decode``)."""
    try:
        with open(_entry_path(cache_dir, k), "r", encoding="utf-8") as fh:
            text = fh.read()
        return _decode(text, display, current)
    except Exception:
        return None


def store(cache_dir: str, k: str, findings: List[Any], display: str = "",
          deps: Optional[Dict[str, str]] = None) -> None:
    """Write the entry atomically; give up silently when it cannot be written. ``deps``: the
    digest of each module of the project the file's findings depended on (gradlint.index)."""
    text = _encode(findings, display, deps)
    if text is None:
        return
    for _ in range(2):
        try:
            entries = _ensure_dir(cache_dir)
            _write_atomic(os.path.join(entries, k + ".json"), text)
            return
        except FileNotFoundError:  # removed since (gradlint clean): make it again, once
            _READY_DIRS.discard(os.path.join(cache_dir, LAYOUT))
        except OSError:
            return


def _write_atomic(path: str, text: str) -> None:
    # the temporary name is unique among live processes (pid) and within one (one write at a
    # time per target); plain open() so that the umask applies
    tmp = os.path.join(os.path.dirname(path), f".tmp-{os.getpid()}-{os.path.basename(path)}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _ensure_dir(cache_dir: str) -> str:
    entries = os.path.join(cache_dir, LAYOUT)
    if entries in _READY_DIRS:
        return entries
    os.makedirs(entries, exist_ok=True)
    for name, content in ((".gitignore", "# created by gradlint\n*\n"), ("CACHEDIR.TAG", _TAG)):
        path = os.path.join(cache_dir, name)
        if not os.path.exists(path):
            _write_atomic(path, content)
    _READY_DIRS.add(entries)
    return entries


# ----------------------------------------------------------------------------- clean
def is_cache_dir(path: str) -> bool:
    """Whether ``path`` looks like a directory gradlint made (so ``clean`` may delete it)."""
    if not os.path.isdir(path):
        return False
    if os.path.basename(os.path.normpath(os.path.abspath(path))) == DEFAULT_DIR:
        return True
    try:
        with open(os.path.join(path, "CACHEDIR.TAG"), encoding="utf-8") as fh:
            return fh.read(len(_TAG)) == _TAG
    except OSError:
        return False


def clean(cache_dir: str) -> Optional[Tuple[int, int]]:
    """Remove the cache directory: (entries removed, bytes freed), or None when there is none.
    Raises ValueError for a directory that is not a gradlint cache, OSError when it cannot be
    removed."""
    if not os.path.lexists(cache_dir):
        return None
    if not is_cache_dir(cache_dir):
        raise ValueError(f"{cache_dir} does not look like a gradlint cache (no CACHEDIR.TAG); not removed")
    entries = size = 0
    for dirpath, _, filenames in os.walk(cache_dir):
        for name in filenames:
            if name.endswith(".json") and not name.startswith(".tmp-"):
                entries += 1
            try:
                size += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                pass
    shutil.rmtree(cache_dir)
    return entries, size


# ----------------------------------------------------------------------------- the code list
def keep_code_table(cache_dir: Optional[str]) -> None:
    """Keep the rule registry's light code list in ``cache_dir`` (None: not kept)."""
    from gradlint.rule import use_code_table_store

    if cache_dir is None:
        use_code_table_store(None)
    else:
        use_code_table_store((lambda: load_code_table(cache_dir), lambda t: store_code_table(cache_dir, t)))


def _code_table_path(cache_dir: str) -> str:
    """``<dir>/codes-<fingerprint>.json``: beside the entries, not among them."""
    return os.path.join(cache_dir, f"codes-{code_fingerprint()[:32]}.json")


def load_code_table(cache_dir: str) -> Optional[Dict[str, bool]]:
    """The light code list (``gradlint.rule.code_table``) an earlier run of the same code wrote."""
    try:
        with open(_code_table_path(cache_dir), encoding="utf-8") as fh:
            data = json.load(fh)
        if isinstance(data, dict) and data and all(isinstance(v, bool) for v in data.values()):
            return {str(k): v for k, v in data.items()}
    except (OSError, ValueError):
        pass
    return None


def store_code_table(cache_dir: str, table: Dict[str, bool]) -> None:
    try:
        _ensure_dir(cache_dir)  # the directory with its .gitignore and CACHEDIR.TAG
        _write_atomic(_code_table_path(cache_dir), json.dumps(table))
    except (OSError, ValueError):
        pass
