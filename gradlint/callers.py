"""Callers across the project: does every call of a function (or method) name in the project run
with grad mode off?

A function's body is walked with grad mode *assumed* on (its callers decide). Its callers in the
same file are known to the walk (``Model.grad_off_functions``); those in other files are found
here, from the project index, so that an inference method (``predict``, ``generate``) that every
caller runs under ``torch.no_grad()`` / ``torch.inference_mode()`` in another module is not
linted as if it ran with grad on.

Call sites are found by name (an over-approximation: every call of the function is among them):
``x.name(...)`` and ``name(...)`` in every ``.py`` file of the project that mentions the name
(a word index built once per process, from the files' text; only those files are parsed, through
the index's parse cache). A site's mode is read from the syntax around it: an enclosing ``with
torch.no_grad()`` / ``torch.inference_mode()`` / ``torch.set_grad_enabled(False)`` (off) or
``torch.enable_grad()`` / ``set_grad_enabled(True)`` (on), else the enclosing function's decorator
of the same kind, else the enclosing function's own callers (by name, a few levels deep), else
on (module level). Any other mention of the name (``fn=model.predict``, ``map(infer, xs)``) may
be a call with any mode: the answer is then no. No call site found is no as well (nothing known:
the assumption stays). Not read: notebooks, files outside the project root or in hidden, virtual
environment and build folders, and projects of more than 5,000 files.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.names import dotted, node_children

# names called implicitly (by torch, a framework or Python), never only where the code calls
# them by name: their callers cannot be counted
_IMPLICIT = re.compile(r"^(__\w+__|forward|backward|step|.*_step|.*_step_end|on_\w+|.*_epoch_end|configure_\w+|"
                       r"setup|teardown|prepare_data|.*_dataloader|main|run)$")
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "env", "build", "dist"})
_MAX_FILES = 5000  # a larger tree: no answer (the assumption stays)
_DEPTH = 3  # how many levels of callers of callers are followed
_MAX_MENTIONS = 64  # a name in more files than that (`update`, `apply`): no answer
_WORD = re.compile(r"[A-Za-z_]\w*")

OFF, ON = "off", "on"


class _Words:
    """Per project index: which files mention each name (in code, a string or a comment)."""

    def __init__(self, index: Any) -> None:
        self.files: Dict[str, List[str]] = {}
        self.complete = True
        count = 0
        for folder, dirs, names in os.walk(index.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
            for n in sorted(names):
                if not n.endswith(".py"):
                    continue
                count += 1
                if count > _MAX_FILES:
                    self.complete = False
                    return
                path = os.path.join(folder, n)
                for w in _file_words(index, path):
                    self.files.setdefault(w, []).append(path)


# path -> (what identifies its text: an open document's digest, or the file's size and mtime,
# the names in it): a project's word index is rebuilt (after the index's refresh) from these
_FILE_WORDS: Dict[str, Tuple[Any, frozenset]] = {}


def _file_words(index: Any, path: str) -> frozenset:
    overlay = index.overlay.get(path)
    if overlay is not None:
        sig: Any = ("overlay", hash(overlay))
    else:
        try:
            st = os.stat(path)
        except OSError:
            return frozenset()
        sig = (st.st_size, st.st_mtime_ns)
    hit = _FILE_WORDS.get(path)
    if hit is not None and hit[0] == sig:
        return hit[1]
    text = index.text_of(path)
    words = frozenset(_WORD.findall(text)) if text is not None else frozenset()
    _FILE_WORDS[path] = (sig, words)
    return words


def _words(index: Any) -> _Words:
    got = index.derived.get("callers.words")
    if got is None:
        got = index.derived["callers.words"] = _Words(index)
    return got


def all_calls_grad_off(project: Any, name: str, method: bool) -> bool:
    """Does every call of the function ``name`` (a method of a class when ``method``: only
    ``x.name(...)`` calls it) in the project run with grad mode off (and is there one)? The
    files that decided it become dependencies of the linted file's result."""
    if project is None or _IMPLICIT.match(name):
        return False
    memo = project.index.derived.setdefault("callers.grad_off", {})
    answer, deps = _all_off(project.index, (name, method), memo, 0, frozenset())
    for path, digest in deps.items():
        if path != project.path:
            project.used.setdefault(path, digest)
    return answer


Site = Any  # OFF, ON, or (name, is_method) of the function whose callers decide
Deps = Dict[str, str]  # path -> digest of the files read for an answer


def _all_off(index: Any, fn: Tuple[str, bool], memo: Dict[Any, Tuple[bool, Deps]], depth: int,
             stack: frozenset) -> Tuple[bool, Deps]:
    if fn in memo:
        return memo[fn]
    name = fn[0]
    if fn in stack or depth > _DEPTH or _IMPLICIT.match(name):
        return False, {}
    words = _words(index)
    if not words.complete:
        return False, {}
    files = words.files.get(name, ())
    deps: Deps = {}
    answer = bool(files) and len(files) <= _MAX_MENTIONS
    seen_site = False
    for path in files if answer else ():
        src = index.load(path)
        if src is None or src.module is None:
            answer = False  # a file that mentions it and cannot be parsed: anything may be there
            break
        deps[src.path] = src.digest
        found = src.memo.get(("grad_sites", fn))
        if found is None:
            found = src.memo[("grad_sites", fn)] = _sites(src.module, fn)
        for mode in found:
            seen_site = True
            if mode == OFF:
                continue
            if mode != ON:
                inner, more = _all_off(index, mode, memo, depth + 1, stack | {fn})
                deps.update(more)
                if inner:
                    continue
            answer = False  # (the files not read yet cannot change that)
            break
        if not answer:
            break
    answer = answer and seen_site
    if depth == 0 or answer:
        memo[fn] = (answer, deps)  # (a "no" found below the top may come from the cut of a cycle)
    return answer, deps


