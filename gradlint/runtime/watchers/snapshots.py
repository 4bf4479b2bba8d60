"""Snapshots that are not: state dicts, kept ``.grad`` tensors and deep copies of graph tensors.

* GL401 state-dict-alias: while a monitor is active ``nn.Module.state_dict`` and
  ``load_state_dict`` are wrapped (restored at exit, only if nobody replaced them meanwhile).
  Each top-level ``state_dict()`` (``keep_vars=False``) records, weakly per returned tensor (the
  detached aliases of the live parameters and buffers), the user's line and the tensor's version.
  At ``load_state_dict(sd)``, tensors of ``sd`` from such a snapshot that still share storage with
  the parameter they are loaded into and changed since (the version moved: optimizer steps,
  running statistics, another load) make the restore a no-op: reported at the ``state_dict()``
  line, the ``load_state_dict()`` as related. A load re-reads the versions (loading a tensor onto
  itself bumps them). A snapshot only read through Python (``best["w"]``) is out of reach.
* GL402 grad-alias: ``.grad`` reads get a handler in front of the core one (as ``mode.tap`` does,
  without its closure: an optimizer reads ``.grad`` several times per parameter and step and pays
  one frame look-up). A read by the user's code (the accessing frame is outside torch, NumPy,
  gradlint and the standard library) records the gradient tensor weakly with the line and its
  version. When such a tensor changes in place (a ``backward()`` accumulates into it; ``zero_()``
  or ``_foreach_zero_``, what ``zero_grad(set_to_none=False)`` runs, zeroes it), the user's live
  frames are asked which local (``self`` attribute, element of a list/dict local) still holds it,
  and the source whether that name is read again before it is rebound (the next line naming it,
  or the first of the loop around). Reported at the line that took the reference, the change as
  related. One frame scan per user statement, none while no user-read gradient changed.
* GL403 deepcopy-non-leaf: torch raises "Only Tensors created explicitly by the user (graph
  leaves) support the deepcopy protocol" inside ``Tensor.__deepcopy__``, which the mode sees. The
  object given to the outermost ``copy.deepcopy`` (read from its frame) is searched for the path
  to the failing tensor. A graph tensor kept on a module or object attribute is blamed on the one
  statement that stored it (``<name>.<attr> = ...`` in the user's live frames, else the only
  ``self.<attr> = <not None>`` of the owner's class), the deepcopy as related; otherwise, and for
  a tensor or container copied directly, the deepcopy line.
"""

from __future__ import annotations

import ast
import collections
import copy
import inspect
import os
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
from torch.utils.weak import WeakIdKeyDictionary

from gradlint.runtime import mode as _mode
from gradlint.runtime.attribution import _skip_prefixes, _skipped, display_path, where
from gradlint.runtime.mode import describe, tap
from gradlint.runtime.sites import _own_nodes, _scope_of, _tree, bindings, find_holders, user_frames
from gradlint.runtime.watchers import Watcher

Tensor = torch.Tensor
LEAVES_ONLY = "support the deepcopy protocol"
_KEY = "_gradlint_snapshots"
_ORIG_STATE_DICT = nn.Module.state_dict
_ORIG_LOAD = nn.Module.load_state_dict
_ACTIVE: List["Snapshots"] = []
_TLS = threading.local()
_no_torch_function = torch._C.DisableTorchFunction  # our own reads of tensor attributes skip the modes
_GRADLINT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_COPY_FILE = copy.__file__


# ------------------------------------------------------------------------------ GL401
def _state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
    w = _ACTIVE[-1] if _ACTIVE else None
    if w is None:
        return _ORIG_STATE_DICT(self, *args, **kwargs)
    depth = getattr(_TLS, "depth", 0)
    _TLS.depth = depth + 1
    try:
        out = _ORIG_STATE_DICT(self, *args, **kwargs)
    finally:
        _TLS.depth = depth
    if depth == 0 and not kwargs.get("keep_vars", args[2] if len(args) > 2 else False):
        try:
            with _no_torch_function():
                w.snapshot_taken(out)
        except Exception:
            pass
    return out


