"""The runtime monitor: a ``TorchFunctionMode`` that watches the calls a program makes to torch
and records autograd misuse as :class:`gradlint.rule.Finding` objects.

Design:

* **Hot path.** ``__torch_function__`` looks ``func`` up in one dict (``_TABLE``); functions that
  can never be a finding (``linear``, ``add``, ``sum``, ...) are classified once, cached as
  ``None`` and called straight through. Only in-place ops, ``numpy``/``__array__``, ``detach``,
  ``requires_grad_``, the ``grad``/``requires_grad``/``data`` descriptors, ``backward``,
  ``torch.autograd.backward/grad`` and ``torch.tensor`` have handlers, and each handler asks a
  couple of cheap tensor attributes before deciding there is nothing to do.
* **No strong references to user tensors.** Aliases made by ``detach()``/``.data`` live in a
  ``torch.utils.weak.WeakIdKeyDictionary`` (a plain ``WeakKeyDictionary`` compares keys with
  ``Tensor.__eq__``); candidates keep weak references; the deep mode's records are owned by the
  autograd graph, the monitor only holds weak references to them.
* **Attribution.** A frame walk (``attribution.where``) happens only when a finding or a
  candidate is recorded. Findings are de-duplicated by ``(code, path, line)``.
* **Exactness.** Findings about ops that torch rejects (GL101, GL201, GL302, GL305) are recorded
  *before* the op runs (so they survive the exception) and withdrawn if the op then succeeds.
  Findings that only a later ``backward()`` proves (GL102, the error case of GL104) are kept as
  candidates and confirmed when a ``backward()`` fails with torch's "modified by an inplace
  operation" error. GL203 candidates are confirmed when a ``backward()`` reached the new leaf but
  never the graph it was detached from, and nothing read the new leaf's ``.grad``.
* **Deep mode** (``deep=True``) adds ``torch.autograd.graph.saved_tensors_hooks``: each saved
  tensor is packed with its version and a copy, which finds in-place writes to any saved tensor
  (inputs too: GL102) and writes that bypass the version counter (``.data``, NumPy views: GL103).
  Autograd does not check versions of tensors packed by hooks, so the unpack hook performs that
  check itself and raises the same ``RuntimeError``.

The monitor never changes what the program computes: every handler calls ``func`` exactly once
with the original arguments, and analysis errors inside the monitor are swallowed.
"""

from __future__ import annotations

import collections
import inspect
import sys
import weakref
from typing import Any, Callable, Deque, Dict, Iterable, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from gradlint.rule import Finding, Severity
from gradlint.runtime.attribution import call_as_user, where
from gradlint.runtime.sites import error_expected

__all__ = ["Monitor", "monitor", "describe"]

Tensor = torch.Tensor
_is_grad_enabled = torch.is_grad_enabled
_is_compiling = torch.compiler.is_dynamo_compiling  # a constant False outside dynamo's tracing
try:
    # torch.compile up to 2.4 keeps the mode active while it compiles: dynamo runs each traced op
    # on fake tensors (get_fake_value, under its FakeTensorMode) through this mode, where
    # _is_compiling() is False; later versions (2.11, 2.13) clear the torch-function mode stack
    # while compiling. Under a FakeTensorMode nothing real runs: nothing to check.
    _FAKE_KEY = torch._C._TorchDispatchModeKey.FAKE
    _dispatch_mode = torch._C._get_dispatch_mode
except AttributeError:  # pragma: no cover - a torch without dispatch-mode keys
    _FAKE_KEY, _dispatch_mode = None, lambda key: None

MODIFIED = "modified by an inplace operation"
_NO_KWARGS: Dict[str, Any] = {}  # handlers only read kwargs
_FREED = ("freed", "second time")

# Tensor methods whose name ends in "_" but that do not write the tensor's data
_NOT_WRITES = frozenset({"requires_grad_", "detach_", "share_memory_", "retain_grad_", "record_stream_"})


def describe(t: Any) -> str:
    """``float32[4, 5] on cpu``."""
    try:
        dtype = str(t.dtype).replace("torch.", "")
        return f"{dtype}[{', '.join(str(s) for s in t.shape)}] on {t.device}"
    except Exception:  # pragma: no cover - exotic subclasses
        return type(t).__name__


# ------------------------------------------------------------------------------ helpers
_SAVES_RESULT: Dict[type, bool] = {}


def _saves_result(node: Any) -> bool:
    """The autograd node saved its own output (sigmoid, tanh, exp, relu, softmax, ...)."""
    if node is None:
        return False
    cls = type(node)
    known = _SAVES_RESULT.get(cls)
    if known is None:
        known = _SAVES_RESULT[cls] = hasattr(cls, "_saved_result")
    return known


def _result_live(node: Any) -> bool:
    """The node saved its output and has not freed it yet (no backward through it so far)."""
    if not _saves_result(node):
        return False
    try:
        node._saved_result
    except RuntimeError as exc:
        return not any(w in str(exc) for w in _FREED)
    return True


_SAVED_NAMES: Dict[type, Tuple[str, ...]] = {}