def _sites(module: cst.Module, fn: Tuple[str, bool]) -> List[Site]:
    """The mode of each mention of the function ``fn`` in ``module``."""
    out: List[Site] = []
    _Scan(fn, out).node(module, None, None, False)
    return out


class _Scan:
    """``mode``: what the enclosing ``with`` blocks and decorators set (None: nothing; the
    enclosing function's callers decide, or at module level, grad is on); ``owner``: the
    enclosing function as (name, is_method); ``in_class``: directly in a class body."""

    def __init__(self, fn: Tuple[str, bool], out: List[Site]) -> None:
        self.name, self.method = fn
        self.out = out

    def site(self, mode: Optional[str], owner: Any) -> None:
        self.out.append(mode if mode is not None else (owner if owner is not None else ON))

    def node(self, n: Any, mode: Optional[str], owner: Any, in_class: bool) -> None:
        name = self.name
        if isinstance(n, cst.FunctionDef):
            fmode = None
            for d in n.decorators:
                self.node(d.decorator, mode, owner, False)
                got = _grad_of(d.decorator)
                if got is not None:
                    fmode = got
            self.node(n.params, mode, owner, False)
            self.node(n.body, fmode, (n.name.value, in_class), False)
            return
        if isinstance(n, cst.ClassDef):
            for b in list(n.bases) + list(n.decorators):
                self.node(b, mode, owner, False)
            self.node(n.body, mode, owner, True)
            return
        if isinstance(n, cst.Lambda):
            self.node(n.body, ON, owner, False)  # called anywhere, any time
            return
        if isinstance(n, cst.With):
            inner = mode
            for item in n.items:
                self.node(item.item, mode, owner, False)
                got = _grad_of(item.item)
                if got is not None:
                    inner = got
            self.node(n.body, inner, owner, False)
            return
        if isinstance(n, cst.Call):
            func = n.func
            hit = (isinstance(func, cst.Attribute) and func.attr.value == name) or (
                not self.method and isinstance(func, cst.Name) and func.value == name)
            if hit:
                self.site(mode, owner)
                if isinstance(func, cst.Attribute):
                    self.node(func.value, mode, owner, False)
                for a in n.args:
                    self.node(a, mode, owner, False)
                return
        elif isinstance(n, cst.Attribute):
            if n.attr.value == name:
                self.out.append(ON)  # `fn=model.predict`: called elsewhere, with any mode
            self.node(n.value, mode, owner, False)
            return
        elif isinstance(n, cst.Name):
            if n.value == name and not self.method:
                self.out.append(ON)  # `pool.map(infer, xs)`
            return
        elif isinstance(n, cst.SimpleString):
            if n.value.strip("\"'").lstrip("rbuRBU").strip("\"'") == name:
                self.out.append(ON)  # `getattr(model, "predict")`
            return
        elif isinstance(n, (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal)):
            return  # `from models import infer` names it without calling it
        elif isinstance(n, cst.Param):
            self.node(n.annotation, mode, owner, False)
            self.node(n.default, mode, owner, False)
            return
        elif isinstance(n, (cst.AssignTarget, cst.AnnAssign)) and isinstance(n.target, cst.Attribute) \
                and n.target.attr.value == name:
            # `self.predict = ...` binds the name, calls nothing
            self.node(n.target.value, mode, owner, False)
            if isinstance(n, cst.AnnAssign):
                self.node(n.value, mode, owner, False)
            return
        if n is None:
            return
        for child in node_children(n):
            self.node(child, mode, owner, in_class)


def _grad_of(expr: Any) -> Optional[str]:
    """OFF or ON for what ``expr`` (a ``with`` item, a decorator) does to grad mode:
    ``torch.no_grad()``, ``torch.inference_mode()``, ``set_grad_enabled(False)`` (off),
    ``torch.enable_grad()``, ``set_grad_enabled(True)`` (on), any spelling of the import; ON for
    a grad switch whose flag is not a constant (nothing known); None for anything else."""
    args: Tuple[Any, ...] = ()
    if isinstance(expr, cst.Call):
        args = tuple(expr.args)
        expr = expr.func
    last = (dotted(expr) or "").rsplit(".", 1)[-1]
    flag: Optional[bool] = None
    if args and isinstance(args[0].value, cst.Name):
        flag = {"True": True, "False": False}.get(args[0].value.value)
    if last == "no_grad":
        return OFF
    if last == "inference_mode":
        return OFF if not args or flag is True else ON
    if last == "enable_grad":
        return ON
    if last == "set_grad_enabled":
        return OFF if flag is False else ON
    low = last.lower()
    if "grad" in low or "inference" in low:
        return ON  # a wrapper of the user's (`@maybe_no_grad(cfg)`): not known to be off
    return None
