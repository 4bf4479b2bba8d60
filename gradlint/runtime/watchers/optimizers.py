"""Optimizers: what ``step()`` finds in ``.grad`` (GL601), where the gradients were clipped
(GL605, ``clipping.py``) and what was handed to the optimizer (GL301, ``nonleaf_params.py``).

GL601 missing-zero-grad.

* **Steps.** The global step hooks (``register_optimizer_step_pre_hook`` / ``post_hook``) run
  around every ``step()``. After a step, each parameter's ``.grad`` tensor is recorded: a weak
  reference, its version counter, its address. ``backward()`` accumulates into an existing
  ``.grad`` in place, which bumps that version: after each ``backward()`` the recorded,
  uncleared gradients whose version moved name that ``backward()`` (only while some are
  uncleared: in a loop that clears them this costs nothing). At the next ``step()`` of the
  optimizer, a ``.grad`` that is the same tensor, grown and never cleared, means every step
  uses the running sum: reported at those ``backward()`` lines, the ``step()`` related.
* **Clearing** is seen through the mode: ``p.grad = None`` (``Tensor.grad.__set__``),
  ``zero_()``, ``fill_(0)``, ``mul_(0)``, ``torch._foreach_zero_`` on a gradient or an alias of
  its memory (looked up by address). A clearing that throws away gradients written since the
  last step is a candidate, reported when the next ``step()`` of the optimizer finds no usable
  gradient at all: a ``zero_grad()`` placed between ``backward()`` and ``step()``.
* **Hand-written steps** (``w -= lr * w.grad`` under ``no_grad``, ``w.data.sub_(...)``) are
  recorded like a step of one parameter; the next such update of a gradient that a
  ``backward()`` grew since, uncleared, is reported at the update.

Inside ``step()`` (LBFGS closures, wrapped optimizers) nothing is checked: the step's own
bookkeeping. While a built-in optimizer (a class of ``torch.optim``, no hooks of its own) steps
without a closure on the monitor's thread, the mode only forwards each call (``Monitor._quiet``):
on a small model most intercepted calls are the update's. At the default level the per-step work is O(number of parameters) in the hooks;
the taps on ``zero_``/``mul_``/``sub_``/... return after an attribute read outside those cases.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.utils.weak import WeakIdKeyDictionary

from gradlint.runtime.attribution import display_path, where, where_raw
from gradlint.runtime.mode import describe, tap
from gradlint.runtime.watchers import Watcher, clipping
from gradlint.runtime.watchers.nonleaf_params import NonLeafParams

_Tensor = torch.Tensor
_NoTF = torch._C.DisableTorchFunction
Site = Tuple[str, int]  # raw path (display_path when reported), line


def _ptr(t: Any) -> int:
    try:
        return t.data_ptr()
    except Exception:
        return 0


_BUILTIN: Dict[type, bool] = {}


def _builtin(opt: Any) -> bool:
    """An optimizer class of torch itself (``torch.optim.Adam``, not a subclass elsewhere) with
    no step hooks of its own (the user's hooks run inside the step)."""
    cls = type(opt)
    ours = _BUILTIN.get(cls)
    if ours is None:
        mod = cls.__module__ or ""
        ours = _BUILTIN[cls] = mod == "torch.optim" or mod.startswith("torch.optim.")
    if not ours:
        return False
    return not (getattr(opt, "_optimizer_step_pre_hooks", None) or getattr(opt, "_optimizer_step_post_hooks", None))


def _params(opt: Any) -> List[Any]:
    return [p for g in opt.param_groups for p in g["params"]]


class _Grad:
    """A ``.grad`` tensor a step consumed. ``version``: when last known used or zeroed;
    ``seen``: at the last ``backward()``; ``grown``: the ``backward()`` that grew it."""

    __slots__ = ("ref", "version", "seen", "cleared", "site", "grown")


class _State:
    __slots__ = ("snap", "growers", "quiet")

    def __init__(self) -> None:
        self.snap: List[Optional[_Grad]] = []
        self.growers: List[Site] = []
        self.quiet = True  # no recorded gradient is uncleared: backward() has nothing to look at


class Steps(Watcher):
    codes = frozenset({"GL601", "GL605"})

    def __init__(self, monitor: Any) -> None:
        super().__init__(monitor)
        self._opts: Any = weakref.WeakKeyDictionary()  # optimizer -> _State
        self._live: List[_State] = []  # the states not known quiet (what backward() looks at)
        self._pending: List[Tuple[Any, Site]] = []  # (weakref(optimizer), site): steps not yet snapshot
        self._by_ptr: Dict[int, _Grad] = {}
        self._cleared: Any = WeakIdKeyDictionary()  # param -> site: fresh gradients set to None
        self._zeroed: Dict[int, Tuple[Any, int, Site]] = {}  # address -> (ref, version, site): zeroed in place
        self._clips: Any = WeakIdKeyDictionary()  # param -> site: clipped while it had no gradient
        self._stepping: List[Any] = []  # the optimizer inside step() (and any it steps)
        self._manual = _State()  # parameters updated by hand
        self._manual_grads: Any = WeakIdKeyDictionary()  # param -> _Grad
        self._handles: List[Any] = []
        self._thread = threading.get_ident()

    def install(self) -> None:
        import torch.optim.optimizer as optimizer

        self._handles = [optimizer.register_optimizer_step_pre_hook(self._pre),
                         optimizer.register_optimizer_step_post_hook(self._post)]
        self.m._gl_steps = self
        _ZERO_GRAD_USERS.append(self)
        if torch.optim.Optimizer.__dict__.get("zero_grad") is _ORIG_ZERO_GRAD:
            torch.optim.Optimizer.zero_grad = _zero_grad  # type: ignore[method-assign]

    def uninstall(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        if getattr(self.m, "_gl_steps", None) is self:
            del self.m._gl_steps
        if self in _ZERO_GRAD_USERS:
            _ZERO_GRAD_USERS.remove(self)
        if not _ZERO_GRAD_USERS and torch.optim.Optimizer.__dict__.get("zero_grad") is _zero_grad:
            torch.optim.Optimizer.zero_grad = _ORIG_ZERO_GRAD  # type: ignore[method-assign]

    def cleared_by_zero_grad(self, opt: Any) -> None:
        """``opt.zero_grad()`` (``set_to_none=True``) of a built-in optimizer is about to set
        every gradient of ``opt`` to None: what the ``.grad`` read and set taps would record, in
        one pass (the call itself then runs quietly)."""
        m = self.m
        if m._leaves:
            for p in _params(opt):
                m._grad_read(p)
        mine = [x for x in self._pending if x[0]() is opt]
        if mine:  # the gradients its last step used, untouched since: the usual zero_grad()
            self._pending = [x for x in self._pending if x[0]() is not opt]
            self._materialize()  # (another optimizer's, before they may change)
            st = self._opts.get(opt)
            if st is not None:
                st.snap, st.growers, st.quiet = [], [], True
            return
        self._materialize()
        site: Optional[Site] = None
        by_ptr = self._by_ptr
        for p in _params(opt):
            g = p.grad
            if g is None:
                continue
            e = by_ptr.get(_ptr(g)) if by_ptr else None
            if e is not None and e.ref() is g:
                e.cleared = True
                if g._version == e.version:
                    continue  # the gradients the last step used: the usual zero_grad()
            self._cleared[p] = site = site or where_raw()
        st = self._opts.get(opt)
        if st is not None and not st.quiet and all(e is None or e.cleared for e in st.snap):
            st.quiet = True  # nothing left for backward() to look at

    # -- step hooks ------------------------------------------------------------------------
    def _pre(self, opt: Any, args: Any, kwargs: Any) -> None:
        if self._stepping and self._stepping[0]() is not opt:
            self._stepping.append(None)  # an optimizer stepped by another one (Lookahead): its business
            return
        self._stepping = [weakref.ref(opt)]  # (also after a step that raised)
        if self._pending:
            self._materialize()
        # a built-in optimizer's update is torch's own bookkeeping: nothing in it is checked, so
        # the mode only forwards its calls (most of a small model's intercepted calls); not with
        # a closure (the user's forward and backward run inside) nor on another thread
        rest = args[1:] if args and args[0] is opt else args  # the hooks get (self, ...) as args
        self.m._quiet = int(_builtin(opt) and not rest and kwargs.get("closure") is None
                            and threading.get_ident() == self._thread)
        try:
            with _NoTF():
                self._check(opt)
        except Exception:
            pass

    def _post(self, opt: Any, args: Any, kwargs: Any) -> None:
        if len(self._stepping) > 1:
            self._stepping.pop()
            return
        self._stepping = []
        self.m._quiet = 0
        # the snapshot of the gradients this step used is taken when something may change them
        # (backward(), a clearing, a clipping, the next step): the usual zero_grad() that comes
        # first drops it unseen (O(1) per step instead of O(parameters))
        self._pending = [x for x in self._pending if x[0]() is not opt and x[0]() is not None]
        self._pending.append((weakref.ref(opt), where_raw()))

    def _materialize(self) -> None:
        pending, self._pending = self._pending, []
        for ref, site in pending:
            opt = ref()
            if opt is not None:
                try:
                    with _NoTF():
                        self._snapshot(opt, site)
                except Exception:
                    pass

    def _snapshot(self, opt: Any, site: Site) -> None:
        st = self._opts.get(opt)
        if st is None:
            st = self._opts[opt] = _State()
        snap: List[Optional[_Grad]] = []
        by_ptr = self._by_ptr
        for p in _params(opt):
            g = p.grad
            ptr = _ptr(g) if g is not None else 0
            if not ptr:  # no gradient, or one without an address (sparse, meta)
                snap.append(None)
                continue
            e = by_ptr.get(ptr)
            if e is None or e.ref() is not g:
                e = by_ptr[ptr] = _Grad()
                e.ref = weakref.ref(g)
            e.version = e.seen = g._version
            e.cleared, e.site, e.grown = False, site, None
            snap.append(e)
        st.snap, st.growers, st.quiet = snap, [], False
        if not any(x is st for x in self._live):
            self._live.append(st)
        if len(by_ptr) > 4 * len(snap) + 256:
            self._by_ptr = {k: e for k, e in by_ptr.items() if e.ref() is not None}

    def _check(self, opt: Any) -> None:
        st = self._opts.get(opt)
        if not (st is not None and st.growers) and not (self._cleared or self._zeroed or self._clips):
            return
        params = _params(opt)
        if st is not None and st.growers and len(st.snap) == len(params):
            for p, e in zip(params, st.snap):
                g = p.grad if e is not None and not e.cleared else None
                if g is not None and e.ref() is g and g._version != e.version:
                    here = where()
                    for path, line in st.growers:
                        self.m._add("GL601", f"backward() adds to `.grad` tensors ({describe(g)}) that nothing "
                                             f"cleared since the previous optimizer.step(): every step uses the "
                                             f"running sum of all gradients so far; call zero_grad() once per step",
                                    display_path(path), line,
                                    related=[(here[0], here[1], "the optimizer step that uses the accumulated "
                                                                "gradients")])
                    break
        if self._cleared or self._zeroed or self._clips:
            self._check_cleared(params)

    def _check_cleared(self, params: List[Any]) -> None:
        """Candidates of clearing after backward() and of clipping before it, settled by the
        gradients this step finds."""
        usable, cands, clips = False, [], []
        for p in params:
            g = p.grad
            c = self._cleared.pop(p, None) if self._cleared else None
            if c is not None:
                cands.append(c)
            fresh = g is not None
            if fresh and self._zeroed:
                z = self._zeroed.pop(_ptr(g), None)
                if z is not None and z[0]() is g and g._version == z[1]:
                    fresh = False
                    cands.append(z[2])
            usable = usable or fresh
            k = self._clips.pop(p, None) if self._clips else None
            if k is not None and fresh:
                clips.append((k, g))
        here = where()
        if cands and not usable:
            for site in dict.fromkeys(cands):
                self.m._add("GL601", f"this clears the gradients that backward() just computed ({describe(params[0])}, "
                                     f"...) before optimizer.step() uses them: the step finds no gradient and updates "
                                     f"nothing", display_path(site[0]), site[1],
                            related=[(here[0], here[1], "the optimizer step that finds the gradients cleared")])
        for site, g in clips:
            clipping.report_before_backward(self, site, g, here)

    # -- backward(): which recorded gradients does it grow? ------------------------------------
    def _armed(self) -> List[_State]:
        live = self._live = [st for st in self._live if not st.quiet]
        return live if self._manual.quiet else live + [self._manual]

    def before_backward(self, roots: List[Any], retain: bool, is_grad: bool) -> None:
        if is_grad or self._stepping:
            return
        if self._pending:
            self._materialize()
        for st in self._armed():
            live = False
            for e in st.snap:
                if e is not None and not e.cleared:
                    g = e.ref()
                    if g is None:
                        e.cleared = True
                    else:
                        live = True
                        e.seen = g._version
            st.quiet = not live

    def after_backward(self, roots: List[Any], retain: bool, is_grad: bool) -> None:
        if is_grad or self._stepping:
            return
        site = None
        for st in self._armed():
            grew = False
            for e in st.snap:
                if e is not None and not e.cleared:
                    g = e.ref()
                    if g is not None and g._version != e.seen:
                        grew = True
                        e.seen = g._version
                        e.grown = site = site or where_raw()
            if grew and site not in st.growers and len(st.growers) < 4:
                st.growers.append(site)

    # -- hand-written steps --------------------------------------------------------------------
    def manual_update(self, t: Any) -> None:
        """``w -= lr * w.grad`` under no_grad, ``w.data.sub_(...)``: a hand-written step of ``w``."""
        if self._pending:
            self._materialize()
        if t.requires_grad:
            if not t.is_leaf or torch.is_grad_enabled():
                return
            p = t
        else:
            aliases = self.m._aliases
            entry = aliases.get(t) if aliases else None
            p = entry[1]() if entry is not None and entry[0] == "data" else None
            if p is None or not p.is_leaf:
                return
        g = p.grad
        if g is None:
            return
        e = self._manual_grads.get(p)
        if e is not None and e.ref() is g and not e.cleared and g._version != e.version and e.grown:
            here = where()
            self.m._add("GL601", f"this update uses `.grad` ({describe(g)}) that nothing cleared since the previous "
                                 f"update: backward() added to it, so every update uses the running sum of all "
                                 f"gradients so far; clear it after the update (`w.grad = None`)", here[0], here[1],
                        related=[(display_path(e.grown[0]), e.grown[1], "the backward() that adds to the old "
                                                                        "gradient")])
        if e is None or e.ref() is not g:
            if len(self._manual_grads) > 256:
                return
            e = self._manual_grads[p] = self._by_ptr[_ptr(g)] = _Grad()
            e.ref = weakref.ref(g)
            self._manual.snap = list(self._manual_grads.values())
        e.version = e.seen = g._version
        e.cleared, e.grown, e.site = False, None, where_raw()
        self._manual.quiet = False

    # -- clearing ----------------------------------------------------------------------------
    def set_none(self, p: Any) -> None:
        if self._pending:
            self._materialize()
        g = p.grad
        if g is None:
            return
        e = self._by_ptr.get(_ptr(g)) if self._by_ptr else None
        if e is not None and e.ref() is g:
            e.cleared = True
            if g._version == e.version:
                return  # the gradients the last step used: the usual zero_grad()
        self._cleared[p] = where_raw()

    def zeroing(self, ts: List[Any]) -> List[Tuple[Optional[_Grad], Any, bool]]:
        """Before an in-place zeroing of ``ts``: ``(record, gradient, written since)`` each."""
        if self._pending:
            self._materialize()
        out = []
        for t in ts:
            if isinstance(t, _Tensor):
                e = self._by_ptr.get(_ptr(t)) if self._by_ptr else None
                g = e.ref() if e is not None else None
                out.append((e, g, g._version != e.version) if g is not None else (None, t, True))
        return out

    def zeroed(self, acts: List[Tuple[Optional[_Grad], Any, bool]]) -> None:
        site: Optional[Site] = None
        by_zero_grad: Optional[bool] = None
        for e, g, fresh in acts:
            if e is not None:
                e.cleared = True
                e.version = g._version
            if not fresh:
                continue
            if e is None:  # a tensor not known as a gradient: only zero_grad()'s own
                if by_zero_grad is None:
                    by_zero_grad = _called_from("zero_grad")
                if not by_zero_grad:
                    continue
            site = site or where_raw()
            self._zeroed[_ptr(g)] = (weakref.ref(g), g._version, site)
        if len(self._zeroed) > 4096:
            self._zeroed = {k: z for k, z in self._zeroed.items() if z[0]() is not None}


def _called_from(name: str, depth: int = 8) -> bool:
    frame = sys._getframe(2)
    while frame is not None and depth > 0 and frame.f_code.co_name != name:
        frame, depth = frame.f_back, depth - 1
    return frame is not None and depth > 0


# ------------------------------------------------------------------------------ zero_grad()
_ORIG_ZERO_GRAD = torch.optim.Optimizer.__dict__["zero_grad"]
_ZERO_GRAD_USERS: List[Steps] = []  # the active watchers (the innermost last)


def _zero_grad(self: Any, *args: Any, **kwargs: Any) -> None:
    """``Optimizer.zero_grad`` while a monitor is active: for a built-in optimizer clearing to
    None on the monitor's thread, the taps' bookkeeping in one pass, then torch's own code runs
    quietly (12 intercepted calls per 6 parameters fewer); otherwise unchanged."""
    w = _ZERO_GRAD_USERS[-1] if _ZERO_GRAD_USERS else None
    set_to_none = kwargs.get("set_to_none", args[0] if args else True)
    if (w is None or not set_to_none or w.m._quiet or w._stepping or not _builtin(self)
            or threading.get_ident() != w._thread):
        return _ORIG_ZERO_GRAD(self, *args, **kwargs)
    try:
        with _NoTF():
            w.cleared_by_zero_grad(self)
    except Exception:
        pass
    w.m._quiet = 1
    try:
        return _ORIG_ZERO_GRAD(self, *args, **kwargs)
    finally:
        w.m._quiet = 0


_zero_grad.__doc__ = _ORIG_ZERO_GRAD.__doc__

# ------------------------------------------------------------------------------ taps (once)
def _steps(m: Any) -> Optional[Steps]:
    w = getattr(m, "_gl_steps", None)
    return None if w is None or w._stepping else w


def _on_grad_set(m: Any, f: Any, a: Any, k: Any, call: Any) -> Any:
    if len(a) > 1 and a[1] is None:
        w = _steps(m)
        if w is not None:
            try:
                w.set_none(a[0])
            except Exception:
                pass
    return call()


_ZEROING = ("zero_", "_foreach_zero_")


def _in_place(name: str) -> Any:
    """Zeroing (``zero_``, ``fill_(0)``, ``mul_(0)``) and clipping ops on gradients."""

    def wrapper(m: Any, f: Any, a: Any, k: Any, call: Any) -> Any:
        w = _steps(m)
        if w is None or not a:
            return call()
        acts = None
        try:
            x = a[0]
            ts = list(x) if isinstance(x, (list, tuple)) else [x]
            zero = len(a) > 1 and isinstance(a[1], (int, float)) and a[1] == 0
            if name in _ZEROING or (zero and name in ("fill_", "mul_")):
                acts = w.zeroing(ts)
            elif name != "fill_":
                if w._pending:
                    w._materialize()
                if w._by_ptr:
                    clipping.clip_op(w, ts)
        except Exception:
            acts = None
        out = call()
        if acts:
            try:
                w.zeroed(acts)
            except Exception:
                pass
        return out

    return wrapper


def _on_sub(m: Any, f: Any, a: Any, k: Any, call: Any) -> Any:
    w = _steps(m)
    if w is not None and a and isinstance(a[0], _Tensor):
        try:
            w.manual_update(a[0])
        except Exception:
            pass
    return call()


def _on_tensor(m: Any, f: Any, a: Any, k: Any, call: Any) -> Any:
    out = call()
    w = _steps(m)
    if w is not None:
        try:
            clipping.empty_clip(w)
        except Exception:
            pass
    return out


def _install_taps() -> None:
    tap(_Tensor.grad.__set__, _on_grad_set)  # type: ignore[attr-defined]
    for name in ("zero_", "fill_") + clipping.CLIP_OPS:
        tap(getattr(_Tensor, name), _in_place(name))
    for name in ("_foreach_zero_",) + clipping.CLIP_FOREACH:
        fn = getattr(torch, name, None)
        if fn is not None:
            tap(fn, _in_place(name))
    tap(torch.tensor, _on_tensor)
    tap(_Tensor.sub_, _on_sub)


_install_taps()

WATCHERS = [Steps, NonLeafParams]
