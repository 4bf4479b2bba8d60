"""Modules and their parameters: what the module tree, ``forward()`` and the optimizers disagree on.

GL602 unregistered-submodule: ``nn.Module.__setattr__`` (wrapped while the monitor is active)
sees ``self.NAME = value`` run by a method of the module itself: a plain list, tuple or dict (even
empty: modules may be appended to it) or a plain leaf tensor with ``requires_grad=True``. The
store is settled once the module is built (no ``__init__`` of it on the stack), at the next
``named_modules``/``named_children``/``_save_to_state_dict`` (what ``parameters()``, ``to()``,
``train()``, ``state_dict()`` and building an optimizer go through; wrapped too) or
``optimizer.step()``: the attribute, read from the module's ``__dict__``, still holds modules
with trainable parameters (or Dropout/BatchNorm) that the module does not register, or the
plain tensor. Reported at the statement that stored it (for an empty list, the class's
``self.NAME.append(...)``, found with ``ast``). Modules passed in as arguments are left alone.

GL603 module-created-in-forward: the global parameter registration hook fires for every
``nn.Parameter`` assigned to a module (a new ``nn.Linear`` registers its weight in its
constructor); a frame of ``Module._call_impl`` (or a ``forward``) on the stack means a parameter
is created while a forward runs. ``self.w = nn.Parameter(...)`` is reported at once; a new module
when it turns out to be a temporary (a weak reference's callback: it died while the module that
ran it lives on), not one cached on the module. A lazy build (``if self.proj is None:``) is fine.

GL604 optimizer-stale-params: the global module/parameter registration hooks see
``model.head = nn.Linear(...)`` / ``layer.weight = nn.Parameter(...)`` replace trainable
parameters (weak references to the old and new ones are kept). At ``optimizer.step()`` (global
step pre hook) an optimizer that holds old parameters but no new one, while a new one has a
gradient, is a suspect; reported at the replacing statement when it steps again (or at the
end), unless an optimizer holding the new parameters steps meanwhile. And ``model = Net()``
bound again after the optimizer was built: at a step where none of the optimizer's parameters
has a gradient, a module of the user's frames with parameters of the same shapes, none in the
optimizer, that have gradients, is reported where its variable was bound.

GL705 module-backward-hook: ``Module.register_backward_hook`` (wrapped) called by the user's
code; reported at the registering line when the module is first called with grad enabled (a
one-shot forward hook on that module gives the output's shape). The message says what the hook
reads (its code: grad_input, grad_output only, neither); a hook that reads nothing and returns
nothing is not reported.

Every wrapper calls the original exactly once; only weak references to user objects are kept.
"""

from __future__ import annotations

import ast
import collections
import sys
import weakref
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.modules.module as _mm
from torch.optim.optimizer import register_optimizer_step_pre_hook

from gradlint.runtime.attribution import display_path, where
from gradlint.runtime.sites import _own_nodes, _scope_of, _tree, binding_line, find_holders, user_frames
from gradlint.runtime.watchers import Patching
from gradlint.runtime.watchers.inference import _describe, _user

_CALL_IMPL = nn.Module._call_impl.__code__
_CONTAINERS = (list, tuple, dict, collections.OrderedDict)
_MODE_SENSITIVE = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._NormBase)
_APPENDS = frozenset({"append", "extend", "insert", "__setitem__", "update", "setdefault"})
_LAZY = ("none", "hasattr", "getattr", "built", "init")
_is_compiling = torch.compiler.is_dynamo_compiling


def _modules_in(value: Any, depth: int = 0) -> List[nn.Module]:
    items = list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, (list, tuple)) else []
    out: List[nn.Module] = []
    for v in items[:256]:
        if isinstance(v, nn.Module):
            out.append(v)
        elif depth < 1 and type(v) in _CONTAINERS:
            out.extend(_modules_in(v, depth + 1))
    return out


def _params(obj: Any) -> List[torch.Tensor]:
    if isinstance(obj, nn.Module):
        return [p for p in obj.parameters() if p.requires_grad][:512]
    return [obj] if isinstance(obj, torch.Tensor) and obj.requires_grad else []