def _load_state_dict(self: Any, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
    w = _ACTIVE[-1] if _ACTIVE else None
    if w is None or not w._snaps:
        return _ORIG_LOAD(self, state_dict, *args, **kwargs)
    try:
        with _no_torch_function():
            w.restoring(self, state_dict)
    except Exception:
        pass
    out = _ORIG_LOAD(self, state_dict, *args, **kwargs)
    try:
        with _no_torch_function():
            for v in list(state_dict.values()):
                rec = w._snaps.get(v) if isinstance(v, Tensor) else None
                if rec is not None:
                    rec[2] = v._version  # a load copies in place, onto itself too
    except Exception:
        pass
    return out


# ------------------------------------------------------------------------------ GL402
_USER_FILE: Dict[str, Optional[str]] = {}  # filename -> display path (None: not the user's)


def _user_path(filename: str) -> Optional[str]:
    try:
        return _USER_FILE[filename]
    except KeyError:
        path = None if _skipped(filename, _skip_prefixes()) else display_path(filename)
        if filename.startswith(_GRADLINT):
            return None  # not cached: the accessor is further out
        _USER_FILE[filename] = path
        return path


def _ref(node: ast.AST) -> Optional[Tuple[str, bool]]:
    if isinstance(node, ast.Name):
        return node.id, isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}", isinstance(node.ctx, ast.Load)
    return None


def _read_later(frame: Any, name: str) -> bool:
    """Does the frame's function read ``name`` again before rebinding it (the next line that
    names it, after the current one; in a loop, the first of the loop body on the next pass)?"""
    tree = _tree(frame.f_code.co_filename)
    if tree is None:
        return False
    occ: Dict[int, bool] = {}
    loops = []
    for node in _own_nodes(_scope_of(tree, frame)):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            loops.append(node)
        ref = _ref(node)
        if ref is not None and ref[0] == name:
            occ[node.lineno] = occ.get(node.lineno, False) or ref[1]
    cur = frame.f_lineno
    after = sorted(ln for ln in occ if ln > cur)
    if after:
        return occ[after[0]]
    around = [lp for lp in loops if lp.lineno <= cur <= (lp.end_lineno or lp.lineno)]
    if around:
        loop = max(around, key=lambda lp: lp.lineno)
        inside = sorted(ln for ln in occ if loop.lineno <= ln <= cur)
        if inside:
            return occ[inside[0]]
    return False


_GRAD_GET = Tensor.grad.__get__  # type: ignore[attr-defined]
_PREV_GRAD_GET = _mode._TABLE.get(_GRAD_GET)


def _h_grad_get(m: Any, func: Any, args: Any, kwargs: Any) -> Any:
    """``.grad`` reads, installed as ``mode.tap`` would but without its closure and lambda: an
    optimizer reads ``.grad`` several times per parameter and step, and pays one frame look-up."""
    out = _PREV_GRAD_GET(m, func, args, kwargs) if _PREV_GRAD_GET is not None else func(*args, **kwargs)
    if out is not None and _KEY in m.__dict__:
        try:
            f = sys._getframe(2)  # the accessor, unless more gradlint frames are in between
            path = _USER_FILE.get(f.f_code.co_filename, "")
            if path is not None:
                while f is not None and f.f_code.co_filename.startswith(_GRADLINT):
                    f = f.f_back
                path = _user_path(f.f_code.co_filename) if f is not None else None
                if path is not None:
                    m.__dict__[_KEY].grad_read(out, f, path)
        except Exception:
            pass
    return out