def _graph_freed(node: Any) -> bool:
    """A backward already went through ``node`` (one of its saved tensors is freed). False when
    the node saves no tensor: then nobody can tell."""
    cls = type(node)
    names = _SAVED_NAMES.get(cls)
    if names is None:
        names = _SAVED_NAMES[cls] = tuple(n for n in dir(cls) if n.startswith("_saved_"))
    for name in names:
        try:
            getattr(node, name)
        except RuntimeError as exc:
            if any(w in str(exc) for w in _FREED):
                return True
        except Exception:
            pass
    return False


def _wrappers_kept() -> bool:
    """Does an autograd node keep its Python object for as long as the node lives? torch 2.13
    does (the node holds it in a ``PyObjectSlot``, pytorch#181390). Up to torch 2.12 the object
    dies with its last Python reference and the next ``grad_fn``/``next_functions`` read makes
    a new one, often at the address just freed: ``id(node)`` then names no node, not even
    within one walk of a graph (torch 2.4.1 and 2.11.0, measured). Detected, not assumed by
    version: the address of ``a``'s dropped node object is taken by ``b``'s before ``a``'s is
    read again."""
    try:
        with torch.enable_grad():
            x = torch.ones(1, requires_grad=True)
            a, b = x * 1, x * 1
        first = id(a.grad_fn)
        other = b.grad_fn  # noqa: F841 (held: takes the freed address where nothing keeps a's)
        return id(a.grad_fn) == first
    except Exception:
        return True


def _metadata_key(node: Any) -> int:
    try:
        return id(node.metadata)  # a dict the C++ node owns: one per node, whatever wraps it
    except Exception:
        return id(node)


#: the identity of an autograd node for ``seen`` sets and across backward() calls: ``id(node)``
#: where torch keeps a node's Python object (2.13), else the id of its ``metadata`` dict
node_key: Callable[[Any], int] = id if _wrappers_kept() else _metadata_key


def _tensors(value: Any) -> List[Tensor]:
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, Tensor)]
    return []


def _storage_ptr(t: Tensor) -> Optional[int]:
    try:
        return t.untyped_storage().data_ptr() or None
    except Exception:
        return None


def _same(a: Tensor, b: Tensor) -> bool:
    try:
        if torch.equal(a, b):
            return True
        if a.is_floating_point() or a.is_complex():
            return torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True)
        return False
    except Exception:
        return True


class _Saved:
    """What the deep mode packs for one saved tensor."""

    __slots__ = ("alias", "version", "copy", "ptr", "reported", "__weakref__")


class _LeafCandidate:
    """GL203: ``z`` is a new leaf made from ``y``, a tensor of a graph."""

    __slots__ = ("z", "y", "path", "line", "message", "reached")

    def __init__(self, z: Tensor, y: Optional[Tensor], path: str, line: int, message: str) -> None:
        self.z = weakref.ref(z)
        self.y = weakref.ref(y) if y is not None else (lambda: None)
        self.path, self.line, self.message = path, line, message
        self.reached = False


def _inputs_have_grads(y: Tensor, limit: int = 10_000) -> bool:
    """Did a backward() already reach the leaves of ``y``'s graph (their ``.grad`` is set)?"""
    stack = [y.grad_fn] if y.grad_fn is not None else []
    seen = set()
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or node_key(node) in seen:
            continue
        seen.add(node_key(node))
        var = getattr(node, "variable", None)
        if var is not None and var.grad is not None:
            return True
        stack.extend(n for n, _ in node.next_functions)
    return False


_Pending = Tuple[str, str, int, str, Optional[Severity]]  # code, path, line, message, severity