def _self_attr(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == name and getattr(node.value, "id", None) == "self"


def _lazy_guard(frame: Any) -> bool:
    """The frame's current line runs inside ``if self.x is None:`` (``hasattr``, ``built``): a
    lazy build, made once and cached."""
    tree, line = _tree(frame.f_code.co_filename), frame.f_lineno
    for node in _own_nodes(_scope_of(tree, frame)) if tree is not None else ():
        if isinstance(node, ast.If) and (node.test.end_lineno or 0) < line <= (node.end_lineno or 0):
            if any(w in ast.unparse(node.test).lower() for w in _LAZY):
                return True
    return False


class _Store:
    __slots__ = ("parent", "name", "path", "line", "filename", "empty", "external")

    def __init__(self, parent: nn.Module, name: str, frame: Any, empty: bool, external: frozenset) -> None:
        self.parent, self.name, self.empty, self.external = weakref.ref(parent), name, empty, external
        self.filename, self.line = frame.f_code.co_filename, frame.f_lineno
        self.path = display_path(self.filename)


class _Replaced:
    __slots__ = ("old", "new", "path", "line", "label", "what", "suspect", "related", "shape")

    def __init__(self, old: List[torch.Tensor], new: List[torch.Tensor], label: str, what: str) -> None:
        self.old, self.new = [weakref.ref(p) for p in old], [weakref.ref(p) for p in new]
        self.path, self.line = where()
        self.label, self.what, self.shape = label, what, _describe(new[0])
        self.suspect: Optional[int] = None  # id() of the optimizer that stepped without the new parameters
        self.related: List[Tuple[str, int, str]] = []

    @staticmethod
    def live(refs: List[Any]) -> List[torch.Tensor]:
        return [p for p in (r() for r in refs) if p is not None]


class Modules(Patching):
    codes = frozenset({"GL602", "GL603", "GL604", "GL705"})

    def __init__(self, monitor: Any) -> None:
        super().__init__(monitor)
        self._stores: Dict[Tuple[int, str], _Store] = {}
        self._settling = False
        self._replaced: collections.deque = collections.deque(maxlen=64)
        self._scans: Dict[int, int] = {}  # id(optimizer) -> searches for a stale instance
        self._created: collections.deque = collections.deque(maxlen=64)  # GL603 candidates (modules)

    def install(self) -> None:
        self.active = True
        self._handles = [_mm.register_module_module_registration_hook(self._on_module),
                         _mm.register_module_parameter_registration_hook(self._on_param),
                         register_optimizer_step_pre_hook(self._on_step)]
        self.patch(nn.Module, "__setattr__", self._wrap_setattr)
        for name in ("named_modules", "named_children", "_save_to_state_dict"):
            self.patch(nn.Module, name, self._wrap_settle)
        self.patch(nn.Module, "register_backward_hook", self._wrap_backward_hook)

    def uninstall(self) -> None:
        self.unpatch()
        self._stores.clear()

    def before_backward(self, roots: List[Any], retain: bool, is_grad: bool) -> None:
        if self._created:
            self._settle_created()

    def finish(self) -> None:
        try:
            self._settle_created()
            self._settle(finishing=True)
        except Exception:
            pass
        for rec in self._replaced:
            if rec.suspect is not None:
                self._report_stale(rec)
        self._replaced.clear()

    # -- wrappers ------------------------------------------------------------------------------
    def _wrap_setattr(self, orig: Any) -> Any:
        def __setattr__(module: nn.Module, name: str, value: Any) -> None:
            orig(module, name, value)
            if self.active and (type(value) in _CONTAINERS or (type(value) is torch.Tensor and value.requires_grad)):
                try:
                    self._stored(module, name, value)
                except Exception:
                    pass

        return __setattr__

    def _wrap_settle(self, orig: Any) -> Any:
        def settle_first(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            if self._stores and not self._settling and self.active and not _is_compiling():
                try:
                    self._settle()
                except Exception:
                    pass
            return orig(module, *args, **kwargs)

        settle_first.__name__, settle_first.__doc__ = orig.__name__, orig.__doc__
        return settle_first

    def _wrap_backward_hook(self, orig: Any) -> Any:
        def register_backward_hook(module: nn.Module, hook: Any) -> Any:
            handle = orig(module, hook)
            if self.active and not _is_compiling():
                try:
                    self._non_full_hook(module, sys._getframe(1), _hook_use(hook))
                except Exception:
                    pass
            return handle

        register_backward_hook.__doc__ = orig.__doc__
        return register_backward_hook

    # -- GL602 ---------------------------------------------------------------------------------
    def _stored(self, parent: nn.Module, name: str, value: Any) -> None:
        if _is_compiling():
            return
        frame = sys._getframe(2)
        while frame is not None and (frame.f_code.co_name == "__setattr__" or not _user(frame)):
            frame = frame.f_back  # wrappers (another family's too), a subclass's __setattr__
        if frame is None or frame.f_code.co_name == "forward" or frame.f_locals.get("self") is not parent:
            return  # only a module's own statements (`self.NAME = ...`), outside forward
        external: frozenset = frozenset()
        if isinstance(value, torch.Tensor):
            if not value.is_leaf:
                return
        elif value:
            mods = _modules_in(value)
            if not mods:
                return  # sizes, names, tensors
            code = frame.f_code
            given = {id(frame.f_locals.get(a)) for a in code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]}
            external = frozenset(id(m) for m in mods if id(m) in given)  # a teacher kept out on purpose
        key = (id(parent), name)
        self._stores.pop(key, None)
        self._stores[key] = _Store(parent, name, frame, not isinstance(value, torch.Tensor) and not value, external)
        while len(self._stores) > 256:
            self._stores.pop(next(iter(self._stores)))

    def _settle(self, finishing: bool = False) -> None:
        if self._settling or not self._stores:
            return
        self._settling = True
        try:
            building = set() if finishing else self._under_construction()
            for key, st in list(self._stores.items()):
                parent = st.parent()
                if parent is None or id(parent) not in building:
                    del self._stores[key]
                    if parent is not None:
                        self._check_store(st, parent)
        finally:
            self._settling = False

    @staticmethod
    def _under_construction() -> set:
        out, frame = set(), sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            if code.co_name == "__init__" and code.co_argcount and code.co_varnames[0] == "self":
                obj = frame.f_locals.get("self")
                if isinstance(obj, nn.Module):
                    out.add(id(obj))
            frame = frame.f_back
        return out

    def _check_store(self, st: _Store, parent: nn.Module) -> None:
        value, cls = parent.__dict__.get(st.name), type(parent).__name__
        if isinstance(value, torch.Tensor):
            if not isinstance(value, nn.Parameter) and value.requires_grad and value.is_leaf:
                self.m._add("GL602", f"`self.{st.name}` of `{cls}` is a plain tensor with requires_grad=True "
                                     f"({_describe(value)}), not an nn.Parameter: it is not in `parameters()` nor in "
                                     f"`state_dict()`, so an optimizer built from `parameters()` never updates it",
                            st.path, st.line)
            return
        if type(value) not in _CONTAINERS:
            return
        registered = {id(m) for m in parent.modules()}
        loose = [m for m in _modules_in(value) if id(m) not in registered and id(m) not in st.external
                 and (isinstance(m, _MODE_SENSITIVE) or any(p.requires_grad for p in m.parameters()))]
        if not loose:
            return
        params = [p for m in loose for p in m.parameters()]
        kind = "dict" if isinstance(value, dict) else type(value).__name__
        names = ", ".join(sorted({type(m).__name__ for m in loose}))
        first = _describe(params[0]) if params else "no parameters"
        line = (self._append_line(st) if st.empty else None) or st.line
        self.m._add("GL602", f"`self.{st.name}` of `{cls}` is a plain {kind} of {len(loose)} module(s) ({names}) with "
                             f"{len(params)} parameter tensor(s) ({first}, ...) that `{cls}` does not register: they "
                             f"are not in `parameters()` nor in `state_dict()`, so the optimizer never updates them "
                             f"and `.to()`/`.eval()` skip them", st.path, line)

    @staticmethod
    def _append_line(st: _Store) -> Optional[int]:
        """The first ``self.NAME.append(...)`` (extend, insert, item assignment) of the class
        after the statement that stored the empty container."""
        tree = _tree(st.filename)
        if tree is None:
            return None
        classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.lineno <= st.line <= (n.end_lineno or 0)]
        lines = []
        for node in ast.walk(max(classes, key=lambda n: n.lineno) if classes else tree):
            if isinstance(node, ast.Call) and node.func and getattr(node.func, "attr", None) in _APPENDS:
                if _self_attr(node.func.value, st.name):  # type: ignore[attr-defined]
                    lines.append(node.lineno)
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and _self_attr(t.value, st.name)
                                                      for t in node.targets):
                lines.append(node.lineno)
        return min((ln for ln in lines if ln > st.line), default=None)

    # -- GL603 / GL604 -------------------------------------------------------------------------
    @staticmethod
    def _running() -> Optional[nn.Module]:
        """The module whose forward runs now (innermost)."""
        frame = sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            if code is _CALL_IMPL or (code.co_name == "forward" and _user(frame)):
                obj = frame.f_locals.get("self")
                if isinstance(obj, nn.Module):
                    return obj
            frame = frame.f_back
        return None

    def _on_param(self, module: nn.Module, name: str, param: Any) -> None:
        if not self.active or _is_compiling():
            return
        try:
            if self._created:
                self._settle_created()
            running = self._running()
            if running is not None:
                self._created_in_forward(module, name, param, running)
                return
            old = module._parameters.get(name)
            if old is not None and old is not param:
                self._replacing(module, name, old, param)
        except Exception:
            pass

    def _on_module(self, parent: nn.Module, name: str, sub: Any) -> None:
        if not self.active or _is_compiling():
            return
        try:
            old = parent._modules.get(name)
            if old is not None and sub is not None and old is not sub and self._running() is None:
                self._replacing(parent, name, old, sub)
        except Exception:
            pass

    def _created_in_forward(self, module: nn.Module, name: str, param: Any, running: nn.Module) -> None:
        frame = sys._getframe(1)
        while frame is not None and not _user(frame):
            frame = frame.f_back
        f = frame
        while f is not None:  # from the creating statement out to the forward that runs it
            if _user(f) and _lazy_guard(f):
                return
            if f.f_code.co_name == "forward" or (f.f_back is not None and f.f_back.f_code is _CALL_IMPL):
                break
            f = f.f_back
        if frame is None:
            return
        path, line = display_path(frame.f_code.co_filename), frame.f_lineno
        what = f"`self.{name} = nn.Parameter(...)`" if module is running else f"`{type(module).__name__}(...)`"
        message = (f"{what} is created while `{type(running).__name__}.forward()` runs ({_describe(param)}): a new, "
                   f"freshly initialised parameter on every call that no optimizer holds, so it never learns")
        if module is running:
            self.m._add("GL603", message, path, line)
        elif ("GL603", path, line) not in self.m._found:
            # a module made in forward: a temporary (`nn.Linear(...)(x)`) when it dies while the module
            # that ran it lives on; one kept (cached on the module by a decorator) is no finding
            cand = [False, path, line, message, weakref.ref(running)]
            cand.append(weakref.ref(module, lambda _, c=cand: c.__setitem__(0, c[4]() is not None)))
            self._created.append(cand)

    def _settle_created(self) -> None:
        for cand in list(self._created):
            if cand[0]:
                self.m._add("GL603", cand[3], cand[1], cand[2])
            if cand[0] or cand[5]() is None:
                self._created.remove(cand)

    def _replacing(self, parent: nn.Module, name: str, old: Any, new: Any) -> None:
        olds, news = _params(old), _params(new)
        if olds and news:
            what = "module" if isinstance(new, nn.Module) else "parameter"
            self._replaced.append(_Replaced(olds, news, f"{type(parent).__name__}.{name}", what))

    def _on_step(self, opt: Any, args: Any, kwargs: Any) -> None:
        if not self.active:
            return
        try:
            if self._created:
                self._settle_created()
            if self._stores:
                self._settle()
            if self._replaced:
                self._check_replaced(opt)
            self._stale_instance(opt)
        except Exception:
            pass

    def _check_replaced(self, opt: Any) -> None:
        ids = {id(p) for g in opt.param_groups for p in g["params"]}
        for rec in list(self._replaced):
            olds, news = rec.live(rec.old), rec.live(rec.new)
            if not olds or not news or any(id(p) in ids for p in news):
                self._replaced.remove(rec)  # the old ones are gone, or this optimizer trains the new ones
            elif not any(id(p) in ids for p in olds):
                continue  # another optimizer
            elif rec.suspect == id(opt):
                self._report_stale(rec)
                self._replaced.remove(rec)
            elif rec.suspect is None and any(p.grad is not None for p in news):
                rec.suspect = id(opt)
                rec.shape = _describe(next(p for p in news if p.grad is not None))
                rec.related = [(*where(), "optimizer.step() updates the old parameters here")]

    def _report_stale(self, rec: _Replaced) -> None:
        self.m._add("GL604", f"`{rec.label}` is replaced by a new {rec.what} after the optimizer was built: the "
                             f"optimizer still holds the old parameters, and the new ones ({rec.shape}) get gradients "
                             f"but are never updated; build the optimizer after the replacement, or add_param_group()",
                    rec.path, rec.line, related=rec.related)

    def _stale_instance(self, opt: Any) -> None:
        for g in opt.param_groups:  # the usual step: the first parameter has a gradient
            for p in g["params"]:
                if p.grad is not None:
                    return
        ps = [p for g in opt.param_groups for p in g["params"]]
        if not ps or self._scans.get(id(opt), 0) >= 3:
            return
        self._scans[id(opt)] = self._scans.get(id(opt), 0) + 1
        ids, shapes = {id(p) for p in ps}, sorted(tuple(p.shape) for p in ps)

        def match(v: Any) -> bool:
            if not isinstance(v, nn.Module):
                return False
            own = list(v.parameters())
            return (len(own) == len(ps) and any(p.grad is not None for p in own)
                    and not any(id(p) in ids for p in own) and sorted(tuple(p.shape) for p in own) == shapes)

        for frame, name, value in find_holders(list(user_frames()), match):
            line = binding_line(frame, name)
            if line is not None:
                grad = next(p for p in value.parameters() if p.grad is not None)
                self.m._add("GL604", f"`{name}` is bound to a new `{type(value).__name__}` after the optimizer was "
                                     f"built from the old one's parameters: the optimizer updates the old instance "
                                     f"(none of its {len(ps)} parameters has a gradient) while this one gets gradients "
                                     f"({_describe(grad)}) and is never updated; build the optimizer after it",
                            display_path(frame.f_code.co_filename), line,
                            related=[(*where(), "optimizer.step() updates the old instance here")])
                return

    # -- GL705 ---------------------------------------------------------------------------------
    def _non_full_hook(self, module: nn.Module, caller: Any, use: str = "grad_input") -> None:
        if not _user(caller) or use == "nothing":
            return  # (a hook that reads nothing and returns nothing: nothing it gives is wrong)
        path, line = display_path(caller.f_code.co_filename), caller.f_lineno
        handle: List[Any] = []

        def first_call(mod: nn.Module, inputs: Any, output: Any) -> None:
            if not torch.is_grad_enabled():
                return
            try:
                if handle:
                    handle.pop().remove()
                out = output[0] if isinstance(output, (tuple, list)) and output else output
                shape = _describe(out) if isinstance(out, torch.Tensor) else type(out).__name__
                self.m._add("GL705", f"`register_backward_hook` on `{type(mod).__name__}` (output {shape}) is the "
                                     f"deprecated non-full hook: {_HOOK_DETAIL[use]}; use "
                                     f"`register_full_backward_hook`", path, line,
                            related=[(*where(), "the module is called here")])
            except Exception:
                pass

        handle.append(module.register_forward_hook(first_call))
        self._handles.append(handle[0])