def _tap_zero(m: Any, func: Any, args: Any, kwargs: Any, call: Any) -> Any:
    w = m.__dict__.get(_KEY)
    if w is None or not w._grads:
        return call()
    hit: List[Tensor] = []
    try:
        first = args[0] if args else kwargs.get("self")
        hit = [t for t in (first if isinstance(first, (list, tuple)) else [first])
               if isinstance(t, Tensor) and t in w._grads]
    except Exception:
        pass
    out = call()
    try:
        if hit:
            w.changed(hit, "it is zeroed in place (`zero_grad(set_to_none=False)` / `.grad.zero_()`)")
    except Exception:
        pass
    return out


_mode._TABLE[_GRAD_GET] = _h_grad_get
tap(Tensor.zero_, _tap_zero)
tap(torch._foreach_zero_, _tap_zero)


# ------------------------------------------------------------------------------ GL403
def _deepcopy_root() -> Any:
    """The object handed to the outermost ``copy.deepcopy`` of the current call."""
    f = sys._getframe(1)
    root = None
    skip = _skip_prefixes()
    while f is not None:
        name = f.f_code.co_filename
        if name == _COPY_FILE and f.f_code.co_name == "deepcopy":
            root = f.f_locals.get("x")
        elif not _skipped(name, skip):
            break
        f = f.f_back
    return root


def _children(obj: Any) -> List[Tuple[str, Any, Any, Optional[str]]]:
    """``(label, child, owner, attribute)`` for what ``copy.deepcopy`` would descend into."""
    if isinstance(obj, Tensor):
        return []
    if isinstance(obj, dict):
        return [(f"[{k!r}]", v, None, None) for k, v in list(obj.items())[:256]]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [(f"[{i}]", v, None, None) for i, v in enumerate(list(obj)[:256])]
    d = getattr(obj, "__dict__", None)
    if not isinstance(d, dict) or isinstance(obj, type) or inspect.isroutine(obj) or inspect.ismodule(obj):
        return []
    out = []
    for k, v in list(d.items()):
        if isinstance(obj, nn.Module) and k in ("_parameters", "_buffers", "_modules") and isinstance(v, dict):
            out.extend((f".{n}", c, obj, n) for n, c in v.items())
        elif not k.startswith("__"):
            out.append((f".{k}", v, obj, k))
    return out


def _path_to(root: Any, target: Tensor, limit: int = 5000) -> Optional[Tuple[str, Any, Optional[str]]]:
    """``(label, owner, attribute)`` of ``target`` inside ``root`` (owner: the object whose
    attribute holds it, None inside a container)."""
    queue = collections.deque([(root, "", None, None, 0)])
    seen = {id(root)}
    while queue and len(seen) < limit:
        obj, label, owner, attr, depth = queue.popleft()
        if obj is target:
            return label, owner, attr
        if depth >= 6:
            continue
        for sub, child, o, a in _children(obj):
            if id(child) not in seen:
                seen.add(id(child))
                queue.append((child, label + sub, o if o is not None else owner, a if o is not None else attr,
                              depth + 1))
    return None


def _store_site(owner: Any, attr: str) -> Optional[Tuple[str, int]]:
    """The one statement that stored the graph tensor on ``owner.<attr>``."""
    frames = list(user_frames())
    for frame, name, _ in find_holders(frames, lambda v: v is owner, attrs=False):
        if "[" in name:
            continue
        lines = [ln for ln, _ in bindings(frame, f"{name}.{attr}") if ln <= frame.f_lineno]
        if lines:
            return display_path(frame.f_code.co_filename), lines[-1]
    found = set()
    for cls in type(owner).__mro__:
        mod = getattr(cls, "__module__", "") or ""
        if mod == "builtins" or mod == "torch" or mod.startswith("torch."):
            continue
        try:
            filename = inspect.getsourcefile(cls)
        except (TypeError, OSError):
            continue
        tree = _tree(filename) if filename else None
        if tree is None:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ClassDef) and node.name == cls.__name__):
                continue
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Assign, ast.AnnAssign)) and sub.value is not None \
                        and not (isinstance(sub.value, ast.Constant) and sub.value.value is None):
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    if any(_ref(t) == (f"self.{attr}", False) for t in targets):
                        found.add((display_path(filename), sub.lineno))
    return found.pop() if len(found) == 1 else None