# ------------------------------------------------------------------------------ the mode
class Monitor(TorchFunctionMode):
    """Use as a context manager (``with Monitor() as m:``); ``m.findings`` afterwards (or
    during: the list so far). ``deep=True`` adds saved-tensor checksums (slower, 2x the memory of
    the saved activations)."""

    MAX_PENDING = 64

    def __init__(self, deep: bool = False) -> None:
        super().__init__()
        self.deep = deep
        self._found: Dict[Tuple[str, str, int], Finding] = {}
        self._aliases: Any = WeakIdKeyDictionary()  # alias -> ("detach"|"data", weakref(origin))
        self._pending: Deque[_Pending] = collections.deque(maxlen=self.MAX_PENDING)
        self._leaves: Dict[Tuple[str, int], _LeafCandidate] = {}
        self._saved: Dict[int, "weakref.WeakSet[_Saved]"] = {}
        self._sweep_at = 1024
        self._exports: Dict[int, List[Tuple[str, int, str]]] = {}
        self._fresh: List[_Saved] = []
        self._hooks: Any = None
        self._active = 0
        # > 0 while torch's own code runs that nothing checks (a built-in optimizer's step()
        # without closure, see watchers/optimizers.py): each call is only forwarded
        self._quiet = 0
        self.watchers: List[Any] = []  # the check families (gradlint.runtime.watchers), while active

    def __new__(cls, deep: bool = False) -> "Monitor":
        if deep and cls is Monitor:
            cls = _DeepMonitor
        return super().__new__(cls)

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self) -> "Monitor":
        if self._active == 0:
            if self.deep:
                self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
                self._hooks.__enter__()
            from gradlint.runtime.watchers import start

            self.watchers = start(self)
        self._active += 1
        super().__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            self._active -= 1
            if self._active == 0:
                if self._hooks is not None:
                    hooks, self._hooks = self._hooks, None
                    hooks.__exit__(None, None, None)
                watchers, self.watchers = self.watchers, []
                from gradlint.runtime.watchers import stop

                stop(watchers)
                self.finish()

    @property
    def findings(self) -> List[Finding]:
        return sorted(self._found.values(), key=Finding.sort_key)

    def finish(self) -> None:
        """Settle what only the end can settle: GL203 candidates whose new leaf received a
        gradient while the graph it was cut from never did."""
        for cand in list(self._leaves.values()):
            self._settle_leaf(cand)
        self._leaves.clear()

    # -- the hot path ----------------------------------------------------------------------
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if self._quiet:
            try:
                return func(*args, **kwargs) if kwargs else func(*args)
            except BaseException:
                self._quiet = 0  # the step failed: its post hook will not run
                raise
        try:
            handler = _TABLE[func]
        except KeyError:
            handler = None if _is_compiling() else _classify(func)
        except TypeError:  # unhashable callable
            handler = None
        if handler is None:
            try:
                return func(*args, **kwargs) if kwargs else func(*args)
            except RuntimeError as exc:  # free when nothing is raised
                self.translate(exc, func, args, kwargs or _NO_KWARGS)
                raise
        if _is_compiling() or _dispatch_mode(_FAKE_KEY) is not None:
            # torch.compile traces through modes (or, up to torch 2.4, runs fake tensors through
            # them): stay out of its graphs
            return func(*args, **kwargs) if kwargs else func(*args)
        try:
            return handler(self, func, args, kwargs or _NO_KWARGS)
        except RuntimeError as exc:
            self.translate(exc, func, args, kwargs or _NO_KWARGS)
            raise

    def translate(self, exc: BaseException, func: Any, args: Any, kwargs: Any) -> None:
        """An error torch raised from an intercepted call: let each check family name its cause
        (once per exception; the exception itself propagates unchanged)."""
        if getattr(exc, "_gradlint_seen", False) or not self.watchers:
            return
        try:
            exc._gradlint_seen = True  # type: ignore[attr-defined]
            if error_expected():
                return
        except Exception:
            return
        for w in self.watchers:
            try:
                if w.on_error(exc, func, args, kwargs):
                    return
            except Exception:
                pass

    # -- recording ---------------------------------------------------------------------------
    def _add(self, code: str, message: str, path: str, line: int,
             severity: Optional[Severity] = None,
             related: Iterable[Tuple[str, int, str]] = ()) -> Optional[Tuple[str, str, int]]:
        """Record a finding at ``path:line``. ``related``: ``(path, line, message)`` of other
        places (the symptom); those in another file are named in the message."""
        key = (code, path, line)
        if key in self._found:
            return None
        rule = _rules().get(code)
        same, other = [], []
        for rpath, rline, rmsg in related:
            if (rpath, rline) == (path, line):
                continue
            if rpath == path:
                same.append((rline, _span(rpath, rline)[0], rmsg))
            else:
                other.append(f"{rmsg}: {rpath}:{rline}")
        if other:
            message = f"{message} ({'; '.join(other)})"
        column, end_column = _span(path, line)
        self._found[key] = Finding(
            path=path, line=line, column=column, end_line=line, end_column=end_column, code=code,
            name=rule.name if rule else code,
            severity=severity or (rule.severity if rule else Severity.ERROR),
            message=message, hint=rule.hint if rule else "", url=rule.url() if rule else "",
            statement_line=line, related=tuple(same),
        )
        return key

    def _report(self, code: str, message: str, severity: Optional[Severity] = None) -> Optional[Tuple[str, str, int]]:
        path, line = where()
        return self._add(code, message, path, line, severity)

    def _retract(self, keys: Iterable[Optional[Tuple[str, str, int]]]) -> None:
        for key in keys:
            if key is not None:
                self._found.pop(key, None)

    def _candidate(self, code: str, message: str, severity: Optional[Severity] = None) -> None:
        path, line = where()
        if (code, path, line) not in self._found:
            self._pending.append((code, path, line, message, severity))

    def _confirm_pending(self) -> None:
        while self._pending:
            code, path, line, message, severity = self._pending.popleft()
            self._add(code, message, path, line, severity)

    def _guarded(self, keys: List[Optional[Tuple[str, str, int]]], func: Any, args: Any, kwargs: Any) -> Any:
        """Run ``func``; findings recorded in anticipation of torch raising are withdrawn when
        it does not raise."""
        if not keys:
            return func(*args, **kwargs)
        ok = False
        try:
            out = func(*args, **kwargs)
            ok = True
            return out
        except Exception:
            try:
                ok = error_expected()  # a test of torch's error (`with pytest.raises(...)`)
            except Exception:
                pass
            raise
        finally:
            if ok:
                self._retract(keys)

    # -- in-place ops (GL101, GL102, GL103, GL104) ---------------------------------------------
    def _inplace(self, t: Tensor, op: str, func: Any, args: Any, kwargs: Any) -> Any:
        try:
            keys = self._check_inplace(t, op)
        except Exception:
            keys = []
        return self._guarded(keys, func, args, kwargs)

    def _check_inplace(self, t: Tensor, op: str) -> List[Optional[Tuple[str, str, int]]]:
        covered = False
        if t.requires_grad:
            if t.is_leaf:
                if _is_grad_enabled():
                    message = (f"in-place `{op}` on a leaf tensor that requires grad ({describe(t)}) while grad "
                               f"mode is on: torch raises")
                    alias = _cause_line("leaf_alias_line", t)
                    if alias is not None:
                        here = where()
                        return [self._add("GL101", f"this binding makes another name for a leaf that requires "
                                                   f"grad; the {message}", alias[0], alias[1],
                                          related=[(here[0], here[1], "the in-place op")])]
                    return [self._report("GL101", message)]
            else:
                base = t._base if t._is_view() else None
                if base is not None and base.is_leaf and base.requires_grad:
                    if _is_grad_enabled():
                        return [self._report("GL101", f"in-place `{op}` on a view of a leaf tensor that requires "
                                                      f"grad ({describe(base)}) while grad mode is on: torch raises")]
                else:
                    node = t.grad_fn
                    if not _result_live(node):
                        node = base.grad_fn if base is not None else None
                        if not _result_live(node):
                            node = None
                    if node is not None:
                        covered = True
                        site = _cause_line("inplace_module_line")
                        if site is not None:
                            self._pending.append(("GL102", site[0], site[1],
                                                  f"in-place module ({op}) on the output of {type(node).__name__} "
                                                  f"({describe(t)}), which autograd saved for backward: backward() "
                                                  f"raised", None))
                            return []
                        self._candidate("GL102", f"in-place `{op}` on the output of {type(node).__name__} "
                                                 f"({describe(t)}), which autograd saved for backward: "
                                                 f"backward() raised")
        elif self._aliases:
            entry = self._aliases.get(t)
            if entry is None and t._is_view():
                entry = self._aliases.get(t._base)
            if entry is not None:
                covered = self._check_alias(t, op, entry)
        if self.deep and self._saved:
            self._check_saved(t, op, covered)
        return []

    def _check_alias(self, t: Tensor, op: str, entry: Tuple[str, Any, bool]) -> bool:
        kind, ref, _ = entry
        origin = ref()
        if origin is None:
            return False
        node = origin.grad_fn
        if kind == "data":
            if node is not None and _result_live(node):
                self._mark_saved_reported(t)
                self._report("GL103", f"in-place `{op}` through `.data` of the output of {type(node).__name__} "
                                      f"({describe(origin)}), which autograd saved for backward: the version "
                                      f"counter does not see it and the gradient is silently wrong")
                return True
            return False
        if node is None:  # detached from a leaf: a deliberate update
            return False
        if _result_live(node):
            self._candidate("GL104", f"in-place `{op}` on `.detach()` of the output of {type(node).__name__} "
                                     f"({describe(origin)}), which autograd saved for backward (detach() shares "
                                     f"storage and version counter): backward() raised")
            return True
        if not _graph_freed(node):
            self._report("GL104", f"in-place `{op}` on `.detach()` of a tensor of a graph ({describe(origin)}): "
                                  f"detach() shares storage, the original changes too", Severity.WARNING)
        return False

    # -- deep mode: saved-tensor hooks ---------------------------------------------------------
    def _pack(self, t: Tensor) -> Any:
        rec = _Saved()
        rec.alias = t.detach()
        rec.version = t._version
        rec.reported = False
        rec.copy = None  # taken when the intercepted call that saved it returns (see _DeepMonitor)
        self._fresh.append(rec)
        rec.ptr = ptr = _storage_ptr(t)
        if ptr is not None:
            live = self._saved.get(ptr)
            if live is None:
                live = self._saved[ptr] = weakref.WeakSet()
                if len(self._saved) > self._sweep_at:
                    self._sweep()
            live.add(rec)
        return rec

    def _sweep(self) -> None:
        for ptr in [p for p, s in self._saved.items() if not s]:
            del self._saved[ptr]
        for ptr in [p for p in self._exports if p not in self._saved]:
            del self._exports[ptr]
        self._sweep_at = max(1024, 2 * len(self._saved))

    def _unpack(self, rec: Any) -> Tensor:
        a = rec.alias
        if a._version != rec.version:
            shape = ", ".join(str(s) for s in a.shape)
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been {MODIFIED}: "
                f"[{a.type()} [{shape}]] is at version {a._version}; expected version {rec.version} "
                f"instead. (Checked by gradlint --deep: autograd leaves this check to saved-tensor hooks.)"
            )
        if rec.copy is not None and not rec.reported and not _same(a, rec.copy):
            self._corrupted(rec)
        return a

    def _live_records(self, t: Tensor) -> List[_Saved]:
        ptr = _storage_ptr(t)
        live = self._saved.get(ptr) if ptr is not None else None
        return list(live) if live else []

    def _mark_saved_reported(self, t: Tensor) -> None:
        if self.deep:
            for rec in self._live_records(t):
                rec.reported = True

    def _check_saved(self, t: Tensor, op: str, covered: bool) -> None:
        recs = self._live_records(t)
        if not recs or covered:
            return
        entry = self._aliases.get(t) if self._aliases else None
        kind = entry[0] if entry else None
        if kind == "data":
            for rec in recs:
                rec.reported = True
            self._report("GL103", f"in-place `{op}` through `.data` of a tensor that autograd saved for "
                                  f"backward ({describe(t)}): the version counter does not see it and the "
                                  f"gradient is silently wrong")
        elif kind == "detach":
            self._candidate("GL104", f"in-place `{op}` on `.detach()` of a tensor that autograd saved for "
                                     f"backward ({describe(t)}): backward() raised")
        else:
            self._candidate("GL102", f"in-place `{op}` on a tensor that autograd saved for backward "
                                     f"({describe(t)}): backward() raised")

    def _export(self, t: Tensor) -> None:
        """Deep mode: a NumPy array that shares memory with a saved tensor."""
        recs = self._live_records(t)
        if recs:
            path, line = where()
            self._exports.setdefault(recs[0].ptr, []).append((path, line, describe(t)))

    def _corrupted(self, rec: _Saved) -> None:
        rec.reported = True
        exports = self._exports.pop(rec.ptr, None) if rec.ptr is not None else None
        write = _cause_line("numpy_write_line", rec.alias)
        if write is not None:
            self._add("GL103", f"an in-place write to a NumPy array that shares memory with a tensor that autograd "
                               f"saved for backward ({describe(rec.alias)}): the version counter does not see it "
                               f"and the gradient of the next backward() is silently wrong", write[0], write[1])
        elif exports:
            for path, line, desc in exports[-8:]:
                self._add("GL103", f"a NumPy array made here shares memory with a tensor that autograd saved "
                                   f"for backward ({desc}) and was written to before backward(): the gradient "
                                   f"is silently wrong", path, line)
        else:
            self._report("GL103", f"a tensor that autograd saved for backward ({describe(rec.alias)}) was changed "
                                  f"without autograd noticing (through `.data`, a NumPy view or "
                                  f"`torch.from_numpy`): the gradient of this backward() is silently wrong")

    # -- GL203 --------------------------------------------------------------------------------
    def _new_leaf(self, z: Tensor, y: Optional[Tensor], how: str) -> None:
        path, line = where()
        if ("GL203", path, line) in self._found:
            return
        if y is not None and _inputs_have_grads(y):
            return  # a new leaf from a value whose inputs were back-propagated already (a step's update)
        old = self._leaves.pop((path, line), None)
        if old is not None:
            self._settle_leaf(old)
        self._leaves[(path, line)] = _LeafCandidate(
            z, y, path, line,
            f"{how} makes a new leaf from a tensor of a graph ({describe(z)}): backward() reached the new "
            f"leaf but never the graph it was cut from, whose leaves get no gradient")

    def _settle_leaf(self, cand: _LeafCandidate) -> None:
        if cand.reached:
            self._add("GL203", cand.message, cand.path, cand.line)

    def _backward_graph(self, roots: List[Tensor]) -> None:
        """Before a backward: which GL203 candidates does it reach, and which originals?"""
        if not self._leaves:
            return
        seen = set()
        leaves = set()
        stack = [r.grad_fn for r in roots if r.grad_fn is not None]
        root_ids = {id(r) for r in roots}
        while stack and len(seen) < 200_000:
            node = stack.pop()
            if node is None or node_key(node) in seen:
                continue
            seen.add(node_key(node))
            var = getattr(node, "variable", None)
            if var is not None:
                leaves.add(id(var))
            stack.extend(n for n, _ in node.next_functions)
        for key, cand in list(self._leaves.items()):
            z, y = cand.z(), cand.y()
            if z is None:
                continue
            y_node = y.grad_fn if y is not None else None
            if id(z) in root_ids or (y_node is not None and node_key(y_node) in seen) or (y is not None and id(y) in root_ids):
                del self._leaves[key]  # GL205's case, or the original graph is back-propagated too
            elif id(z) in leaves:
                cand.reached = True

    def _grad_read(self, t: Tensor) -> None:
        for key, cand in list(self._leaves.items()):
            if cand.z() is t:
                del self._leaves[key]  # the new leaf's gradient is the point (saliency, latent opt.)