_HOOK_DETAIL = {
    "grad_input": ("its grad_input holds the gradients of the inputs of the module's last autograd op, not of the "
                   "module's inputs"),
    "grad_output": ("this hook reads only grad_output, which is right, but torch warns (FutureWarning) for a "
                    "forward of more than one op and will remove the non-full hook"),
    "effects": ("this hook reads neither grad_input nor grad_output, but torch warns (FutureWarning) for a "
                "forward of more than one op and will remove the non-full hook"),
}


def _hook_use(hook: Any) -> str:
    """What a hook ``(module, grad_input, grad_output)`` does with its arguments, read from its
    code (as the static rule reads its source): 'grad_input' when it reads grad_input, returns a
    value (which replaces it) or cannot be read; 'grad_output' when it reads only grad_output;
    'effects' when it reads neither; 'nothing' when it also does nothing but return None."""
    import dis

    fn = getattr(hook, "__func__", hook)
    code = getattr(fn, "__code__", None)
    if code is None:
        return "grad_input"  # a partial, a callable object: not read
    names = list(code.co_varnames[:code.co_argcount])
    if getattr(hook, "__self__", None) is not None:
        names = names[1:]
    star = bool(code.co_flags & 0x04)
    star_name = code.co_varnames[code.co_argcount + code.co_kwonlyargcount] if star else None
    if len(names) < 3 and not star:
        return "grad_input"
    grad_in = names[1] if len(names) > 1 else None
    grad_out = names[2] if len(names) > 2 else None
    loaded: set = set()
    lambda_ = code.co_name == "<lambda>"
    returns = False
    work = False
    prev = None
    for ins in dis.get_instructions(code):
        op = ins.opname
        if op.startswith(("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE")):
            loaded.update(ins.argval if isinstance(ins.argval, tuple) else (ins.argval,))
        if op == "RETURN_VALUE" and not (prev is not None and prev.opname == "LOAD_CONST" and prev.argval is None) \
                and not (lambda_ and prev is not None and prev.opname.startswith("CALL")):
            returns = True  # (a lambda that calls `seen.append(...)` returns what the call gives: None)
        elif op == "RETURN_CONST" and ins.argval is not None:
            returns = True
        if op not in ("RESUME", "NOP", "LOAD_CONST", "RETURN_VALUE", "RETURN_CONST", "CACHE", "COPY_FREE_VARS",
                      "MAKE_CELL"):
            work = True
        prev = ins
    loaded |= set(code.co_cellvars)  # read by a nested function
    if (star_name is not None and star_name in loaded) or returns or (grad_in is not None and grad_in in loaded):
        return "grad_input"
    if grad_out is not None and grad_out in loaded:
        return "grad_output"
    return "effects" if work else "nothing"


WATCHERS = [Modules]
