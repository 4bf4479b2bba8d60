"""Custom ``torch.autograd.Function``s: what ``forward`` and ``backward`` do to their tensors.

A ``TorchFunctionMode`` does not see ``MyFunction.apply`` (nor the engine calling the Function's
``backward``), so while a monitor is active this family wraps the two Python entry points:
``Function.apply`` (a classmethod every custom Function inherits) and
``BackwardCFunction.apply`` (what the engine calls to run the user's ``backward``). Both are
restored when the last monitor exits (only if nobody replaced them meanwhile). Functions defined
inside torch are passed straight through.

* GL702 function-mutates-input: around ``forward`` a small recording mode (pushed above the
  monitor, so both see the calls) notes each in-place op whose target shares storage with an
  input that requires grad. After ``forward``, an input that was changed (an op seen, or its
  version counter moved) and that ``forward`` did not return as itself (``ctx.mark_dirty``
  returns the input object; an unmarked one comes back as a view) is reported at the in-place
  line, the ``apply`` call as related. ``x.copy_(x)`` changes nothing and is not counted.
* GL701 function-mutates-grad-output: the same recorder around the user's ``backward`` watches
  the incoming gradients: an in-place op on one of them is reported at once (before it runs: an
  expanded gradient makes torch raise "more than one element of the written-to tensor"). A
  gradient whose version counter moved without an op the recorder saw (an extension's kernel)
  is reported at the line where ``backward`` returned.
* GL704 function-backward-arity: after the user's ``backward`` returns, its result is counted as
  torch counts it (a non-tuple is one gradient; trailing ``None``s beyond the inputs are dropped)
  against ``len(ctx.needs_input_grad)``, the number of ``forward`` inputs. A mismatch (torch then
  raises "returned an incorrect number of gradients") and a single-input ``backward`` that falls
  off its end (a silent ``None`` gradient) are reported at the line where the user's ``backward``
  returned. That line is the ``f_lineno`` of its frame after the call: a profile function
  (``sys.setprofile``, this thread only, and only when no other profiler is set) catches the
  frame at its ``call`` event and removes itself at once.

No reference to the user's tensors outlives a call; per-class decisions are cached weakly.
"""

from __future__ import annotations

import inspect
import sys
import weakref
from types import FrameType
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch.autograd.function import BackwardCFunction, Function
from torch.overrides import TorchFunctionMode

from gradlint.runtime.attribution import display_path, where
from gradlint.runtime.watchers import Watcher

Tensor = torch.Tensor
ARITY = "returned an incorrect number of gradients"
_is_compiling = torch.compiler.is_dynamo_compiling

# a classmethod (torch <= 2.14) or a classmethod_descriptor of the C base (2.15), which has no
# ``__func__``: the original is called through the descriptor protocol, which both support
_ORIG_APPLY = Function.__dict__["apply"]


def _orig_apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
    return _ORIG_APPLY.__get__(None, cls)(*args, **kwargs)
_ORIG_BACKWARD = BackwardCFunction.__dict__["apply"]
_ACTIVE: List["Functions"] = []  # the watchers of the active monitors, innermost last
_no_torch_function = torch._C.DisableTorchFunction  # reading our own attributes bypasses the modes
_NOT_WRITES = frozenset({"requires_grad_", "detach_", "share_memory_", "retain_grad_", "record_stream_"})


# ------------------------------------------------------------------------------ helpers
_PER_CLASS: Dict[int, Tuple[Any, bool, Any]] = {}  # id(cls) -> (weakref(cls), torch's own, backward code)


def _class_info(cls: Any) -> Tuple[Any, bool, Any]:
    try:
        info = _PER_CLASS.get(id(cls))
        if info is not None and info[0]() is cls:
            return info
        mod = getattr(cls, "__module__", "") or ""
        own = mod == "torch" or mod.startswith(("torch.", "functorch"))
        code = None
        if not own:
            try:
                backward, vjp = cls.backward, cls.vjp
                fn = vjp if vjp is not Function.vjp else backward
                code = getattr(inspect.unwrap(fn), "__code__", None)
            except Exception:
                code = None
        info = _PER_CLASS[id(cls)] = (weakref.ref(cls), own, code)
        return info
    except Exception:
        return (None, True, None)


