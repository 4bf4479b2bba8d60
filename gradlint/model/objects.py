"""Objects and modules: calling an ``nn.Module`` (torch.nn classes and subclasses defined in
the file), its parameters and submodules, and the attributes of instances."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.classes import ClassInfo, class_chain
from gradlint.model.freezing import owner_frozen, with_params
from gradlint.model.loops import carried_attributes
from gradlint.model.selfbinds import binds_own_attributes, own_submodule_calls
from gradlint.model.modes import DROPOUT_MODULES, in_eval
from gradlint.model.names import canonical, dotted, node_fact, subtree
from gradlint.model.layersaves import SAVES_INPUT as _SAVES_INPUT, SAVES_WEIGHT as _SAVES_WEIGHT, \
    SAVES_WEIGHT_ALWAYS as _SAVES_WEIGHT_ALWAYS, affine as _affine, \
    input_layer as _input_layer
from gradlint.model.lattice import deps_of
from gradlint.model.containers import keeps_structure
from gradlint.model.values import (
    CLASS, CONST, INSTANCE, MODULE, OPTIMIZER, TENSOR, TUPLE, UNKNOWN, UNKNOWN_VALUE, Value, leaf_rg, next_id,
    plain_tensor, union,
)

# torch.nn layers whose backward reads their weight (for the gradient of their input)
# torch.nn layers with parameters whose output is one tensor differentiable in their tensor
# inputs (not the recurrent layers or attention, which return tuples, nor embeddings of indices)
_DIFFERENTIABLE_LAYERS = api.PARAM_MODULES - frozenset("torch.nn." + n for n in (
    "LSTM", "GRU", "RNN", "LSTMCell", "MultiheadAttention", "Embedding", "EmbeddingBag"))
# the attributes torch.nn's layers hold as parameters
_PARAM_ATTRS = frozenset({"weight", "bias", "in_proj_weight", "in_proj_bias"})


def _covers(frozen: str, key: str) -> bool:
    """Does freezing ``frozen`` reach ``key``, or the other way round (a module and its
    parameters, `enc` and `enc.weight`, `layers` and `layers[0]`)?"""
    return key == frozen or key.startswith((frozen + ".", frozen + "[")) or frozen.startswith((key + ".", key + "["))


def harvest(fn: cst.FunctionDef, env: Dict[str, Value], table: Dict[str, Value]) -> None:
    """After a method is walked: the modules, optimizers and instances it bound on ``self``
    (``def build(self): self.net = Net()``) become attributes known in every method; and, from
    ``__init__``, its ``nn.Parameter`` attributes. A kind two methods disagree on is unknown."""
    if not fn.params.params:
        return
    me = fn.params.params[0].name.value + "."
    init = fn.name.value == "__init__"
    for key, v in env.items():
        if not key.startswith(me) or "[" in key or "." in key[len(me):]:
            continue
        attr = "self." + key[len(me):]
        if v.kind in (MODULE, OPTIMIZER, INSTANCE) or (init and v.kind == TENSOR and (v.is_param or v.made == "conv")) \
                or (init and v.kind == CONST and (type(v.node) is cst.Call or v.alts)):  # a grad-mode context
            old = table.get(attr)
            if old is None:
                table[attr] = v
            elif old is not v and (old.kind != v.kind or old.node != v.node or v.kind == TENSOR):
                table[attr] = UNKNOWN_VALUE
        elif v.kind in (TUPLE, MODULE) and keeps_structure(v):
            # a list or dict of layers or parameters (`self.heads = [nn.Linear(...) ...]`,
            # `self.params = {"w": nn.Parameter(...)}`): its elements in every method, while no
            # other method binds the attribute to another value (containers.py)
            old = table.get(attr)
            if init and (old is None or (old.kind == TUPLE and keeps_structure(old))):
                table[attr] = v  # (__init__ walked again at a construction site: its latest walk)
            elif old is not v:
                table[attr] = UNKNOWN_VALUE
        elif v.kind == TENSOR:
            # a tensor set in a method (`def setup(self): self.w = torch.randn(3, requires_grad=True)`)
            # is a tensor in the others; whether it requires grad is kept only for a leaf that
            # does, and only while no other method binds the attribute to another value
            old = table.get(attr)
            if old is None:
                table[attr] = v if v.leaf_requiring_grad and not v.is_param else Value(TENSOR, rg=None, leaf=None)
            elif old is not v and old.kind == TENSOR and not old.is_param:
                table[attr] = Value(TENSOR, rg=None, leaf=None)
            elif old.kind != TENSOR:
                table[attr] = UNKNOWN_VALUE
        elif table.get(attr) is not None and table[attr].kind == TENSOR and not table[attr].is_param:
            table[attr] = UNKNOWN_VALUE  # a tensor in one method, something else in another


def receiver_state(caller: Dict[str, Value], env: Dict[str, Value], receiver: Optional[Value],
                   receiver_key: Optional[str], fn: cst.FunctionDef) -> None:
    """``trainer.fit()`` walked at its call: what the caller knows of ``trainer.*`` (bound by an
    earlier ``trainer.setup()``, or assigned by the caller) is what ``self.*`` holds in it."""
    if receiver is None or receiver_key is None or not fn.params.params:
        return
    me = fn.params.params[0].name.value
    if env.get(me) is not receiver:
        return  # a staticmethod/classmethod: no self
    prefix = receiver_key + "."
    for k, v in caller.items():
        if k.startswith(prefix):
            env.setdefault(me + k[len(receiver_key):], v)


class ObjectMixin:
    def register_class(self, stmt: cst.ClassDef, outer: Optional[cst.ClassDef]) -> Optional[ClassInfo]:
        """A class of another module of the project joins the file's classes (its methods, its
        base names; nested classes too). None when the file already knows a class of that name
        (the file's own comes first; the other stays unknown)."""
        name = stmt.name.value
        if name in self.classes:
            return None
        info = self.classes[name] = ClassInfo.of(stmt)
        body = stmt.body.body if type(stmt.body) is cst.IndentedBlock else ()
        for s in body:
            if type(s) is cst.FunctionDef:
                if s.name.value not in info.methods:
                    info.methods[s.name.value] = s
                    self.method_class[id(s)] = stmt
            elif type(s) is cst.ClassDef:
                nested = self.register_class(s, stmt)
                if nested is not None:
                    scope = self.fn_scope.get(id(next(iter(info.methods.values()), None)))
                    for fn in nested.methods.values():
                        if scope is not None:
                            self.fn_scope[id(fn)] = scope
        return info

    def class_params(self, name: str, seen: Optional[set] = None) -> Optional[bool]:
        """Does a class of the file or of the project hold parameters? True when it shows one
        (``nn.Parameter``, ``register_parameter``, a torch.nn layer with parameters, or a module
        of such a class, bound on ``self``; a torch.nn layer as a base); False when its bases
        and every attribute its methods bind on ``self`` are known and none does (an attention
        that only combines its inputs, a loss with buffers); None when it cannot tell (a base, or
        a module bound on ``self``, from elsewhere)."""
        info = self.classes.get(name)
        if info is None:
            return None
        seen = seen if seen is not None else set()
        if name in seen:
            return False
        seen.add(name)
        fn = next(iter(info.methods.values()), None)
        scope = self.scope_for(fn) if fn is not None else self.root_scope
        imports = scope.imports
        verdict: Optional[bool] = False
        for b in info.node.bases:
            if b.keyword is not None:
                continue
            q = canonical(imports.qualname(b.value))
            if q is not None:
                if q in api.MODULE_BASES or q in api.PARAMLESS_MODULES:
                    continue
                if q.startswith("torch.nn."):
                    return True if q in api.PARAM_MODULES else None
                verdict = None
                continue
            base = b.value.value if type(b.value) is cst.Name else None
            if base is not None and base not in self.classes and not scope.root:
                self.module_name(scope, base)  # an imported base joins the classes
            inner = self.class_params(base, seen) if base is not None and base in self.classes else None
            if inner is True:
                return True
            if inner is None:
                verdict = None
        for method in info.methods.values():
            for value in node_fact("param_sites", method, _param_sites):
                if value is None:
                    return True  # nn.Parameter(...) / register_parameter(...)
                bound = _bound_params(self, value, imports, seen, method)
                if bound is True:
                    return True
                if bound is None:
                    verdict = None
        return verdict

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

    def module_attribute(self, base: Value, attr: str, key: Optional[str]) -> Optional[Value]:
        """``m.weight`` of a torch.nn layer (a parameter: a leaf that requires grad, unless the
        code froze it), ``model.fc`` of a module or instance of a class of this file."""
        if isinstance(base.node, str) and base.node in self.classes:
            return self._class_attribute(base.node, "self." + attr)
        if base.kind == MODULE and base.params is False and attr in _PARAM_ATTRS:
            return Value(TENSOR, rg=False, leaf=True, is_param=True)  # a frozen layer's weight
        if (base.kind == MODULE and base.params is True and attr in _PARAM_ATTRS
                and isinstance(base.node, str) and base.node.startswith("torch.nn.")):
            if key is not None and self.frozen(key):
                return Value(TENSOR, rg=None, leaf=True)
            return self.layer_param(base, attr)
        return None

    def layer_param(self, layer: Value, attr: str) -> Value:
        """The parameter ``attr`` of the torch.nn layer ``layer``: one value per layer object."""
        entry = self.layer_params.get(id(layer))
        if entry is None or entry[0] is not layer:
            entry = self.layer_params[id(layer)] = (layer, {})
        p = entry[1].get(attr)
        if p is None:
            p = entry[1][attr] = leaf_rg(is_param=True)
        return p

    def _class_attribute(self, cls: str, attr: str) -> Optional[Value]:
        for c, _info in class_chain(self.classes, cls):
            v = self.class_tables.get(c, {}).get(attr)
            if v is not None:
                return v
        return None

    def later_class(self, name: str, seen: Optional[set] = None) -> Optional[Value]:
        """The value of a class of this file that the walk has not reached yet (a function body
        is walked where it is defined, and may name a class defined further down)."""
        info = self.classes.get(name)
        if info is None:
            return None
        seen = seen if seen is not None else set()
        seen.add(name)
        is_module = False
        for b in info.node.bases:
            q = self.qualname(b.value) or ""
            if q in api.MODULE_BASES or q.startswith("torch.nn."):
                is_module = True
            elif type(b.value) is cst.Name and b.value.value not in seen:
                # a base of this file, or one imported from another module of the project
                base = self.env.get(b.value.value) or self.definitions.get(b.value.value)
                if base is None and b.value.value in self.classes:
                    base = self.later_class(b.value.value, seen)
                is_module = is_module or bool(base is not None and base.kind == CLASS and base.params)
        return Value(CLASS, node=info.node, params=is_module or None)

    def freeze(self, key: str) -> None:
        """The code froze ``key`` (a module, or a parameter of one)."""
        self.frozen_keys.setdefault(key, set()).add(self._freeze_scope())
        self.freezes.append(key)

    def _freeze_scope(self) -> Any:
        """Where a freeze holds: the function being walked (0 at module level), and its class."""
        fn = self.function_stack[-1] if self.function_stack else None
        if fn is None:
            return (0, 0)
        cls = self.method_class.get(id(fn))
        return (id(fn), id(cls) if cls is not None else 0)

    def frozen(self, key: str) -> bool:
        """Did the code freeze ``key`` or a module it belongs to (``requires_grad_(False)``,
        ``p.requires_grad = False`` or ``p.detach_()`` over its ``parameters()``)? A name frozen in
        a function is frozen there (and at module level, everywhere); ``self.x`` in every method of
        the class that froze it."""
        return any(_covers(f, key) for f in self.visible_frozen())

    def _weight_trainable(self, node: Any) -> bool:
        """Is the weight of the layer called at ``node`` free of every freeze the walk saw (the
        layer, its weight, or a module holding it; anywhere in the file)? Its input is saved only
        when the weight needs a gradient: unknown layers (no name) count as frozen."""
        key = dotted(node.func) if type(node) is cst.Call else None
        if key is None:
            return False
        return not any(_covers(f, key) for f in self.frozen_keys)

    def visible_frozen(self) -> List[str]:
        """The frozen keys that hold in the function being walked."""
        here = self._freeze_scope()
        cls = here[1]
        return [f for f, scopes in self.frozen_keys.items()
                if any(s == here or s[0] == 0 or (cls and s[1] == cls and f.startswith("self.")) for s in scopes)]

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


# what a value bound on ``self`` says of its class's parameters (class_params)
_NO_MODULE_CALLS = frozenset({"list", "dict", "set", "tuple", "int", "float", "str", "bool", "len", "range",
                              "getattr", "super", "isinstance", "max", "min", "sum", "abs", "round", "sorted"})


def _bound_params(model: Any, value: Any, imports: Any, seen: set, method: Any = None) -> Optional[bool]:
    """True: a module with parameters; False: certainly none (a constant, a parameter-free
    torch.nn layer, a plain Python value, a tensor made by torch); None: unknown (a value passed
    in, or made by code from elsewhere)."""
    if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString,
                          cst.FormattedString, cst.List, cst.Dict, cst.Tuple, cst.Set, cst.Comparison,
                          cst.BooleanOperation, cst.UnaryOperation, cst.BinaryOperation)):
        return False
    if type(value) is cst.Name:
        if value.value in ("None", "True", "False"):
            return False
        return False if method is not None and _plain_parameter(method, value.value) else None
    if not type(value) is cst.Call:
        return None
    q = canonical(imports.qualname(value.func))
    if q is not None:
        if q in api.PARAM_MODULES or q in api.PARAMETER:
            return True
        if q in api.PARAMLESS_MODULES or not q.startswith("torch.nn.") or q.startswith("torch.nn.functional"):
            return False  # a torch function's result (a tensor, a device), or a layer without any
        return None  # a container or another torch.nn module: its parts decide
    name = value.func.value if type(value.func) is cst.Name else None
    if name in _NO_MODULE_CALLS:
        return False
    if name is not None and name in model.classes:
        return model.class_params(name, seen)
    return None


