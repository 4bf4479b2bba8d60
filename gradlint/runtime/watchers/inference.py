"""Inference mode and grad mode: autograd switched off where the program needs it later.

GL703 inference-mode-tensor-in-autograd: torch raises "Inference tensors cannot be saved for
backward" (and "Inplace update to inference tensor outside InferenceMode", "Setting
requires_grad=True on inference tensor", "Inference tensors do not track version counter") at
the op: the symptom. ``on_error`` looks for the inference tensor among the op's arguments and
names its origin: a parameter of a module built under ``inference_mode`` (then the finding goes
to the statement that built it), a variable of the user's live frames bound inside ``with
torch.inference_mode():`` (named as a related location of the op), or a function decorated with
``@torch.inference_mode()`` that ran since the last ``backward()`` (``inference_mode.__enter__``,
wrapped while the monitor is active, records the decorated function when it is entered from
torch's decorator). Silent case: a module built under ``inference_mode`` has inference tensors
for parameters; the global parameter registration hook sees them made and puts a forward pre
hook on that module only, which reports the building statement (the one inside the ``with``)
when the module is first called with grad enabled.

GL306 grad-mode-left-off: ``torch.set_grad_enabled`` is a class whose constructor switches the
mode at once (``with`` and the decorator only restore it afterwards). Its ``__init__`` (wrapped)
records a ``torch.set_grad_enabled(False)`` that switched grad off when its statement, read with
``ast``, is a plain call (not a ``with`` item, not a decorator); a plain
``set_grad_enabled(True)`` forgets it. A later ``backward()``/``autograd.grad()`` on the same
thread, with grad mode still off and a root without a graph, reports the switch-off.

``Patching`` (used by the modules family too) undoes the wrappers and hooks a family installs.
"""

from __future__ import annotations

import ast
import collections
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.modules.module as _mm
from torch.autograd.grad_mode import inference_mode, set_grad_enabled
from torch.utils.weak import WeakIdKeyDictionary

from gradlint.runtime.attribution import _skip_prefixes, _skipped, display_path, skipped_file, where
from gradlint.runtime.sites import bindings, enclosing_with, find_holders, location, user_frames, _tree
from gradlint.runtime.watchers import Patching

_INFERENCE = ("inference_mode",)
_is_compiling = torch.compiler.is_dynamo_compiling
_MAX_HOOKED = 256


def _describe(t: Any) -> str:
    from gradlint.runtime.mode import describe

    return describe(t)


def _user(frame: Any) -> bool:
    return frame is not None and not skipped_file(frame.f_code.co_filename)


def _tensors(args: Any, kwargs: Any) -> List[torch.Tensor]:
    out: List[torch.Tensor] = []
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v[:4096] if isinstance(x, torch.Tensor))
    return out


_PLAIN: Dict[Tuple[str, int], bool] = {}


def _plain_call(frame: Any) -> bool:
    """The frame's current statement is ``torch.set_grad_enabled(...)`` as a statement of its
    own (or assigned: ``_ = torch.set_grad_enabled(False)``), not a ``with`` item or a decorator."""
    key = (frame.f_code.co_filename, frame.f_lineno)
    hit = _PLAIN.get(key)
    if hit is None:
        hit = False
        tree = _tree(key[0])
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.Expr, ast.Assign)) and node.lineno <= key[1] <= (node.end_lineno or node.lineno):
                call = node.value
                func = call.func if isinstance(call, ast.Call) else None
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name == "set_grad_enabled":
                    hit = True
                    break
        _PLAIN[key] = hit
    return hit