class _DeepMonitor(Monitor):
    """The deep mode: after each intercepted call, copy the tensors it saved for backward. The
    copy is taken when the call returns, not in the pack hook, because some kernels update a
    tensor they saved after saving it (``batch_norm``'s running statistics) without it mattering
    to the backward pass."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        try:
            return Monitor.__torch_function__(self, func, types, args, kwargs)
        finally:
            if self._fresh:
                self._snapshot()

    def _snapshot(self) -> None:
        fresh, self._fresh = self._fresh, []
        for rec in fresh:
            try:
                rec.copy = rec.alias.clone()
            except Exception:
                rec.copy = None


# ------------------------------------------------------------------------------ handlers
def _h_inplace(m: Monitor, func: Any, args: Any, kwargs: Any) -> Any:
    t = args[0] if args else None
    if not isinstance(t, Tensor):
        return func(*args, **kwargs)
    if not m.deep:  # the common cases first: an optimizer's update, a plain tensor
        if t.requires_grad:
            if t.is_leaf and not _is_grad_enabled():
                return func(*args, **kwargs)
        elif not m._aliases:
            return func(*args, **kwargs)
    return m._inplace(t, func.__name__, func, args, kwargs)


def _functional_inplace(index: int) -> Callable[..., Any]:
    """``F.relu(x, inplace=True)`` and friends (``inplace`` is the parameter at ``index``)."""

    def handler(m: Monitor, func: Any, args: Any, kwargs: Any) -> Any:
        inplace = kwargs.get("inplace", args[index] if len(args) > index else False)
        if not inplace:
            return func(*args, **kwargs)
        t = args[0] if args else kwargs.get("input")
        if not isinstance(t, Tensor):
            return func(*args, **kwargs)
        return m._inplace(t, f"{func.__name__}(inplace=True)", func, args, kwargs)

    return handler


def _h_numpy(m: Monitor, func: Any, args: Any, kwargs: Any) -> Any:
    keys: List[Any] = []
    try:
        t = args[0]
        force = kwargs.get("force", args[1] if len(args) > 1 else False)
        if t.requires_grad and not force:
            what = "`.numpy()`" if func.__name__ == "numpy" else "a NumPy conversion (`np.asarray`, `np.array`, a ufunc)"
            if t.device.type == "cpu":
                why = "torch raises; the gradient cannot flow through NumPy"
            else:  # torch's first complaint there is the device: a `.cpu()` would meet the second
                why = (f"torch raises (NumPy takes CPU tensors only, and this one is on {t.device}); and with "
                       f"`.cpu()` it still requires grad: the gradient cannot flow through NumPy, use "
                       f"`.detach().cpu()`")
            keys.append(m._report("GL201", f"{what} of a tensor that requires grad ({describe(t)}): {why}"))
        elif m.deep and m._saved:
            m._export(t)
    except Exception:
        pass
    return m._guarded(keys, func, args, kwargs)


def _h_detach(m: Monitor, func: Any, args: Any, kwargs: Any) -> Any:
    out = func(*args, **kwargs)
    try:
        t = args[0]
        if t.grad_fn is not None:
            # a copy of a value whose graph was back-propagated already (an updated value made a
            # new leaf, step after step) is no cut: nothing upstream waits for its gradient
            m._aliases[out] = ("detach", weakref.ref(t), not _inputs_have_grads(t, limit=2_000))
    except Exception:
        pass
    return out


def _h_data_get(m: Monitor, func: Any, args: Any, kwargs: Any) -> Any:
    out = func(*args, **kwargs)
    try:
        t = args[0]
        if t.requires_grad:
            m._aliases[out] = ("data", weakref.ref(t), t.grad_fn is not None)
    except Exception:
        pass
    return out


def _no(t: Any) -> bool:
    return False


def _h_grad_get(m: Monitor, func: Any, args: Any, kwargs: Any) -> Any:
    if args[0].is_leaf and not m._leaves:  # an optimizer reading its parameters' gradients
        return func(*args)
    warns = False
    try:
        t = args[0]
        if m._leaves:
            m._grad_read(t)
        if not t.is_leaf and not t.retains_grad:
            warns = True
            if not any(getattr(w, "claims_grad_read", _no)(t) for w in m.watchers):  # GL301 names the cause
                m._report("GL303", f"`.grad` of a non-leaf tensor ({describe(t)}) without `retain_grad()`: it is "
                                   f"None, autograd only fills `.grad` of leaves")
    except Exception:
        pass
    if warns:  # torch warns: at the user's line, as it would without the monitor
        return call_as_user(func, args, kwargs)
    return func(*args, **kwargs)


def _origin_of(m: Monitor, t: Tensor) -> Tuple[bool, Optional[Tensor]]:
    """``(True, origin)`` when ``t`` was detached (``.detach()`` or ``.data``) from a tensor of a
    graph; ``origin`` is None when that tensor no longer exists (nor, then, its graph)."""
    if not m._aliases:
        return False, None
    entry = m._aliases.get(t)
    if entry is None or not entry[2]:
        return False, None
    return True, entry[1]()


def _set_requires_grad(m: Monitor, func: Any, args: Any, kwargs: Any, t: Any, flag: Any,
                       non_leaf: Optional[str], how: str) -> Any:
    """``t.requires_grad = flag`` / ``t.requires_grad_(flag)``: GL302 when torch refuses it on
    a non-leaf (``non_leaf`` is what to say, or None where torch accepts it), and a candidate
    GL203 when a detached copy becomes a new leaf."""
    keys: List[Any] = []
    cut, origin = False, None
    try:
        if not t.is_leaf and non_leaf is not None:
            keys.append(m._report("GL302", f"{non_leaf} on a non-leaf tensor ({describe(t)}): torch raises; "
                                           f"use `.detach()` to stop gradients"))
        elif t.is_leaf and flag:
            cut, origin = _origin_of(m, t)
    except Exception:
        pass
    out = m._guarded(keys, func, args, kwargs)
    if cut:
        try:
            m._new_leaf(t, origin, how)
        except Exception:
            pass
    return out


def _h_requires_grad_set(m: Monitor, func: Any, args: Any, kwargs: Any) -> Any:
    t, value = args[0], args[1]
    return _set_requires_grad(m, func, args, kwargs, t, value, "setting `requires_grad`",
                              "`requires_grad = True` on a detached copy")


def _h_requires_grad_(m: Monitor, func: Any, args: Any, kwargs: Any) -> Any:
    flag = kwargs.get("requires_grad", args[1] if len(args) > 1 else True)
    return _set_requires_grad(m, func, args, kwargs, args[0], flag,
                              None if flag else "`requires_grad_(False)`", "`.detach().requires_grad_()`")


def _h_tensor(m: Monitor, func: Any, args: Any, kwargs: Any) -> Any:
    data = args[0] if args else kwargs.get("data")
    if not isinstance(data, Tensor):
        return func(*args, **kwargs)
    origin = None
    try:
        m._report("GL204", f"`torch.tensor()` of a tensor ({describe(data)}): it copies without history; use "
                           f"`t.detach().clone()` (or `t.clone()` to keep the gradient)")
        if kwargs.get("requires_grad") and data.grad_fn is not None:
            origin = data
    except Exception:
        pass
    out = call_as_user(func, args, kwargs)  # torch warns: at the user's line, as usual
    if origin is not None:
        try:
            m._new_leaf(out, origin, "`torch.tensor(t, requires_grad=True)`")
        except Exception:
            pass
    return out


def _cause_line(name: str, *args: Any) -> Optional[Tuple[str, int]]:
    """A finer cause line from ``gradlint.runtime.causes`` (None when the source does not show it)."""
    try:
        from gradlint.runtime import causes

        return getattr(causes, name)(*args)
    except Exception:
        return None


def _no_graph(m: Monitor, call: str, r: Tensor, i: int) -> Optional[Tuple[str, str, int]]:
    """GL305 at the statement where the graph was lost when the source shows it (see
    ``gradlint.runtime.nograph``), else at the ``backward()``."""
    message = (f"{call} on a tensor that does not require grad ({describe(r)}, element {i}): it was "
               f"computed without a graph (no_grad, inference_mode or detach()); torch raises")
    if error_expected():
        return None
    if not _is_grad_enabled():  # grad mode left off: GL306 names where (the graph was never built)
        return m._report("GL305", message + "; grad mode is off here")
    site = None
    try:
        from gradlint.runtime.nograph import graph_lost_at

        site = graph_lost_at(r)
    except Exception:
        site = None
    if site is None:
        return m._report("GL305", message)
    path, line, why = site
    here = where()
    from gradlint.runtime.attribution import display_path

    return m._add("GL305", f"the graph is lost here ({why}); the {call} that needs it raises: "
                           f"{describe(r)} does not require grad", display_path(path), line,
                  related=[(here[0], here[1], f"{call} raises here")])


def _backward_roots(func: Any, args: Any, kwargs: Any) -> List[Tensor]:
    if func is _TENSOR_BACKWARD:
        return _tensors(args[0]) if args else []
    name = "outputs" if func is _AUTOGRAD_GRAD else "tensors"
    return _tensors(args[0] if args else kwargs.get(name))


def _h_backward(m: Monitor, func: Any, args: Any, kwargs: Any) -> Any:
    keys: List[Any] = []
    roots: List[Tensor] = []
    try:
        roots = _backward_roots(func, args, kwargs)
        call = "torch.autograd.grad()" if func is _AUTOGRAD_GRAD else "backward()"
        for i, r in enumerate(roots):
            if not r.requires_grad:
                keys.append(_no_graph(m, call, r, i))
                break
        else:
            if func is not _AUTOGRAD_GRAD:
                for r in roots:
                    if r.is_leaf:
                        m._report("GL205", f"backward() on a leaf tensor ({describe(r)}) made to require grad "
                                           f"after the fact: no other tensor receives a gradient")
                        break
            if m._leaves:
                # gradients asked for explicitly (`torch.autograd.grad(f, x)`, `backward(inputs=[x])`:
                # adversarial attacks, saliency): the new leaf's gradient is the point
                wanted = args[1] if func is _AUTOGRAD_GRAD and len(args) > 1 else kwargs.get("inputs")
                for t in _tensors(wanted):
                    m._grad_read(t)
            m._backward_graph(roots)
    except Exception:
        pass
    retain = kwargs.get("retain_graph")
    if retain is None:
        retain = kwargs.get("create_graph", False)
    for w in m.watchers:
        try:
            w.before_backward(roots, bool(retain), func is _AUTOGRAD_GRAD)
        except Exception:
            pass
    try:
        out = m._guarded(keys, func, args, kwargs)
    except RuntimeError as exc:
        if MODIFIED in str(exc):
            m._confirm_pending()
        m.translate(exc, func, args, kwargs)
        raise
    for w in m.watchers:
        try:
            w.after_backward(roots, bool(retain), func is _AUTOGRAD_GRAD)
        except Exception:
            pass
    return out


# ------------------------------------------------------------------------------ dispatch table
_TENSOR_BACKWARD = torch.Tensor.backward
_AUTOGRAD_GRAD = torch.autograd.grad

_TABLE: Dict[Any, Optional[Callable[..., Any]]] = {
    torch.Tensor.__setitem__: _h_inplace,
    torch.Tensor.numpy: _h_numpy,
    torch.Tensor.__array__: _h_numpy,
    torch.Tensor.detach: _h_detach,
    torch.Tensor.requires_grad_: _h_requires_grad_,
    torch.Tensor.backward: _h_backward,
    torch.autograd.backward: _h_backward,
    torch.autograd.grad: _h_backward,
    torch.tensor: _h_tensor,
    torch.Tensor.grad.__get__: _h_grad_get,  # type: ignore[attr-defined]
    torch.Tensor.data.__get__: _h_data_get,  # type: ignore[attr-defined]
    torch.Tensor.requires_grad.__set__: _h_requires_grad_set,  # type: ignore[attr-defined]
}


def _functional_table() -> None:
    import torch.nn.functional as F

    for name in dir(F):
        fn = getattr(F, name)
        if not inspect.isfunction(fn) or name.startswith("_"):
            continue
        try:
            params = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            continue
        if "inplace" in params:
            _TABLE[fn] = _functional_inplace(params.index("inplace"))


_functional_table()

_INPLACE_MODULES = ("torch", "torch.nn.functional", "torch._C._nn", "torch.functional")


def _classify(func: Any) -> Optional[Callable[..., Any]]:
    """Decide once per function whether it needs a handler (in-place ops found by name)."""
    handler: Optional[Callable[..., Any]] = None
    name = getattr(func, "__name__", "")
    if isinstance(name, str) and name.endswith("_") and not name.startswith("_") and name not in _NOT_WRITES:
        qual = getattr(func, "__qualname__", "") or ""
        module = getattr(func, "__module__", None)
        if qual.startswith(("TensorBase.", "Tensor.", "_VariableFunctionsClass.")) or module in _INPLACE_MODULES:
            handler = _h_inplace
    if _dynamo_compiling():
        return handler  # not cached: see _dynamo_compiling
    try:
        _TABLE[func] = handler
    except TypeError:
        pass
    return handler


def _dynamo_compiling() -> bool:
    """torch.compile is compiling a frame. Having traced ``__torch_function__``'s lookups in
    ``_TABLE``, dynamo guards on the table (``len(_TABLE) == n``, torch 2.11) and then builds the
    guards with the mode active again, through calls (``size``, ``stride``, ...) that would be
    classified and cached here: the table grows and dynamo raises "Guard failed on the same frame
    it was created" in the user's program (torch 2.11.0 measured; not 2.4.1 nor 2.13)."""
    guards = sys.modules.get("torch._guards")
    try:
        return guards is not None and guards.CompileContext.try_get() is not None
    except Exception:
        return False