def _torch_own(cls: Any) -> bool:
    """A Function defined by torch itself (checkpointing, compiled graphs, ...)."""
    return _class_info(cls)[1]


_INPLACE_KIND: Dict[Any, int] = {}  # func -> 0 (not in place), 1 (first argument), 2 + index of `inplace`


def _kind(func: Any) -> int:
    try:
        return _INPLACE_KIND[func]
    except (KeyError, TypeError):
        pass
    kind = 0
    name = getattr(func, "__name__", "")
    if isinstance(name, str):
        if name == "__setitem__" or (name.endswith("_") and not name.startswith("_") and name not in _NOT_WRITES):
            kind = 1
        elif getattr(func, "__module__", "") == "torch.nn.functional":
            try:
                params = list(inspect.signature(func).parameters)
                if "inplace" in params:
                    kind = 2 + params.index("inplace")
            except (TypeError, ValueError):
                pass
    try:
        _INPLACE_KIND[func] = kind
    except TypeError:
        pass
    return kind


def _ptr(t: Tensor) -> Optional[int]:
    try:
        return t.untyped_storage().data_ptr() or None
    except Exception:
        return None


class _Recorder(TorchFunctionMode):
    """Pushed above the monitor while a custom forward/backward runs: calls ``on_write(index,
    op, noop)`` before each in-place op whose target shares storage with ``tensors[index]``."""

    def __init__(self, tensors: List[Tensor], on_write: Callable[[int, str, bool, Tensor], None]) -> None:
        super().__init__()
        self.tensors = tensors
        self.ids = {id(t): i for i, t in enumerate(tensors)}
        self.ptrs: Optional[Dict[int, int]] = None  # storage -> index, on the first in-place op
        self.on_write = on_write

    def _index(self, target: Tensor) -> Optional[int]:
        i = self.ids.get(id(target))
        if i is not None:
            return i
        with _no_torch_function():
            if self.ptrs is None:
                self.ptrs = {}
                for j, t in enumerate(self.tensors):
                    p = _ptr(t)
                    if p is not None:
                        self.ptrs.setdefault(p, j)
            p = _ptr(target)
        return self.ptrs.get(p) if p is not None else None

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        try:
            kind = _kind(func)
            target = None
            if kind == 1:
                target = args[0] if args else kwargs.get("input")
            elif kind >= 2 and kwargs.get("inplace", args[kind - 2] if len(args) > kind - 2 else False):
                target = args[0] if args else kwargs.get("input")
            elif kwargs and isinstance(kwargs.get("out"), Tensor):
                target = kwargs["out"]
            if isinstance(target, Tensor):
                i = self._index(target)
                if i is not None:
                    name = getattr(func, "__name__", "op")
                    noop = name == "copy_" and len(args) > 1 and args[1] is target
                    self.on_write(i, name, noop, target)
        except Exception:
            pass
        return func(*args, **kwargs)


