"""Calling a module: a torch.nn layer (what it saves, whether its output carries a graph, frozen
or inference-made modules), a module of the file or the project (its ``forward`` walked with the
caller's arguments, what that ``forward`` stores on ``self``), the outputs of hooked modules."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.freezing import owner_frozen, with_params
from gradlint.model.loops import carried_attributes
from gradlint.model.selfbinds import binds_own_attributes, own_submodule_calls
from gradlint.model.modes import DROPOUT_MODULES, in_eval
from gradlint.model.names import dotted
from gradlint.model.layersaves import SAVES_INPUT as _SAVES_INPUT, SAVES_WEIGHT as _SAVES_WEIGHT, \
    SAVES_WEIGHT_ALWAYS as _SAVES_WEIGHT_ALWAYS, affine as _affine, \
    input_layer as _input_layer
from gradlint.model.lattice import deps_of
from gradlint.model.values import (
    MODULE, TENSOR, TUPLE, UNKNOWN, UNKNOWN_VALUE, Value, next_id, plain_tensor, union,
)

# torch.nn layers with parameters whose output is one tensor differentiable in their tensor
# inputs (not the recurrent layers or attention, which return tuples, nor embeddings of indices)
_DIFFERENTIABLE_LAYERS = api.PARAM_MODULES - frozenset("torch.nn." + n for n in (
    "LSTM", "GRU", "RNN", "LSTMCell", "MultiheadAttention", "Embedding", "EmbeddingBag"))


class ModuleCallMixin:
    """The model's calls of modules (a mixin of ``Model``, through ``ObjectMixin``)."""

    def _call_module(self, module: Value, args: List[Value], node: Any) -> Value:
        start = next_id()
        out = self._module_call(module, args, node)
        if module.id in self.hooked:  # a full backward hook wraps its outputs (customviews.py)
            return self.hooked_output(module, out, start)
        return out

    def _module_call(self, module: Value, args: List[Value], node: Any) -> Value:
        if module.made == "inference" and self.grad_enabled is True:
            self._emit("inference_module", (module.made_node, module))
        if module.params is not False and type(node) is cst.Call and owner_frozen(self.env, dotted(node.func)):
            module = with_params(module, False)  # a submodule of a module frozen as a whole (freezing.py)
        # (a module in eval mode: its forward runs in eval mode, modes.py)
        evaluated = module.id not in self.eval_ids and type(node) is cst.Call and in_eval(self, dotted(node.func))
        if evaluated:
            self.eval_ids.add(module.id)
        try:
            walked = self._walk_forward(module, args, node)
        finally:
            if evaluated:
                self.eval_ids.discard(module.id)
        if walked is not None:
            return walked
        tensors = [a for a in args if a.kind in (TENSOR, TUPLE)]
        if module.params is None and isinstance(module.node, str) and module.node in self.classes \
                and self.class_params(module.node) is False:
            # a module of a class that holds no parameters: its output needs a graph only
            # through its inputs
            module = Value(MODULE, params=False, act=module.act, inplace=module.inplace, node=module.node)
        if module.params is False:
            if module.node == "Identity" and module.node not in self.classes and len(args) == 1:
                return args[0]  # nn.Identity returns its input itself
            if tensors:
                if module.inplace and tensors[0].kind == TENSOR and not (
                        module.node in DROPOUT_MODULES and in_eval(self, dotted(node.func))):
                    self.inplace(node, tensors[0], f"`{module.node}(inplace=True)`")
                rest = [a for a in args if a is not tensors[0]]
                return self._derived(tensors[0], rest, node, op=module.act,
                                     taint=any(a.kind == UNKNOWN for a in args))
            return UNKNOWN_VALUE
        grad = self.grad_enabled
        cuts = union(a.cuts for a in args)
        if grad is True:
            for a in args:
                if a.kind == TENSOR and a.inference:
                    self._emit("inference_saved", (node, a))  # the module saves its input
            deps = deps_of(a for a in args if a.kind == TENSOR and a.rg)
            # a torch.nn layer differentiable in its inputs, given one that certainly requires
            # grad: its output certainly is a non-leaf that requires grad, frozen or not
            certain = module.node in _DIFFERENTIABLE_LAYERS and any(
                a.kind == TENSOR and a.rg is True and not a.probable for a in args)
            out = Value(TENSOR, rg=True, leaf=False, probable=not certain, cuts=cuts, **deps)
            if module.params is True and isinstance(module.node, str) and module.node.startswith("torch.nn."):
                # a torch.nn layer's output is a new tensor: frozen or not, never a leaf with a .grad
                out.made = "layer"
            self.add_saver(out)  # e.g. Linear saves its input to compute the weight's grad
            if module.params is None and not (isinstance(module.node, str) and module.node in self.classes
                                              and self.class_params(module.node) is True):
                # parameters unknown (a module passed in, a class whose parameters its constructions
                # decide) and its forward not followed: a graph the model only assumes
                self.probable_savers.add(out.id)
            self.record_saved_weights(module, args, out, node)
            input_rg = any(a.kind == TENSOR and a.rg is True for a in args)
            if module.node in _SAVES_WEIGHT and (input_rg or (
                    module.node in _SAVES_WEIGHT_ALWAYS and module.params is True and self._weight_trainable(node))):
                # a Linear/Conv layer saves its weight to compute its input's gradient (a Conv
                # whenever its output requires grad: layersaves.py)
                name = module.node.rsplit(".", 1)[-1]
                why = ("saved for its input's gradient" if input_rg
                       else "kept by the convolution even for an input that needs no grad")
                self.saved.setdefault(self.layer_param(module, "weight").id, []).append(
                    (out.id, f"the weight of `{name}`, {why}"))
            if module.node in _SAVES_WEIGHT and module.params is True and args and args[0].kind == TENSOR \
                    and self._weight_trainable(node):
                # and its input, to compute the weight's gradient (whether the input requires
                # grad or not): an in-place write to it before backward() raises
                name = module.node.rsplit(".", 1)[-1]
                self.record_saved(args[0], out.id, f"the input of `{name}`, saved for its weight's gradient")
            norm = _input_layer(module)
            if norm is not None and norm.node in _SAVES_INPUT and args and args[0].kind == TENSOR and (
                    args[0].rg is True or (norm.params is True and _affine(norm) and self._weight_trainable(node))):
                # a LayerNorm/GroupNorm (alone or first in a Sequential) saves its input for
                # backward whenever its output requires grad
                name = norm.node.rsplit(".", 1)[-1]
                self.record_saved(args[0], out.id, f"the input of `{name}`, saved for its gradient")
            if module.act in api.SAVES_OUTPUT:  # a container ending in Sigmoid/Tanh/Softmax
                self.saved.setdefault(out.id, []).append((out.id, f"the output of `{module.act}`"))
            return out
        if grad is False:
            out = plain_tensor(cuts=cuts)
            out.made, out.made_node = "computed", self.grad_lost_site()
            out.inference = self.inference  # a module's output under inference_mode
            return out
        return Value(TENSOR, rg=None, leaf=None, cuts=cuts)

    def _walk_forward(self, module: Value, args: List[Value], node: Any) -> Optional[Value]:
        """Calling a module of a class of this file runs its ``forward`` with these inputs."""
        if not isinstance(module.node, str) or module.node not in self.classes or not type(node) is cst.Call:
            return None
        fn = self.resolve_method(module, "forward")
        if fn is None:
            return None
        carried = carried_attributes(fn, self.carried_cache)
        owner = dotted(node.func)
        if carried and owner is not None:
            # `self.hidden = self.cell(x, self.hidden)`: each call carries state into the next,
            # on this object: walked at each call (no memo), its state read and bound on `owner`
            self._carried_first_use(owner, carried)
            return self._call_function(fn, node, args, module, owner)
        # the same forward with inputs of the same shape was walked already (another call site
        # of the module, another instance): its result, with this call's graph
        key = (id(fn), self.grad_enabled, module.params is False, in_eval(self, owner),
               tuple(_shape(a) for a in args))
        seen = self.forward_memo.get(key)
        binds = owner is not None and self._forward_stores(module, fn)
        if binds:
            # `self.out = self.head(h)` in forward: what it binds is the caller's object's
            # (`model.out` after `model(x)`): walked at each call, for this owner (no memo)
            self.pending_owner = owner
            try:
                out = self._call_function(fn, node, args, module, owner)
            finally:
                self.pending_owner = None
        elif seen is not None:
            like = self._like(seen, args) if self.grad_enabled is True else None
            if like is not None and like.kind == TENSOR:
                # what that walk saved of the module's own tensors (a weight, a buffer), saved again
                for kept, what in self.forward_saves.get(key, ()):
                    self.saved.setdefault(kept, []).append((like.id, what))
            for i, at, op in self.forward_writes.get(key, ()):
                # what that walk wrote in place into an input, written into this call's argument
                # (`token += self.pos` in forward: the tensor passed now may be saved already)
                self.inplace(at, args[i], op)
            if like is not None and like.kind == TENSOR and like.rg is True:
                for i, what in self.forward_input_saves.get(key, ()):
                    # and what it saved of an input, saved of this call's argument (after the
                    # writes: within one call, what the forward writes first it saves after)
                    self.record_saved(args[i], like.id, what)
            return like
        else:
            start, before = next_id(), {k: len(v) for k, v in self.saved.items()}
            logged = len(self.inplace_log)
            self.pending_owner = owner  # (the name `self` has in the caller: weights.py)
            try:
                out = self._call_function(fn, node, args, module, None)
            finally:
                self.pending_owner = None
        if out is not None and not binds:
            self.forward_memo[key] = out
            self.forward_writes[key] = self._input_writes(args, logged)
            inputs = {a.id for a in args}
            params = {p.id for _, ps in self.layer_params.values() for p in ps.values()}
            self.forward_saves[key] = [(k, v[before.get(k, 0)][1]) for k, v in self.saved.items()
                                       if (k < start or k in params) and k not in inputs
                                       and len(v) > before.get(k, 0)]
            self.forward_input_saves[key] = [(i, what) for i, a in enumerate(args) if a.kind == TENSOR
                                             for _, what in self.saved.get(a.id, [])[before.get(a.id, 0):]]
        if out is None or self.grad_enabled is not True:
            return None
        if out.kind == TENSOR and out.rg is not None:
            return out
        if out.kind == TUPLE and out.made is None:
            # what the walk could not tell is what any module call gives: a graph output
            items = tuple(i if i.kind != UNKNOWN and not (i.kind == TENSOR and i.rg is None)
                          else self._output_for(i, args, node) for i in out.items)
            return Value(TUPLE, items=items, keys=out.keys)  # (a forward returning a dict: by key)
        return None

    def _forward_stores(self, module: Value, fn: cst.FunctionDef, depth: int = 0) -> bool:
        """Does a call of ``module`` (whose ``forward`` is ``fn``) leave values on the object:
        its ``forward`` binds an attribute of ``self`` to a value that is no literal
        (``self.activity = y``), or calls a submodule of its own (``self.merge(h)``) whose
        ``forward`` does (``model.merge.activity`` after ``model(x)``)? Up to 3 levels."""
        if binds_own_attributes(fn, self.binds_cache, computed=True):
            return True
        if depth >= 2 or not fn.params.params or not isinstance(module.node, str):
            return False
        me = fn.params.params[0].name.value
        for sub in own_submodule_calls(fn, me):
            v = self._class_attribute(module.node, "self." + sub)
            if v is None or v.kind != MODULE:
                continue
            inner = self.resolve_method(v, "forward")  # type: ignore[attr-defined]
            if inner is not None and inner is not fn and self._forward_stores(v, inner, depth + 1):
                return True
        return False

    def _input_writes(self, args: List[Value], logged: int) -> List[Any]:
        """The in-place writes logged since ``logged`` whose tensor is one of ``args`` itself (by
        position): (position, node, op)."""
        where = {a.id: i for i, a in enumerate(args) if a.kind == TENSOR}
        return [(where[v.id], at, op) for at, v, op in self.inplace_log[logged:]
                if getattr(v, "id", None) in where]

    def _carried_first_use(self, owner: str, attrs: Any) -> None:
        """In a loop, ``model(x)`` reads ``model.hidden`` before its forward rebinds it: the
        statement is that state's first use in the body (unless the body set it before)."""
        loop = self.own_loop()
        if loop is None:
            return
        for a in attrs:
            key = owner + "." + a
            cur = self.env.get(key)
            if key in loop.first_use or (cur is not None and cur.id >= loop.start_id):
                continue  # already read, or reset in this iteration (`model.hidden = model.init_hidden()`)
            loop.outer.add(key)
            loop.first_use[key] = self.current_statement

    def _like(self, seen: Value, args: List[Value]) -> Optional[Value]:
        """A fresh value shaped like a memoised forward result, depending on this call's inputs."""
        if seen.kind == TENSOR and seen.rg is not None:
            out = plain_tensor() if seen.rg is False else self._module_output(args, None)
            self.carry_scores(seen, out)  # (a log-probability it returned: scores.py)
            return out
        if seen.kind == TUPLE and seen.made is None:
            return Value(TUPLE, items=tuple(self._like(i, args) or self._module_output(args, None) for i in seen.items),
                         keys=seen.keys)
        return None

    def _output_for(self, item: Value, args: List[Value], node: Any) -> Value:
        """A module output standing for ``item`` (what its forward returned, not known to the
        walk): its facts about log-probabilities stay (scores.py)."""
        out = self._module_output(args, node)
        self.carry_scores(item, out)
        return out

    def _module_output(self, args: List[Value], node: Any) -> Value:
        deps = deps_of(a for a in args if a.kind == TENSOR and a.rg)
        out = Value(TENSOR, rg=True, leaf=False, probable=True, cuts=union(a.cuts for a in args), **deps)
        self.add_saver(out)
        return out



def _shape(v: Value) -> Any:
    return (v.kind, v.rg, v.leaf, v.params, v.node if isinstance(v.node, str) else None)
