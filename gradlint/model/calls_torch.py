"""Calls of torch's own functions: factories, functional ops, ``backward``/``autograd.grad``,
optimizers, torch.nn layers and their constructions, gradient clipping (a training event)."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from gradlint.model import containers, torchapi as api
from gradlint.model.names import dotted
from gradlint.model.modes import dropout_in_eval
from gradlint.model.multiviews import MULTI_VIEW_OPS
from gradlint.model.syntax import const_bool, kwarg, kwvalue, positional
from gradlint.model.values import (
    CONST, INSTANCE, MODULE, NDARRAY, OPTIMIZER, SCALAR, TENSOR, TUPLE, UNKNOWN, UNKNOWN_VALUE, Cut,
    Value, flatten, leaf_rg, plain_tensor, src_of, union,
)


# objects made of keyword arguments, each an attribute
_NAMESPACES = frozenset({"types.SimpleNamespace"})


class TorchCallMixin:
    """The model's calls of torch's functions (a mixin of ``Model``, through ``CallMixin``)."""

    def _call_qualified(self, q: str, node: cst.Call, args: List[Value]) -> Value:
        if q in api.CLIP_GRAD:
            # gradient clipping: a training event (it must sit between backward() and step())
            self.log("clip", dotted(node.args[0].value) if node.args else None, node)
            self._escape(args)
            return UNKNOWN_VALUE
        if q.startswith("torch.") and q.endswith("GradScaler"):
            # an AMP GradScaler: an object of its own (its step()/update() calls are paired by
            # identity, and a scaler made in a loop is a new one each iteration)
            self._escape(args)
            return Value(UNKNOWN, made="grad_scaler", made_node=node)
        if q in api.GRAD_OFF or q in api.GRAD_ON or q in api.SET_GRAD:
            # a grad-mode context object (`off = torch.no_grad()`; `with off:` later): certainly
            # no tensor, and it keeps its call, so that a `with` of the name switches the mode
            return Value(CONST, node=node)
        if q in api.FACTORIES or q in api.REBUILDERS:
            v = self._factory(q, node, args)
            if v.kind == TENSOR and v.dtype is None:
                v.dtype = self._factory_dtype(q, node, args)
            return v
        if q in api.LEGACY_CONSTRUCTORS:
            return self._legacy_constructor(q, node, args)
        if q in api.VARIABLE:
            return self._variable(node, args)
        if q in api.PARAMETER:
            rg = kwarg(node, "requires_grad")
            pos = positional(node)
            flag_node = rg.value if rg is not None else (pos[1] if len(pos) > 1 else None)
            flag = True if flag_node is None else const_bool(flag_node)
            if flag is None and flag_node is not None:
                # `requires_grad=requires_grad`, a parameter this walk of `__init__` was given a literal
                literal = self.parameter_literal(flag_node)  # type: ignore[attr-defined]
                flag = True if literal == "True" else False if literal == "False" else None
            self._emit("param_made", (node, "nn.Parameter(...)"))
            data = args[0] if args else UNKNOWN_VALUE
            cuts = data.cuts
            if flag is True and data.kind == TENSOR and data.rg is True and data.leaf is False:
                cuts = cuts | {Cut(node, "parameter", data, self.current_statement)}
            if flag is True:
                out = leaf_rg(cuts=cuts, is_param=True)
                out.dtype = data.dtype if data.kind == TENSOR else None
                return out
            if flag is False:
                out = plain_tensor(cuts=cuts)
                out.dtype = data.dtype if data.kind == TENSOR else None  # an integer mask kept as a Parameter
                return out
            return Value(TENSOR, rg=None, leaf=True, cuts=cuts)
        if q in api.BACKWARD_FUNCS:
            if args:
                self.backward_on(node, args[0], dotted(node.args[0].value), retain=self.retains(node),
                                 inputs=backward_inputs(node, args, 1 if q == "torch.autograd.grad" else None))
            self._escape(args[1:])  # autograd.grad(loss, inputs): gradients of these are wanted
            return UNKNOWN_VALUE
        if q is not None and q.startswith("torch.") and q[6:] in MULTI_VIEW_OPS and args and args[0].kind == TENSOR:
            return self.multi_output_views(args[0], q[6:], args[1:], node)  # type: ignore[attr-defined]
        if q in api.DIFF_FUNCS:
            tensors = [a for a in args if a.kind in (TENSOR, TUPLE)]
            if tensors:
                if q in api.INPLACE_KW_FUNCS and const_bool(kwvalue(node, "inplace")) is True \
                        and not _writes_nothing(q, node) \
                        and not dropout_in_eval(self, q, node):
                    self.inplace(node, tensors[0], f"`{q.rsplit('.', 1)[-1]}(..., inplace=True)`")
                last = q.rsplit(".", 1)[-1]
                pos = [v for a, v in zip(node.args, args) if a.keyword is None]
                taint = last in api.TENSOR_OPERANDS and any(v.kind == UNKNOWN for v in pos)
                return self._derived(tensors[0], tensors[1:] + [a for a in args if a.kind not in (TENSOR, TUPLE)],
                                     node, op=last, taint=taint)
            return UNKNOWN_VALUE
        if q in api.NONDIFF_FUNCS:
            if not any(a.kind == TENSOR for a in args):
                return UNKNOWN_VALUE
            out = plain_tensor()
            if any(a.kind == TENSOR and a.rg is True for a in args) and self.grad_enabled is True:
                out.made, out.made_node = "computed", self.current_statement  # argmax of a graph value
            return out
        if q in api.PARAMLESS_MODULES:
            return paramless_module(q, node)
        if q in ("torch.nn.utils.weight_norm", "torch.nn.utils.weight_norm.weight_norm") and args \
                and args[0].kind == MODULE:
            # the legacy hook-based weight norm: it stores the recomposed `weight`, computed from
            # weight_g and weight_v in grad mode, on the module (a non-leaf until a forward under
            # no_grad recomputes it); the parametrizations one keeps no such tensor
            m = args[0]
            wrapped = Value(MODULE, params=m.params, act=m.act, inplace=m.inplace, node=m.node, items=m.items,
                            keys=m.keys, made="weight_norm" if self.grad_enabled is True else m.made,
                            made_node=(node, self.here()) if self.grad_enabled is True
                            else m.made_node)
            key = dotted(node.args[0].value)
            if key is not None and key in self.env:
                self.bind_key(key, wrapped)  # (the module itself is changed)
            return wrapped
        if q in api.PARAM_MODULES:
            self._emit("param_made", (node, q.replace("torch.nn.", "nn.") + "(...)"))
            return Value(MODULE, params=True, made="inference" if self.inference else None, made_node=node, node=q)
        layers = containers.module_layers(q, node, args)
        if layers is not None:
            return layers  # nn.Sequential(*layers), nn.ModuleList([...]), nn.ModuleDict({...})
        if q in api.CONTAINER_MODULES:
            has = [a.params for a in args if a.kind == MODULE]
            if all(a.keyword is None and not a.star for a in node.args):
                self.sequence_layers(args)  # (customviews.py)
            prev = None
            for arg, v in zip(node.args, args):
                if v.kind == MODULE and v.inplace and prev is not None and prev.act in api.SAVES_OUTPUT:
                    self._emit("sequential_inplace", (arg, prev, v))
                prev = v if v.kind == MODULE else None
            # its output is its last module's: `Sequential(Linear, Sigmoid)` returns a saved output
            last = prev.act if prev is not None and prev.params is False and not prev.inplace else None
            # its layers by position (`model[0]`), when each argument is a module given in place
            parts = tuple(args) if all(a.keyword is None and not a.star for a in node.args) and all(
                v.kind == MODULE for v in args) else ()
            return Value(MODULE, params=True if any(has) else None, act=last, items=parts)
        if q in api.MODULE_CONTAINERS and not node.args:
            return containers.empty_modules(q)  # layers appended or stored later
        if q in api.MODULE_CONTAINERS:
            # `nn.ModuleList()`, `nn.ModuleDict(heads)`: a module whose layers are not known here
            return Value(MODULE, params=None)
        if q in api.NUMPY_FROM_TENSOR:
            a = args[0] if args else UNKNOWN_VALUE
            if a.kind == TENSOR:
                return Value(NDARRAY, src=a if a.rg else a.src, cuts=a.cuts)
            if a.kind in (NDARRAY, TUPLE, SCALAR):
                return Value(NDARRAY, src=src_of(a), cuts=a.cuts)
            return Value(NDARRAY)
        if q.startswith("numpy."):
            srcs = [src_of(a) for a in args if a.kind in (NDARRAY, SCALAR, TUPLE, TENSOR)]
            if srcs:
                return Value(NDARRAY, src=next((s for s in srcs if s is not None), None),
                             cuts=union(a.cuts for a in args))
            return UNKNOWN_VALUE
        if q in _NAMESPACES and node.args and all(a.keyword is not None and not a.star for a in node.args):
            # `SimpleNamespace(lr=0.1, mask=m)`: an object whose attributes are its keywords
            return Value(INSTANCE, node=q, keys=tuple(a.keyword.value for a in node.args), items=tuple(args))
        if q == "copy.deepcopy" and args:
            self._emit("deepcopy", (node, args[0], dotted(node.args[0].value)))
            a = args[0]
            if a.kind == MODULE:
                # a copy of a module (an EMA or teacher model): a module of the same class, with
                # parameters of its own (trainable as the original's were, until the code freezes them)
                return Value(MODULE, params=a.params, act=a.act, inplace=a.inplace, node=a.node)
            return UNKNOWN_VALUE
        if q.startswith("torch.optim.") and q.rsplit(".", 1)[-1][:1].isupper() and "lr_scheduler" not in q:
            params = args[0] if args else UNKNOWN_VALUE
            self._emit("optimizer", (node, flatten(params)))
            self._escape(args)
            owner = None
            first = node.args[0].value if node.args else None
            if type(first) is cst.Call and type(first.func) is cst.Attribute \
                    and first.func.attr.value in ("parameters", "named_parameters"):
                owner = dotted(first.func.value)
            return Value(OPTIMIZER, node=owner, items=tuple(flatten(params)), made_node=node)
        self._escape(args)
        return UNKNOWN_VALUE



def backward_inputs(node: cst.Call, args: List[Value], position: Optional[int]) -> Optional[Value]:
    """The value of a backward call's ``inputs`` (``autograd.grad(loss, inputs)``: its second
    positional argument; ``backward(inputs=...)``), or None."""
    n = 0
    for a, v in zip(node.args, args):
        if a.keyword is not None:
            if a.keyword.value == "inputs":
                return v
        elif not a.star:
            if n == position:
                return v
            n += 1
        else:
            return None  # `*args`: positions unknown
    return None


def paramless_module(q: str, node: cst.Call) -> Value:
    """``nn.ReLU(inplace=True)``, ``nn.Sigmoid()``: a module without parameters (its op, if any)."""
    inplace = const_bool(kwvalue(node, "inplace")) is True and not _writes_nothing(q, node)
    return Value(MODULE, params=False, act=api.MODULE_ACTS.get(q), inplace=inplace, node=q.rsplit(".", 1)[-1])


def _literal_arg(node: cst.Call, index: int, name: str) -> Any:
    """The literal value (a number or True/False/None) of a call's argument, by position or
    keyword; None when absent or not a literal."""
    arg = kwvalue(node, name)
    if arg is None:
        pos = [a.value for a in node.args if a.keyword is None and a.star == ""]
        arg = pos[index] if index < len(pos) and len(pos) == len([a for a in node.args if a.keyword is None]) else None
    if isinstance(arg, (cst.Integer, cst.Float)):
        return arg.evaluated_value
    if isinstance(arg, cst.Name) and arg.value in ("True", "False"):
        return arg.value == "True"
    return None


def _writes_nothing(q: str, node: cst.Call) -> bool:
    """An in-place dropout that leaves its input as it is (torch returns the input untouched when
    p is 0 or, for the functional form, when training=False): no in-place write."""
    last = q.rsplit(".", 1)[-1]
    if last in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"):
        return _literal_arg(node, 0, "p") == 0
    if last in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout"):
        return _literal_arg(node, 1, "p") == 0 or _literal_arg(node, 2, "training") is False
    return False