# ------------------------------------------------------------------------------ the family
class Snapshots(Watcher):
    codes = frozenset({"GL401", "GL402", "GL403"})

    def __init__(self, monitor: Any) -> None:
        super().__init__(monitor)
        self._snaps: Any = WeakIdKeyDictionary()  # state_dict tensor -> [path, line, version, key]
        self._grads: Any = WeakIdKeyDictionary()  # .grad tensor -> [[path, line, version], ...]
        self._scan: Tuple[Any, Dict[int, List[Tuple[str, bool, Tuple[int, ...], str]]]] = (None, {})
        self._reads = 0

    def install(self) -> None:
        if not _ACTIVE:
            nn.Module.state_dict = _state_dict  # type: ignore[method-assign, assignment]
            nn.Module.load_state_dict = _load_state_dict  # type: ignore[method-assign, assignment]
        _ACTIVE.append(self)
        self.m.__dict__[_KEY] = self

    def uninstall(self) -> None:
        self.m.__dict__.pop(_KEY, None)
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if not _ACTIVE:
            if nn.Module.__dict__.get("state_dict") is _state_dict:
                nn.Module.state_dict = _ORIG_STATE_DICT  # type: ignore[method-assign]
            if nn.Module.__dict__.get("load_state_dict") is _load_state_dict:
                nn.Module.load_state_dict = _ORIG_LOAD  # type: ignore[method-assign]
        self._snaps = WeakIdKeyDictionary()
        self._grads = WeakIdKeyDictionary()
        self._scan = (None, {})

    # -- GL401 --------------------------------------------------------------------------------
    def snapshot_taken(self, sd: Any) -> None:
        path, line = where()
        for k, v in sd.items():
            if isinstance(v, Tensor):
                self._snaps[v] = [path, line, v._version, k]

    def restoring(self, module: Any, sd: Any) -> None:
        live = None
        stale = []
        for k, v in list(sd.items()):
            rec = self._snaps.get(v) if isinstance(v, Tensor) else None
            if rec is None or v._version == rec[2]:
                continue
            if live is None:
                live = dict(module.named_parameters(remove_duplicate=False))
                live.update(module.named_buffers(remove_duplicate=False))
            t = live.get(k)
            if t is not None and t.untyped_storage().data_ptr() == v.untyped_storage().data_ptr() != 0:
                stale.append((k, v, rec))
        if not stale:
            return
        k, v, rec = stale[0]
        here = where()
        names = ", ".join(f"`{s[0]}`" for s in stale[:3]) + (", ..." if len(stale) > 3 else "")
        self.m._add("GL401", f"`state_dict()` here returns live views of the weights, not a copy: {len(stale)} of "
                             f"its tensors ({names}; `{k}` is {describe(v)}) changed in place after it was taken, so "
                             f"the `load_state_dict()` that restores it restores the current weights, not these; "
                             f"take `copy.deepcopy(model.state_dict())`", rec[0], rec[1],
                    related=[(here[0], here[1], "restored here: a no-op")])

    # -- GL402 --------------------------------------------------------------------------------
    def grad_read(self, g: Any, f: Any, path: str) -> None:
        if not isinstance(g, Tensor):
            return
        self._reads += 1  # a cached holder scan is stale now
        recs = self._grads.get(g)
        site = [path, f.f_lineno, g._version]
        if recs is None:
            self._grads[g] = [site]
        elif (path, f.f_lineno) not in [(r[0], r[1]) for r in recs]:
            if len(recs) < 4:
                recs.append(site)
        for r in recs or ():
            r[2] = g._version

    def after_backward(self, roots: List[Any], retain: bool, is_grad: bool) -> None:
        if self._grads and not is_grad:  # torch.autograd.grad() accumulates into no .grad
            self.changed(list(self._grads.keys()), "a later backward() adds to it")

    def changed(self, grads: List[Tensor], how: str) -> None:
        moved = []
        for g in grads:
            recs = self._grads.get(g)
            if recs and g._version != recs[-1][2]:
                moved.append((g, recs))
        if not moved:
            return
        frames = list(user_frames())
        if not frames:
            return
        key = (self._reads, id(frames[0]), frames[0].f_lasti, frames[0].f_lineno)
        if self._scan[0] != key:
            tracked = {id(t) for t in self._grads.keys()}
            held: Dict[int, List[Tuple[str, bool, Tuple[int, ...], str]]] = {}
            for frame, label, value in find_holders(frames, lambda v: id(v) in tracked):
                base = label.split("[", 1)[0]
                bound = () if "[" in label else tuple(ln for ln, _ in bindings(frame, base))
                held.setdefault(id(value), []).append((label, _read_later(frame, base), bound,
                                                      display_path(frame.f_code.co_filename)))
            self._scan = (key, held)
        held = self._scan[1]
        here = where()
        for g, recs in moved:
            try:
                del self._grads[g]
            except KeyError:
                pass
            for label, read, bound, path in held.get(id(g), ()):
                if not read:
                    continue
                bound_here = [(r[0], r[1]) for r in recs if r[0] == path and r[1] in bound]
                site = bound_here[-1] if bound_here else (recs[0][0], recs[0][1])
                self.m._add("GL402", f"`{label}` holds the `.grad` tensor itself ({describe(g)}), not a copy: {how} "
                                     f"before `{label.split('[', 1)[0]}` is read again; keep "
                                     f"`p.grad.detach().clone()`", site[0], site[1],
                            related=[(here[0], here[1], "the gradient changes here")])
                break

    # -- GL403 --------------------------------------------------------------------------------
    def on_error(self, exc: BaseException, func: Any, args: Any, kwargs: Any) -> bool:
        if LEAVES_ONLY not in str(exc):
            return False
        t = args[0] if args and isinstance(args[0], Tensor) else None
        here = where()
        root = _deepcopy_root()
        found = _path_to(root, t) if (t is not None and root is not None and root is not t) else None
        shape = describe(t) if t is not None else "a tensor"
        raises = f"torch raises \"Only Tensors created explicitly by the user (graph leaves) {LEAVES_ONLY}\""
        if found is None:
            self.m._add("GL403", f"`copy.deepcopy` of a tensor computed from others (a non-leaf that requires grad, "
                                 f"{shape}): {raises}; copy `t.detach().clone()`", *here)
            return True
        label, owner, attr = found
        kind = type(root).__name__
        params = getattr(owner, "_parameters", None)
        site = _store_site(owner, attr) if owner is not None and attr is not None else None
        if isinstance(params, dict) and f"{attr}_g" in params and f"{attr}_v" in params:
            self.m._add("GL403", f"`copy.deepcopy` of a {kind} whose `{label}` is computed by `torch.nn.utils."
                                 f"weight_norm` ({shape}): {raises}; use `torch.nn.utils.parametrizations."
                                 f"weight_norm`", *here)
        elif site is not None:
            self.m._add("GL403", f"this keeps a tensor of a graph ({shape}) on `{type(owner).__name__}.{attr}`: a "
                                 f"later `copy.deepcopy` of the {kind} raises ({raises}); store `.detach()`",
                        *site, related=[(*here, "copy.deepcopy raises here")])
        else:
            self.m._add("GL403", f"`copy.deepcopy` of a {kind} that holds a tensor of a graph at `{label}` "
                                 f"({shape}): {raises}; keep `.detach()`ed values in what you copy", *here)
        return True


WATCHERS = [Snapshots]