def tap(func: Any, wrapper: Callable[..., Any]) -> None:
    """Let a check family see calls of ``func``: ``wrapper(m, func, args, kwargs, call)``, where
    ``call()`` runs what would have run without it (the previous handler, or ``func``) and must
    be called exactly once."""
    prev = _TABLE[func] if func in _TABLE else _classify(func)

    def handler(m: Monitor, f: Any, a: Any, k: Any) -> Any:
        if prev is None:
            return wrapper(m, f, a, k, lambda: f(*a, **k))
        return wrapper(m, f, a, k, lambda: prev(m, f, a, k))

    _TABLE[func] = handler


_RULES: Optional[Dict[str, Any]] = None


def _rules() -> Dict[str, Any]:
    global _RULES
    if _RULES is None:
        from gradlint.rule import registry

        _RULES = registry()
    return _RULES


def monitor(deep: bool = False) -> Monitor:
    """``with monitor() as m: ...``; then ``m.findings``."""
    return Monitor(deep=deep)


def _span(path: str, line: int) -> Tuple[int, int]:
    """The columns (1-based, end exclusive) of the code on ``line`` of ``path``: where the
    statement the finding is about starts and ends on that line (1, 1 when the source is not
    readable)."""
    import linecache
    import os
    import sys

    run = sys.modules.get("gradlint.runtime.run")
    nb = getattr(run, "_NOTEBOOKS", {}).get(os.path.abspath(path)) if run is not None else None
    if nb is not None:  # a notebook that was run: its script, not the .ipynb's JSON
        lines = nb.script.splitlines()
        text = lines[line - 1] if 0 < line <= len(lines) else ""
    else:
        text = linecache.getline(path, line).rstrip("\r\n")
    stripped = text.lstrip()
    if not stripped:
        return 1, 1
    start = len(text) - len(stripped) + 1
    return start, len(text.rstrip()) + 1
