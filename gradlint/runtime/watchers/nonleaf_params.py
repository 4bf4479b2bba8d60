"""GL301 non-leaf-parameter (part of the ``optimizers`` family): a tensor meant as a parameter
that a conversion turned into a non-leaf.

``torch.randn(3, requires_grad=True).double()`` (or ``.to(device)``, ``.cuda()``, ``.view()``,
``* 0.01``) keeps the leaf that requires grad inside the graph and binds the name to the
converted copy: a non-leaf, whose ``.grad`` stays None and which optimizers refuse.

* **The conversion.** The conversion methods are tapped (``gradlint.runtime.mode.tap``). When
  one runs on a plain leaf tensor (not an ``nn.Parameter``) that requires grad and has no
  ``.grad`` yet, and returns a new tensor of the graph, the result is recorded (a weak key, the
  line and the operation). The tap returns after a type check and two attribute reads otherwise.
* **The optimizer.** ``Optimizer.add_param_group`` raises ``ValueError("can't optimize a
  non-leaf Tensor")`` in plain Python, which the mode does not see: it is wrapped while a
  monitor is active (restored when the last one exits, if nobody replaced it meanwhile). The
  error is blamed on the recorded conversion, or on the statement that bound the refused tensor
  (the user's frames are searched for the variable that holds it), the optimizer's line related.
* **The ``.grad`` read.** The core asks each family (``claims_grad_read``) before it reports
  GL303 for a ``.grad`` read of a non-leaf. A recorded conversion whose original leaf no local
  of the user's frames holds any more (the conversion replaced it: a parameter was meant) is
  GL301 at the conversion; a converted copy of a leaf the program keeps stays GL303.
"""

from __future__ import annotations

from typing import Any, List

import torch
from torch.utils.weak import WeakIdKeyDictionary

from gradlint.runtime.attribution import display_path, where, where_raw
from gradlint.runtime.mode import describe, tap
from gradlint.runtime.sites import binding_line, error_expected, find_holders, location, user_frames
from gradlint.runtime.watchers import Watcher

_Tensor = torch.Tensor
_CONVERSIONS = ("to", "cuda", "cpu", "double", "float", "half", "bfloat16", "type", "view", "reshape", "mul")
_HINT = "create the tensor with its dtype/device and requires_grad=True in one call"


def _on_convert(m: Any, f: Any, a: Any, k: Any, call: Any) -> Any:
    t = a[0] if a else None
    if type(t) is not _Tensor or not t.is_leaf or not t.requires_grad:
        return call()
    out = call()
    w = getattr(m, "_gl_params", None)
    if w is not None and out is not t and isinstance(out, _Tensor) and out.grad_fn is not None:
        try:
            w.converted(t, out, f, a)
        except Exception:
            pass
    return out


def _leaf_of(t: Any) -> Any:
    """The leaf a converted tensor was made from (a chain of one-input nodes)."""
    fn = t.grad_fn
    for _ in range(4):
        nxt = [n for n, _ in fn.next_functions if n is not None] if fn is not None else []
        if len(nxt) != 1:
            return None
        fn = nxt[0]
        var = getattr(fn, "variable", None)
        if var is not None:
            return var
    return None


class NonLeafParams(Watcher):
    codes = frozenset({"GL301"})

    def __init__(self, monitor: Any) -> None:
        super().__init__(monitor)
        self._conv: Any = WeakIdKeyDictionary()  # non-leaf -> (raw path, line, "`.double()`")

    def install(self) -> None:
        _ACTIVE.append(self)
        if len(_ACTIVE) == 1:
            _patch()
        self.m._gl_params = self

    def uninstall(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if not _ACTIVE:
            _unpatch()
        if getattr(self.m, "_gl_params", None) is self:
            del self.m._gl_params

    def converted(self, t: Any, out: Any, f: Any, a: Any) -> None:
        name = getattr(f, "__name__", "?")
        if name == "mul":
            other = a[1] if len(a) > 1 else None
            scalar = isinstance(other, _Tensor) and not other.requires_grad and other.numel() == 1
            if not (scalar or isinstance(other, (int, float))):
                return
            what = "`*`"
        else:
            what = f"`.{name}()`"
        if t.grad is None:
            path, line = where_raw()
            self._conv[out] = (path, line, what)

    def claims_grad_read(self, t: Any) -> bool:
        """The core asks before reporting GL303 for a ``.grad`` read of the non-leaf ``t``."""
        try:
            rec = self._conv.get(t) if self._conv else None
            if rec is None:
                return False
            leaf = _leaf_of(t)
            if leaf is not None and find_holders(list(user_frames()), lambda v: v is leaf):
                return False  # a computation on a leaf the program keeps: GL303's case
            here = where()
            self.m._add("GL301", f"{rec[2]} of a new leaf tensor makes a non-leaf ({describe(t)}): its `.grad` stays "
                                 f"None (autograd fills the leaf it was made from, which nothing holds); {_HINT}",
                        display_path(rec[0]), rec[1], related=[(here[0], here[1], "its `.grad` is read here")])
            return True
        except Exception:
            return False

    def refused(self, group: Any) -> None:
        """``add_param_group`` raised "can't optimize a non-leaf Tensor" for ``group``."""
        if error_expected():
            return
        params = group.get("params") if isinstance(group, dict) else None
        params = [params] if isinstance(params, _Tensor) else list(params or ())
        here = where()
        related = [(here[0], here[1], "the optimizer raises \"can't optimize a non-leaf Tensor\" here")]
        for p in params:
            if not isinstance(p, _Tensor) or p.is_leaf or p.retains_grad:
                continue
            rec = self._conv.get(p)
            if rec is not None:
                path, line, what = display_path(rec[0]), rec[1], rec[2]
            else:
                path, line, what = here[0], here[1], "a computation"
                for frame, name, _ in find_holders(list(user_frames()), lambda v: v is p):
                    bound = binding_line(frame, name.split("[", 1)[0])
                    if bound is not None:
                        (path, line), what = location(frame, bound), f"`{name}`, computed here,"
                        break
            self.m._add("GL301", f"{what} makes a non-leaf ({describe(p)}) that is handed to an optimizer: torch "
                                 f"raises \"can't optimize a non-leaf Tensor\"; {_HINT} (or call "
                                 f"`.requires_grad_()` after the conversion)", path, line, related=related)
            return


# ------------------------------------------------------------------------------ add_param_group
_ACTIVE: List[NonLeafParams] = []
_ORIGINAL: List[Any] = []


def _add_param_group(self: Any, param_group: Any) -> Any:
    try:
        return _ORIGINAL[0](self, param_group)
    except ValueError as exc:
        if "non-leaf" in str(exc):
            for w in list(_ACTIVE):
                try:
                    w.refused(param_group)
                except Exception:
                    pass
        raise


def _patch() -> None:
    cls = torch.optim.Optimizer
    if cls.__dict__.get("add_param_group") is not _add_param_group:
        _ORIGINAL[:] = [cls.__dict__["add_param_group"]]
        cls.add_param_group = _add_param_group  # type: ignore[method-assign]


def _unpatch() -> None:
    cls = torch.optim.Optimizer
    if _ORIGINAL and cls.__dict__.get("add_param_group") is _add_param_group:
        cls.add_param_group = _ORIGINAL[0]  # type: ignore[method-assign]


for _name in _CONVERSIONS:
    tap(getattr(_Tensor, _name), _on_convert)
