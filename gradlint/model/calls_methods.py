"""Calls of methods: of tensors (in-place ops, ``backward``, ``detach``, ``.grad`` writes, ...),
modules (``parameters()``, ``train()``/``eval()``, ``state_dict()``, hooks), optimizers
(``step``, ``zero_grad``) and the instances of the file's and the project's classes."""

from __future__ import annotations

from typing import List

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import dotted, grad_attribute, string_value
from gradlint.model.freezing import freeze_whole, unfreeze_parts, unfrozen
from gradlint.model.modes import set_mode
from gradlint.model.multiviews import MULTI_VIEW_OPS
from gradlint.model.customviews import HOOK_WRAPPING
from gradlint.model.syntax import const_bool, conversion_copies, dtype_conversion, kwarg, positional
from gradlint.model.calls_torch import backward_inputs
from gradlint.model.values import (
    CLASS, INSTANCE, MODULE, NAMED_PARAMS, NDARRAY, PARAMS, SCALAR, TENSOR, TUPLE, UNKNOWN, UNKNOWN_VALUE,
    Value, plain_tensor, union,
)


class MethodCallMixin:
    """The model's calls of methods (a mixin of ``Model``, through ``CallMixin``)."""

    def _call_method(self, receiver: Value, attr: str, node: cst.Call, args: List[Value]) -> Value:
        kind = receiver.kind
        if attr in ("parameters", "named_parameters"):
            key = dotted(node.func.value)  # type: ignore[attr-defined]
            # (an object the model did not know, made not to require grad: a module, frozen)
            frozen = (key is not None and self.frozen(key)) or (kind in (MODULE, UNKNOWN) and receiver.params is False)
            return Value(PARAMS if attr == "parameters" else NAMED_PARAMS, node=key, params=False if frozen else None,
                         alias_of=receiver, made="generator")  # (the parameters of that module)
        if attr in ("backward", "manual_backward"):
            key = dotted(node.func.value)  # type: ignore[attr-defined]
            if (kind == UNKNOWN or attr == "manual_backward") and args and node.args[0].keyword is None:
                # accelerator.backward(loss); self.manual_backward(loss) (a LightningModule's,
                # which calls loss.backward() itself)
                receiver = args[0]
                key = dotted(node.args[0].value)
            elif attr == "manual_backward":
                return UNKNOWN_VALUE
            self.backward_on(node, receiver, key, retain=self.retains(node), inputs=backward_inputs(node, args, None))
            return UNKNOWN_VALUE
        if attr in ("step", "zero_grad"):
            self._train_call(receiver, attr, node)
        elif attr in ("update", "unscale_") and kind == UNKNOWN:
            self.scaler_call(attr, node)  # GradScaler.update(), GradScaler.unscale_(optimizer)
        if attr == "apply" and kind == CLASS:
            out = self.function_applied(receiver, args)  # a custom Function returning a view (customviews.py)
            if out is not None:
                return out
        if attr in HOOK_WRAPPING:
            self._escape(args)
            return self.backward_hooked(receiver, node)  # (customviews.py)
        if attr == "remove" and receiver.id in self.hook_handles:
            self.hook_removed(receiver)
            return UNKNOWN_VALUE
        if attr == "mark_dirty":
            self.dirty.update(a.id for a in args)
            return UNKNOWN_VALUE
        if attr == "state_dict":
            return Value(UNKNOWN)  # a value of its own, so that reads of it can be followed
        if attr == "register_buffer" and kind in (MODULE, INSTANCE) and len(args) >= 2 and args[1].kind == TENSOR:
            # `self.register_buffer("mean", torch.zeros(3))`: the buffer is the attribute `self.mean`
            key, name = dotted(node.func.value), node.args[0].value  # type: ignore[attr-defined]
            if key is not None and type(name) is cst.SimpleString and node.args[1].keyword is None:
                self.bind_key(f"{key}.{string_value(name)}", args[1])
                if key == "self" and self.class_stack:
                    self.buffer_names.add((self.class_stack[-1].name.value, string_value(name)))
            return UNKNOWN_VALUE
        if kind == MODULE:
            if attr == "requires_grad_":
                flag = const_bool(positional(node)[0]) if positional(node) else True
                key = dotted(node.func.value)  # type: ignore[attr-defined]
                if flag is not True:
                    # frozen: calling it is differentiable in its inputs only; its weights are no
                    # trainable leaves (`nn.Conv2d(...).requires_grad_(False)` too)
                    frozen = Value(MODULE, params=False if flag is False else None, node=receiver.node)
                    if key is not None:
                        self.freeze(key)
                        freeze_whole(self, key, frozen)
                    return frozen
                unfreeze_parts(self, key)  # (its parts frozen before: freezing.py)
                if receiver.params is False and key is not None:
                    free = unfrozen(receiver)  # its parameters require grad again (freezing.py)
                    self.env[key] = free  # (the same object: what is bound on it stays)
                    return free
                return receiver
            if attr in ("train", "eval"):
                set_mode(self, dotted(node.func.value), attr, node, receiver)  # type: ignore[attr-defined]
            if attr in ("to", "cuda", "cpu", "train", "eval", "float", "double", "half", "bfloat16", "type"):
                if (self.inference and receiver.made is None and receiver.made_node is not None
                        and conversion_copies(attr, node)):
                    # a module made in this file (float32, CPU) converted under inference_mode:
                    # its new parameters are inference tensors (Module.to works in place)
                    new = Value(MODULE, params=receiver.params, act=receiver.act, inplace=receiver.inplace,
                                node=receiver.node, made="inference", made_node=node)
                    key = dotted(node.func.value)  # type: ignore[attr-defined]
                    if key is not None:
                        self.bind_key(key, new)
                    return new
                return receiver
            if attr == "forward":
                return self._call_module(receiver, args, node)
            if receiver.items or receiver.keys is not None or receiver.made in ("layers", "comp"):
                out = self.container_method(receiver, attr, node, args)  # `self.layers.append(m)`
                if out is not None:
                    return out
            sub = self.module_attribute(receiver, attr, dotted(node.func))
            if sub is not None and sub.kind == MODULE:  # model.encoder(x): a submodule's call
                return self._call_module(sub, args, node)
            self._escape(args)  # a method the model does not follow: its arguments escape
            return UNKNOWN_VALUE
        if kind == INSTANCE:
            self._escape(args)
            return UNKNOWN_VALUE
        if attr == "requires_grad_":
            pos = positional(node)
            kw = kwarg(node, "requires_grad")
            flag_node = kw.value if kw is not None else (pos[0] if pos else None)
            flag = True if flag_node is None else const_bool(flag_node)
            if kind == UNKNOWN and flag is False:
                # a tensor or a module (`copy.deepcopy(model).requires_grad_(False)`): whichever it
                # is, nothing in it requires grad now (bound to a name, the name is frozen)
                new = Value(UNKNOWN, params=False)
            else:
                new = self._requires_grad(receiver, flag, node)
            if new is None:
                return UNKNOWN_VALUE
            self.same_tensor(receiver, new)
            key = dotted(node.func.value)  # type: ignore[attr-defined]
            if key is not None:
                self.bind_key(key, new)
            return new
        if attr == "detach" or attr == "detach_":
            if kind == TENSOR:
                src = receiver if receiver.rg else receiver.src
                if attr == "detach":
                    out = plain_tensor(cuts=receiver.cuts, src=src, alias_of=receiver, alias_kind="detach")
                else:  # in place: the same tensor, still what it aliased (`p.grad.detach_()` is p's .grad)
                    out = plain_tensor(cuts=receiver.cuts, src=src, alias_of=receiver.alias_of,
                                       alias_kind=receiver.alias_kind)
                if src is not None:
                    out.made, out.made_node = "computed", self.current_statement  # where the graph is cut
                if attr == "detach_":
                    self._freezes(receiver)  # `for p in self.ema.parameters(): p.detach_()`
                key = dotted(node.func.value) if attr == "detach_" else None  # type: ignore[attr-defined]
                if key is not None:
                    self.bind_key(key, out)
                return out
            if kind == UNKNOWN:
                return Value(TENSOR, rg=False, leaf=True)
            return UNKNOWN_VALUE
        if attr == "numpy":
            if kind == TENSOR:
                base = receiver.alias_of if receiver.alias_kind in ("data", "detach") else receiver
                return Value(NDARRAY, src=receiver if receiver.rg else receiver.src, cuts=receiver.cuts,
                             alias_of=base, alias_kind="numpy")
            return Value(NDARRAY)
        if attr in ("item", "tolist"):
            if kind == TENSOR:
                return Value(SCALAR, src=receiver if receiver.rg else receiver.src, cuts=receiver.cuts)
            if kind == NDARRAY:  # (numbers out of NumPy: a tensor made of them is a NumPy round trip)
                return Value(SCALAR, src=receiver.src, cuts=receiver.cuts, made="numpy")
            return Value(SCALAR)
        if kind == TUPLE:
            out = self.container_method(receiver, attr, node, args)  # containers.py
            if out is not None:
                return out
        if kind == NDARRAY:
            return Value(NDARRAY, src=receiver.src, cuts=union([receiver.cuts] + [a.cuts for a in args]))
        if kind != TENSOR:
            if attr == "zero_" and kind == UNKNOWN and grad_attribute(node.func.value):  # type: ignore[attr-defined]
                # `param.grad.zero_()` of a parameter the model does not know (a helper's
                # `for param in params`): it clears gradients, as `param.grad = None` does
                self.log("zero_grad_keep", dotted(node.func.value), node)  # type: ignore[attr-defined]
            return UNKNOWN_VALUE
        if attr.endswith("_") and not attr.startswith("_") and attr not in api.NOT_INPLACE:
            if not (attr == "copy_" and node.args and dotted(node.args[0].value) == dotted(node.func.value)):  # type: ignore[attr-defined]
                self.inplace(node, receiver, f"`.{attr}()`")  # (x.copy_(x) changes nothing)
            if attr == "zero_" and (receiver.alias_kind == "grad" or (
                    receiver.alias_kind == "data" and receiver.alias_of is not None
                    and receiver.alias_of.alias_kind == "grad")):
                self.log("zero_grad_keep", dotted(node.func.value), node)  # type: ignore[attr-defined]
            elif receiver.kind == TENSOR and node.args:
                self.manual_update(node.func.value, node, node)  # type: ignore[attr-defined]  # `w.data.sub_(lr * w.grad)`
            new = self._inplace_effect(node.func.value, args)  # type: ignore[attr-defined]
            return new if new is not None else receiver
        if attr == "clone":
            if receiver.rg is False:
                return plain_tensor(cuts=receiver.cuts, src=receiver.src)
            return self._derived(receiver, [], node)
        if attr in api.CONVERSION_METHODS:
            target = dtype_conversion(attr, node)
            if target is not None and receiver.dtype == target:
                return receiver  # `.float()` of a float32 tensor returns the tensor itself
            v = self._derived(receiver, [], node)
            if (receiver.fresh and receiver.leaf_requiring_grad and self.grad_enabled is True
                    and self._conversion_site(node.func.value)):  # type: ignore[attr-defined]
                certain = conversion_copies(attr, node, receiver.dtype)
                if certain is not None:
                    return Value(TENSOR, rg=True, leaf=False if certain else None, deps=v.deps, mdeps=v.mdeps,
                                 cuts=v.cuts, made="conv", made_node=node, certain=certain, dtype=target)
            if receiver.rg is True and receiver.leaf is True and self.grad_enabled is True:
                # may return self (same device/dtype): leaf-ness unknown
                return Value(TENSOR, rg=True, leaf=None, deps=v.deps, mdeps=v.mdeps, cuts=v.cuts)
            if receiver.rg is False:
                out = plain_tensor(cuts=receiver.cuts, src=receiver.src)
                out.made, out.made_node = receiver.made, receiver.made_node  # .float() of a computed value
                return out
            return v
        if attr in MULTI_VIEW_OPS:
            return self.multi_output_views(receiver, attr, args, node)  # type: ignore[attr-defined]
        if attr in api.VIEW_METHODS:
            out = self._derived(receiver, args, node, view=True)
            if (receiver.fresh and receiver.leaf_requiring_grad and out.rg is True
                    and self._conversion_site(node.func.value)):  # type: ignore[attr-defined]
                out.made, out.made_node = "conv", node
            return out
        if attr in api.DIFF_METHODS:
            taint = attr in api.TENSOR_OPERANDS and any(
                v.kind == UNKNOWN for a, v in zip(node.args, args) if a.keyword is None)
            return self._derived(receiver, args, node, op=attr, taint=taint)
        if attr in ("max", "min", "median") and not node.args:
            return self._derived(receiver, [], node)
        if attr in api.NONDIFF_METHODS:
            out = plain_tensor()
            if receiver.rg is True and self.grad_enabled is True:
                out.made, out.made_node = "computed", self.current_statement  # `logits.argmax(1)`: no graph
            return out
        if attr == "retain_grad":
            self.retained.add(receiver.id)
        self._escape([receiver])  # retain_grad(), register_hook(), ...
        return UNKNOWN_VALUE