_PLAIN_TYPES = frozenset({"bool", "int", "float", "str", "bytes"})


def _plain_parameter(method: Any, name: str) -> bool:
    """Is ``name`` a parameter of ``method`` that holds a plain value (annotated ``bool``,
    ``int``, ``float``, ``str``, or defaulting to a constant): no module with parameters?"""
    params = method.params
    for p in list(getattr(params, "posonly_params", ())) + list(params.params) + list(params.kwonly_params):
        if p.name.value != name:
            continue
        ann = p.annotation.annotation if p.annotation is not None else None
        if type(ann) is cst.Name and ann.value in _PLAIN_TYPES:
            return True
        d = p.default
        return isinstance(d, (cst.Integer, cst.Float, cst.SimpleString)) or (
            type(d) is cst.Name and d.value in ("True", "False"))
    return False


def _param_sites(method: Any) -> List[Any]:
    """In the order ``class_params`` reads them: None for a call of ``Parameter`` or
    ``register_parameter``, else the value of an assignment to an attribute of ``self``."""
    out: List[Any] = []
    for n in subtree(method.body):
        if type(n) is cst.Call:
            last = (dotted(n.func) or "").rsplit(".", 1)[-1]
            if last in ("Parameter", "register_parameter"):
                out.append(None)
        elif isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None:
            targets = [t.target for t in n.targets] if type(n) is cst.Assign else [n.target]
            if any(type(t) is cst.Attribute and type(t.value) is cst.Name
                   and t.value.value == "self" for t in targets):
                out.append(n.value)
    return out