def _explicit_return(code: Any, line: int) -> bool:
    """Is ``line`` inside a ``return`` statement of the function ``code`` runs?"""
    import ast

    from gradlint.runtime.sites import _tree

    tree = _tree(code.co_filename)
    if tree is None:
        return True  # unknown: assume the author wrote it
    lines = [ln for _, _, ln in code.co_lines() if ln is not None]
    first, last = code.co_firstlineno, max(lines, default=code.co_firstlineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and first <= node.lineno <= last:
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                return True
    return False


def _describe(t: Any) -> str:
    from gradlint.runtime.mode import describe

    return describe(t)


# ------------------------------------------------------------------------------ the wrappers
def _apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
    w = _ACTIVE[-1] if _ACTIVE else None
    if w is None or _is_compiling() or _torch_own(cls):
        return _orig_apply(cls, *args, **kwargs)
    return w.forward_call(cls, args, kwargs)


def _backward_apply(self: Any, *args: Any) -> Any:
    w = _ACTIVE[-1] if _ACTIVE else None
    if w is None or _torch_own(getattr(type(self), "_forward_cls", None)):
        return _ORIG_BACKWARD(self, *args)
    return w.backward_call(self, args)


class Functions(Watcher):
    codes = frozenset({"GL701", "GL702", "GL704"})

    def install(self) -> None:
        if not _ACTIVE:
            Function.apply = classmethod(_apply)  # type: ignore[method-assign, assignment]
            BackwardCFunction.apply = _backward_apply  # type: ignore[method-assign]
        _ACTIVE.append(self)

    def uninstall(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if not _ACTIVE:
            cur = Function.__dict__.get("apply")
            if isinstance(cur, classmethod) and cur.__func__ is _apply:
                Function.apply = _ORIG_APPLY  # type: ignore[method-assign]
            if BackwardCFunction.__dict__.get("apply") is _backward_apply:
                BackwardCFunction.apply = _ORIG_BACKWARD  # type: ignore[method-assign]

    def on_error(self, exc: BaseException, func: Any, args: Any, kwargs: Any) -> bool:
        return ARITY in str(exc)  # recorded where backward returned (see backward_call)

    # -- GL702 --------------------------------------------------------------------------------
    def forward_call(self, cls: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        inputs: List[Tensor] = []
        versions: List[int] = []
        try:
            with _no_torch_function():
                for a in args + tuple(kwargs.values()):
                    if isinstance(a, Tensor) and a.requires_grad and not any(a is b for b in inputs):
                        inputs.append(a)
                        versions.append(a._version)
        except Exception:
            inputs = []
        if not inputs:
            return _orig_apply(cls, *args, **kwargs)
        writes: List[Tuple[int, str, bool, str, int]] = []

        def on_write(i: int, op: str, noop: bool, target: Tensor) -> None:
            if len(writes) < 16:
                path, line = where()
                writes.append((i, op, noop, path, line))

        rec: Optional[_Recorder] = None
        try:
            rec = _Recorder(inputs, on_write)
            rec.__enter__()
        except Exception:
            rec = None
        try:
            out = _orig_apply(cls, *args, **kwargs)
        finally:
            if rec is not None:
                try:
                    rec.__exit__(None, None, None)
                except Exception:
                    pass
        try:
            with _no_torch_function():
                self._check_forward(cls, inputs, versions, writes, out)
        except Exception:
            pass
        return out

    def _check_forward(self, cls: Any, inputs: List[Tensor], versions: List[int],
                       writes: List[Tuple[int, str, bool, str, int]], out: Any) -> None:
        outs = out if isinstance(out, (tuple, list)) else (out,)
        returned = {id(o) for o in outs if isinstance(o, Tensor)}
        name = getattr(cls, "__name__", "Function")
        for i, t in enumerate(inputs):
            if id(t) in returned:
                continue  # ctx.mark_dirty(t): forward returned the input itself
            mine = [w for w in writes if w[0] == i]
            real = [w for w in mine if not w[2]]
            if not real and (mine or t._version == versions[i]):
                continue
            path, line = where()  # the user's line that called apply
            what = f"`{real[0][1]}`" if real else "an in-place write"
            message = (f"{what} changes input {i} of `{name}.forward` ({_describe(t)}, requires grad) in place "
                       f"without ctx.mark_dirty(): the caller's tensor changes and autograd does not know, so "
                       f"the gradient is wrong")
            related = [(path, line, f"`{name}.apply` called here")]
            if real:
                self.m._add("GL702", message, real[0][3], real[0][4], related=related)
            else:
                self.m._add("GL702", message, path, line)

    # -- GL701, GL704 ---------------------------------------------------------------------------
    def backward_call(self, ctx: Any, args: Tuple[Any, ...]) -> Any:
        grads = [a for a in args if isinstance(a, Tensor)]
        name = getattr(getattr(type(ctx), "_forward_cls", None), "__name__", "Function")
        reported: List[int] = []
        seen: List[int] = []

        def on_write(i: int, op: str, noop: bool, target: Tensor) -> None:
            seen.append(i)
            if noop or i in reported:
                return
            reported.append(i)
            self.m._report("GL701", f"in-place `{op}` on the incoming gradient {i} of `{name}.backward` "
                                    f"({_describe(target)}): it may be shared with other branches of the graph "
                                    f"(or be the caller's own tensor), whose gradients become wrong")

        code = _class_info(getattr(type(ctx), "_forward_cls", None))[2]
        try:
            with _no_torch_function():
                versions = [g._version for g in grads]
        except Exception:
            versions = []
        frames: List[FrameType] = []

        def catch(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code is code:
                frames.append(frame)  # its f_lineno, once it returned, is the line that returned
                sys.setprofile(None)

        prof = catch if code is not None and sys.getprofile() is None else None

        rec: Optional[_Recorder] = None
        if grads:
            try:
                rec = _Recorder(grads, on_write)
                rec.__enter__()
            except Exception:
                rec = None
        try:
            if prof is not None:
                sys.setprofile(prof)
            result = _ORIG_BACKWARD(ctx, *args)
        except BaseException:
            frames.clear()
            raise
        finally:
            if prof is not None and sys.getprofile() is prof:
                sys.setprofile(None)
            if rec is not None:
                try:
                    rec.__exit__(None, None, None)
                except Exception:
                    pass
        try:
            with _no_torch_function():
                moved = [i for i, (g, v) in enumerate(zip(grads, versions)) if g._version != v and i not in seen]
                if moved and frames:  # written where the recorder could not see it (an extension, a kernel)
                    f = frames[0]
                    self.m._add("GL701", f"`{name}.backward` changed its incoming gradient {moved[0]} "
                                         f"({_describe(grads[moved[0]])}) in place: it may be shared with other "
                                         f"branches of the graph, whose gradients become wrong",
                                display_path(f.f_code.co_filename), f.f_lineno)
                self._check_arity(ctx, name, grads, result, frames[0] if frames else None, code)
        except Exception:
            pass
        finally:
            frames.clear()  # the finished frame refers back to this one: no cycle to leave to the gc
        return result

    def _check_arity(self, ctx: Any, name: str, grads: List[Tensor], result: Any,
                     frame: Optional[FrameType], code: Any) -> None:
        needs = tuple(ctx.needs_input_grad)
        expected = len(needs)
        got = result if isinstance(result, tuple) else (result,)
        n = len(got)
        if n > expected and all(g is None for g in got[expected:]):
            n = expected
        if n == expected and not (expected == 1 and result is None):
            return
        grad = _describe(grads[0]) if grads else "no incoming gradient"
        if frame is not None:
            path, line = display_path(frame.f_code.co_filename), frame.f_lineno
        elif code is not None:
            path, line = display_path(code.co_filename), code.co_firstlineno
        else:
            return
        if n != expected:
            from gradlint.runtime.sites import error_expected

            if error_expected():
                return
            here = where()
            related = [(here[0], here[1], "torch raises at this backward()")] if here[1] else []
            self.m._add("GL704", f"`{name}.backward` returns {n} gradient{'s' if n != 1 else ''} for {expected} "
                                 f"forward() input{'s' if expected != 1 else ''} (incoming gradient {grad}): torch "
                                 f"raises \"function {type(ctx).__name__} {ARITY} (expected {expected}, got {n})\"; "
                                 f"return one per input (None for inputs that need none), as a tuple",
                        path, line, related=related)
        elif (expected == 1 and result is None and needs[0] and frame is not None
              and not _explicit_return(frame.f_code, line)):
            self.m._add("GL704", f"`{name}.backward` ends without `return` (incoming gradient {grad}): its input "
                                 f"gets a None gradient, silently, and nothing before the Function trains",
                        path, line)


WATCHERS = [Functions]
