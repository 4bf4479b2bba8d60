"""Views made inside a custom Function: torch forbids writing them in place.

A custom ``autograd.Function`` whose output is a view (of an input, of a tensor made in its
``forward``, or an input returned as it is) marks it: an in-place write to it (or to a view of
it), with grad mode on and the output requiring grad, raises at once: "Output 0 of <Function> is
a view and is being modified inplace. This view was created inside a custom Function (or because
an input was returned as-is) ..." (torch 2.13, measured; not under ``no_grad``, not when no input
requires grad, not for a ``.detach()``, ``.clone()`` or an out-of-place result, nor for an output
that ``forward`` computed out of place).

- **A Function of the project** whose ``forward`` returns, on every ``return``, a certain view
  (``x.view(...)``, ``x[...]``, ``x.t()``, ...: torchapi.VIEW_METHODS and basic indexing) or one of
  its inputs, neither marked dirty nor non-differentiable: ``Fn.apply(...)`` given a tensor that
  requires grad, with grad mode on, returns such a view (the model evaluates ``apply`` only for
  these Functions). ``reshape``/``contiguous``/``flatten`` (a view or a copy, depending on the
  input) and ``F.linear`` (a view only for a contiguous 3-d input with a bias) are not claimed.
- **A module's full backward hook**: ``m.register_full_backward_hook(h)`` (or
  ``register_full_backward_pre_hook``) makes every later call of ``m``, with grad mode on and an
  output that requires grad, pass the outputs through the hook's identity Function
  (``BackwardHookFunction``) ("Output 0 of BackwardHookFunction is a view and is being modified
  inplace"; measured: also when the module is frozen but its input requires grad; not after the
  handle's ``remove()``, not for the legacy ``register_backward_hook``, a forward hook, or a hook
  on a parent module). The model keeps which module values carry such a hook (by value id, from
  the registration until the handle it returned is removed) and marks the tensors a later call of
  one returns (certainly, or probably: a layer's output, whose parameters may be frozen where the
  model does not see it; GL105 then warns). A hooked layer of an ``nn.Sequential`` whose next
  layer is an in-place activation has its output written in place by that layer whenever the
  Sequential runs: GL105 hears of it at the registration (``hooked_before_inplace``), the line to
  change.

GL105 asks ``custom_view_of``: what made the value, or None."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.names import dotted, subtree
from gradlint.model.lattice import deps_of
from gradlint.model.values import MODULE, TENSOR, TUPLE, UNKNOWN, Value, union

# the registrations whose hook wraps the module's inputs and outputs in BackwardHookFunction
HOOK_WRAPPING = frozenset({"register_full_backward_hook", "register_full_backward_pre_hook"})


class CustomViewMixin:
    # id of a module value with a full backward hook -> the registration call
    hooked: Dict[int, Any]
    # id of a registration's handle -> id of the hooked module
    hook_handles: Dict[int, int]
    # id of a view made inside a custom Function (a hooked module's output, a Function's view
    # output, or a view of one) -> what made it (for GL105's message)
    custom_views: Dict[int, str]
    # id of the ClassDef of a custom Function whose forward returns a view -> its name
    view_functions: Dict[int, str]
    # id of a layer given to nn.Sequential(...) -> the layer given after it
    next_layer: Dict[int, Value]
    # id of a parsed module -> (the module, whether its code touches layers' `inplace` flags)
    inplace_scans: Dict[int, Tuple[Any, bool]]

    def backward_hooked(self, module: Value, node: Any) -> Value:
        """``module.register_full_backward_hook(h)``: later calls of ``module`` wrap its outputs.
        Returns the handle (a value of its own, so that its ``remove()`` can be followed)."""
        handle = Value(UNKNOWN)
        if module.kind != MODULE:
            return handle
        self.hooked[module.id] = node
        self.hook_handles[handle.id] = module.id
        nxt = self.next_layer.get(module.id)
        if nxt is not None and nxt.inplace and nxt.params is False and nxt.node in INPLACE_ACTIVATIONS \
                and not self._resets_inplace(self.current_module()) \
                and not self._resets_inplace(self.root_module):  # type: ignore[attr-defined]
            key = dotted(node.func.value)
            frozen = key is not None and self.frozen(key)  # type: ignore[attr-defined]
            trainable = module.params is True and not frozen
            self._emit("hooked_before_inplace", (node, module, nxt, trainable))  # type: ignore[attr-defined]
        return handle

    def _resets_inplace(self, module: Any) -> bool:
        """Does the module's code set ``.inplace`` on some layer, or through ``setattr`` (Grad-CAM
        code turns the in-place activations off before hooking: ``m.inplace = False`` over
        ``model.modules()``)? Then the layers' flags are not what their construction said."""
        if module is None:
            return True
        got = self.inplace_scans.get(id(module))
        if got is None or got[0] is not module:
            found = False
            for n in subtree(module):
                t = type(n)
                if t is cst.Attribute and n.attr.value == "inplace":
                    found = True  # (any write or read of the flag: the code handles it)
                elif t is cst.SimpleString and n.value.strip("\"'") == "inplace":
                    found = True  # setattr(m, "inplace", False)
                if found:
                    break
            got = self.inplace_scans[id(module)] = (module, found)
        return got[1]

    def hook_removed(self, handle: Value) -> None:
        """``handle.remove()``: the module's later calls are plain again."""
        module_id = self.hook_handles.pop(handle.id, None)
        if module_id is not None:
            self.hooked.pop(module_id, None)

    def hooked_output(self, module: Value, out: Value, start: int) -> Value:
        """What a call of ``module`` returned (``out``, made from value id ``start`` on): its
        tensors that require grad are views made by the hook's Function, when grad mode is on."""
        at = self.hooked.get(module.id)
        if at is None or self.grad_enabled is not True:  # type: ignore[attr-defined]
            return out
        for v in (out.items if out.kind == TUPLE else (out,)):
            # (a value made before the call, one of its inputs returned as it is: another name may
            # hold it, and the wrapped tensor is a new one: not marked)
            if v.kind == TENSOR and v.rg is True and v.id >= start:
                self.custom_views[v.id] = HOOKED
        return out

    def custom_view_of(self, value: Value) -> Optional[str]:
        """What made ``value``, when it is a view made inside a custom Function (or a view of
        one): ``HOOKED`` or the Function's name; else None."""
        if value.kind != TENSOR:
            return None
        return self.custom_views.get(value.id)

    def custom_view_part(self, base: Value, out: Value) -> None:
        """``out`` is a view of ``base``: a view of such a view is one too."""
        made = self.custom_views.get(base.id)
        if made is not None:
            self.custom_views[out.id] = made

    def function_returns(self, cls: cst.ClassDef, forward: cst.FunctionDef, returned: List[Value]) -> None:
        """The ``forward`` of custom Function ``cls`` was walked: does it return a view made inside
        it on every ``return`` (see the module docstring)?"""
        if not returned or _marks_non_differentiable(forward):
            return
        for v in returned:
            if v.kind != TENSOR or v.id in self.dirty:  # type: ignore[attr-defined]
                return
            if v.id not in self.fn_inputs and v.id not in self.view_base:  # type: ignore[attr-defined]
                return
        self.view_functions[id(cls)] = cls.name.value

    def function_applied(self, cls: Value, args: List[Value]) -> Optional[Value]:
        """``Fn.apply(...)`` of a Function whose forward returns a view: with grad mode on and an
        input that requires grad, its output is a non-leaf that requires grad, made a view inside
        the Function. None for any other Function or call (the model leaves it unknown)."""
        name = self.view_functions.get(id(cls.node))
        if name is None or self.grad_enabled is not True:  # type: ignore[attr-defined]
            return None
        inputs = [a for a in args if a.kind == TENSOR and a.rg is True]
        if not inputs:
            return None
        out = Value(TENSOR, rg=True, leaf=False, probable=all(a.probable for a in inputs),
                    cuts=union(a.cuts for a in args), **deps_of(inputs))
        self.custom_views[out.id] = name
        return out

    def sequence_layers(self, layers: List[Value]) -> None:
        """``nn.Sequential(a, b, c)``: each layer's output is the next layer's input."""
        for a, b in zip(layers, layers[1:]):
            if a.kind == MODULE and b.kind == MODULE:
                self.next_layer[a.id] = b


# what made a hooked module's output (custom_views)
HOOKED = "a full backward hook"


def _marks_non_differentiable(fn: cst.FunctionDef) -> bool:
    """Does ``fn`` call ``ctx.mark_non_differentiable(...)`` (its outputs may not require grad)?"""
    return any(type(n) is cst.Attribute and n.attr.value == "mark_non_differentiable" for n in subtree(fn))


# the torch.nn activations that write their input when constructed with inplace=True, whatever
# the mode (in-place dropouts write nothing in eval mode, which the model does not follow)
INPLACE_ACTIVATIONS = frozenset({
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "CELU", "SELU", "Hardtanh", "SiLU", "Mish", "Hardswish", "Hardsigmoid",
    "Threshold", "RReLU",
})