class Inference(Patching):
    codes = frozenset({"GL703", "GL306"})

    def __init__(self, monitor: Any) -> None:
        super().__init__(monitor)
        self._params: Any = WeakIdKeyDictionary()  # inference parameter -> (path, line) where built
        self._hooked: Any = WeakIdKeyDictionary()
        self._sites: Dict[Tuple[str, int], Tuple[str, int]] = {}
        self._decorated: collections.deque = collections.deque(maxlen=8)  # (path, line, name)
        self._leak: Optional[Tuple[int, str, int]] = None  # (thread, path, line) of set_grad_enabled(False)

    # -- install -----------------------------------------------------------------------------
    def install(self) -> None:
        self.active = True
        self._handles.append(_mm.register_module_parameter_registration_hook(self._on_param))
        self.patch(set_grad_enabled, "__init__", self._wrap_set_grad)
        self.patch(inference_mode, "__enter__", self._wrap_enter)

    def uninstall(self) -> None:
        self.unpatch()

    # -- GL703: modules built under inference_mode ---------------------------------------------
    def _on_param(self, module: nn.Module, name: str, param: Any) -> None:
        if not self.active or not torch.is_inference_mode_enabled() or _is_compiling():
            return
        try:
            if not (isinstance(param, torch.Tensor) and param.is_inference()):
                return
            site = self._built_at()
            if site is None:
                return
            self._params[param] = site
            if module not in self._hooked and len(self._hooked) < _MAX_HOOKED:
                self._hooked[module] = True
                self._handles.append(module.register_forward_pre_hook(self._pre_forward(site)))
        except Exception:
            pass

    def _built_at(self) -> Optional[Tuple[str, int]]:
        """The user's statement inside ``with torch.inference_mode():`` that builds the module
        (the innermost user frame when no ``with`` is found: a decorated function)."""
        frames = list(user_frames())
        if not frames:
            return None
        key = (frames[0].f_code.co_filename, frames[0].f_lineno)
        site = self._sites.get(key)
        if site is None:
            site = location(frames[0])
            for f in frames:
                if enclosing_with(f, f.f_lineno, _INFERENCE) is not None:
                    site = location(f)
                    break
            self._sites[key] = site
        return site

    def _pre_forward(self, site: Tuple[str, int]) -> Any:
        m = self.m

        def hook(module: nn.Module, args: Any) -> None:
            if not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
                return
            try:
                bad = [p for p in module.parameters(recurse=False) if p.requires_grad and p.is_inference()]
                if bad:
                    m._add("GL703", f"`{type(module).__name__}` is built under inference_mode and called with grad "
                                    f"enabled: its parameters ({_describe(bad[0])}) are inference tensors, their "
                                    f"`.grad` stays None (or torch raises \"Inference tensors cannot be saved for "
                                    f"backward\") and optimizer.step() raises; build it outside inference_mode",
                           site[0], site[1], related=[(*where(), "called with grad enabled here")])
            except Exception:
                pass

        return hook

    # -- GL703: torch's errors -------------------------------------------------------------------
    def on_error(self, exc: BaseException, func: Any, args: Any, kwargs: Any) -> bool:
        text = str(exc)
        if "nference tensor" not in text:
            return False
        every = _tensors(args, kwargs)
        inf = [t for t in every if t.is_inference()]
        shape = _describe(inf[0] if inf else every[0]) if every else "a tensor"
        torch_says = text.split(". ")[0].split(".You")[0].rstrip(".")
        here = where()
        op = getattr(func, "__name__", "the op")
        for t in inf:
            site = self._params.get(t)
            if site is not None:
                self.m._add("GL703", f"this module is built under inference_mode: its parameter ({_describe(t)}) is "
                                     f"an inference tensor, and `{op}` with it raises \"{torch_says}\"; build the "
                                     f"module outside inference_mode (torch.no_grad() has no such limit)",
                            site[0], site[1], related=[(here[0], here[1], "torch raises here")])
                return True
        origin = self._origin(inf)
        if origin is None and self._decorated:
            path, line, name = self._decorated[-1]
            self.m._add("GL703", f"`{name}` is decorated with @torch.inference_mode(): what it returns is an inference "
                                 f"tensor, and autograd later fails on one ({shape}): \"{torch_says}\"; use "
                                 f"@torch.no_grad() (or clone() the result)", path, line,
                        related=[(here[0], here[1], "torch raises here")])
            return True
        related = [origin] if origin is not None else []
        self.m._add("GL703", f"`{op}` gets a tensor made under inference_mode ({shape}) with grad enabled: torch raises "
                             f"\"{torch_says}\"; make it under torch.no_grad() instead, or clone() it outside "
                             f"inference_mode", here[0], here[1], related=related)
        return True

    @staticmethod
    def _origin(inf: List[torch.Tensor]) -> Optional[Tuple[str, int, str]]:
        """A variable of the user's frames that holds the inference tensor, bound inside a
        ``with torch.inference_mode():``."""
        if not inf:
            return None
        ids = {id(t) for t in inf}
        for frame, name, _ in find_holders(list(user_frames()), lambda v: id(v) in ids):
            lines = [ln for ln, _ in bindings(frame, name) if enclosing_with(frame, ln, _INFERENCE) is not None]
            if lines:
                before = [ln for ln in lines if ln <= frame.f_lineno]
                line = before[-1] if before else lines[-1]
                return display_path(frame.f_code.co_filename), line, f"`{name}` is made under inference_mode here"
        return None

    def _wrap_enter(self, orig: Any) -> Any:
        watcher = self

        def __enter__(ctx: Any) -> Any:
            out = orig(ctx)
            if watcher.active and getattr(ctx, "mode", False) and not _is_compiling():
                try:
                    caller = sys._getframe(1)
                    if caller.f_code.co_name == "decorate_context":
                        code = getattr(caller.f_locals.get("func"), "__code__", None)
                        if code is not None and not _skipped(code.co_filename, _skip_prefixes()):
                            entry = (display_path(code.co_filename), code.co_firstlineno, code.co_name)
                            if not watcher._decorated or watcher._decorated[-1] != entry:
                                watcher._decorated.append(entry)
                except Exception:
                    pass
            return out

        return __enter__

    def after_backward(self, roots: List[Any], retain: bool, is_grad: bool) -> None:
        self._decorated.clear()

    # -- GL306 ---------------------------------------------------------------------------------
    def _wrap_set_grad(self, orig: Any) -> Any:
        watcher = self

        def __init__(ctx: Any, mode: bool) -> None:
            orig(ctx, mode)
            if watcher.active and not _is_compiling():
                try:
                    watcher._grad_mode_set(ctx, bool(mode), sys._getframe(1))
                except Exception:
                    pass

        return __init__

    def _grad_mode_set(self, ctx: Any, mode: bool, caller: Any) -> None:
        if not _user(caller):
            return  # torch's own (the decorator's clone())
        if mode:
            if self._leak is not None and _plain_call(caller):
                self._leak = None
            return
        if getattr(ctx, "prev", None) is True and _plain_call(caller):
            self._leak = (threading.get_ident(), display_path(caller.f_code.co_filename), caller.f_lineno)

    def before_backward(self, roots: List[Any], retain: bool, is_grad: bool) -> None:
        leak = self._leak
        if leak is None or torch.is_grad_enabled() or leak[0] != threading.get_ident():
            return
        dead = [r for r in roots if not r.requires_grad]
        if not dead:
            return
        here = where()
        call = "torch.autograd.grad()" if is_grad else "backward()"
        self.m._add("GL306", f"`torch.set_grad_enabled(False)` called as a statement switches autograd off for the "
                             f"whole thread, and nothing switched it back on: the later {call} gets a tensor "
                             f"computed without a graph ({_describe(dead[0])}) and torch raises; use `with "
                             f"torch.no_grad():` (or restore the previous mode)", leak[1], leak[2],
                    related=[(here[0], here[1], f"{call} with grad mode still off")])


WATCHERS = [Inference]
