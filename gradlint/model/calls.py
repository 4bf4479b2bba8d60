"""Calls and summaries: torch functions and factories, tensor methods, optimizers, and the
functions, lambdas and methods of this file (inlined with the call's arguments)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import libcst as cst

from gradlint.model import containers, torchapi as api
from gradlint.model.classes import class_chain
from gradlint.model.env import Env
from gradlint.model.names import dotted, grad_attribute, rebound_names, string_value
from gradlint.model.freezing import unfreezes_elsewhere, unfrozen, with_params
from gradlint.model.instances import instance_record
from gradlint.model.modes import dropout_in_eval, set_mode
from gradlint.model.multiviews import MULTI_VIEW_OPS
from gradlint.model.customviews import HOOK_WRAPPING
from gradlint.model.syntax import (
    const_bool, conversion_copies, dtype_conversion, kwarg, kwvalue, literal_arguments, positional,
)
from gradlint.model.values import (
    NAMESPACE,
    CLASS, CONST, FUNCTION, INSTANCE, MODULE, NAMED_PARAMS, NDARRAY, OPTIMIZER, PARAMS, SCALAR, TENSOR, TUPLE,
    UNKNOWN, UNKNOWN_VALUE, Cut, Value, element_of, flatten, leaf_rg, next_id, plain_tensor, src_of, union,
)


# how many calls of this file's functions one file may walk with their arguments (each walk
# costs about a walk of the callee's body); and how deep such calls may nest
INLINE_BUDGET = 200
# objects made of keyword arguments, each an attribute
_NAMESPACES = frozenset({"types.SimpleNamespace"})
INLINE_DEPTH = 3


class CallMixin:
    # ------------------------------------------------------------------ calls
    def _eval_call(self, node: cst.Call) -> Value:
        func = node.func
        callee = func.value if type(func) is cst.Name else (func.attr.value if type(func) is cst.Attribute else None)
        if callee is not None:
            mode = "off" if self.grad_enabled is not True else ("assumed" if self.grad_assumed else "on")
            caller = self.function_stack[-1].name.value if self.function_stack else None
            self.calls.setdefault(callee, []).append((caller, mode))
        arg_values = [self.value_of(a.value) for a in node.args]
        if self._inlining:
            # a call in a one-expression helper evaluated at its call site (its body is not
            # walked): rules that look at calls see it here, with this call's arguments
            self._emit("inlined_call", (node,))
        q = self.qualname(func)
        if q is not None:
            made = next_id()
            return self.int_function_result(q, node, arg_values, self._call_qualified(q, node, arg_values), made)
        receiver: Optional[Value] = None
        if type(func) is cst.Attribute:
            key = dotted(func)
            bound = None
            if key is not None:
                bound = self.env.get(key) or (self.class_attrs[-1].get(key) if self.class_attrs else None)
            if bound is None or bound.kind not in (MODULE, FUNCTION, CLASS):
                receiver = self.value_of(func.value)
                if receiver.kind == NAMESPACE:
                    # `models.build(x)`: a function or class of another module of the project
                    bound, receiver = self.value_of(func), None
                    if bound.kind not in (MODULE, FUNCTION, CLASS):
                        self._escape(arg_values)
                        return UNKNOWN_VALUE
            if bound is not None and bound.kind == INSTANCE:
                # `self.criterion(model, batch)`: an object held in an attribute runs its `__call__`
                method = self.resolve_method(bound, "__call__")
                if method is not None:
                    out = self._call_function(method, node, arg_values, bound, key)
                    if out is not None:
                        return out
            if bound is None or bound.kind not in (MODULE, FUNCTION, CLASS):
                method = self.resolve_method(receiver, func.attr.value)
                if method is not None:
                    out = self._call_function(method, node, arg_values, receiver, dotted(func.value))
                    if out is not None:
                        return out
                if bound is None and receiver.kind in (MODULE, INSTANCE):
                    # `model.encoder(x)`: a submodule the object's class binds, called
                    part = self.module_attribute(receiver, func.attr.value, key)
                    if part is not None and part.kind == MODULE:
                        return self._call_module(part, arg_values, node)
                made = next_id()
                out = self._call_method(receiver, func.attr.value, node, arg_values)
                return self.int_method_result(receiver, func.attr.value, node, out, made)
            if bound.kind == FUNCTION and receiver is None and self.value_of(func.value).kind != NAMESPACE:
                receiver = self.value_of(func.value)
        callee = self.value_of(func)
        if callee.kind == MODULE:
            return self._call_module(callee, arg_values, node)
        if callee.kind == INSTANCE:
            # `loss_compute(out, y)`: an instance of a class of the project runs its `__call__`
            method = self.resolve_method(callee, "__call__")
            if method is not None:
                out = self._call_function(method, node, arg_values, callee, dotted(func))
                if out is not None:
                    return out
        if callee.kind == FUNCTION:
            is_method = id(callee.node) in self.method_class
            if is_method and receiver is None:
                receiver = UNKNOWN_VALUE
            out = self._call_function(callee.node, node, arg_values, receiver if is_method else None,
                                      dotted(func.value) if is_method and type(func) is cst.Attribute else None)
            if out is not None:
                return out
        if callee.kind == FUNCTION and callee.items:
            # a function of this module whose result the model summarised (e.g. a loss)
            self._escape(arg_values)
            return self._instantiate(callee.items[0])
        if callee.kind == CLASS:
            name = callee.node.name.value if callee.node is not None else None
            if not callee.params:
                self._escape(arg_values)
                if name in self.classes:
                    record = containers.record(self.classes[name], node, arg_values)
                    if record is not None:
                        return record  # a dataclass or NamedTuple: its fields are its elements
                    return self._construct(name, node, arg_values, Value(INSTANCE, node=name))
                return UNKNOWN_VALUE
            out = Value(MODULE, params=None, made="inference" if self.inference else None, made_node=node, node=name)
            return self._construct(name, node, arg_values, out)
        if type(func) is cst.Name:
            name = func.value
            if name in ("zero_grad", "zero_grads") and callee.kind == UNKNOWN:
                self.log("zero_grad", None, node)  # an imported helper that clears gradients
            if name in ("list", "tuple") and arg_values and arg_values[0].kind in (PARAMS, NAMED_PARAMS):
                v = arg_values[0]
                if v.made == "generator":  # a list of them can be iterated again
                    return Value(v.kind, node=v.node, params=v.params, alias_of=v.alias_of)
                return v
            if name in ("float", "int") and arg_values and arg_values[0].kind == TENSOR:
                v = arg_values[0]
                return Value(SCALAR, src=v if v.rg else v.src, cuts=v.cuts)
            if name == "sum" and callee.kind == UNKNOWN and arg_values and len(arg_values) <= 2 \
                    and not any(a.star or (a.keyword is not None and a.keyword.value != "start") for a in node.args):
                # the built-in sum: `sum(losses)` adds the elements (of a list, or a tensor's rows)
                # to its start, as `+` does
                xs = arg_values[0]
                if xs.kind == TENSOR:
                    return self._combine([xs] + arg_values[1:], node, op="add")
                if xs.kind == TUPLE and xs.keys is None and not xs.params and xs.items \
                        and all(i.kind == TENSOR for i in xs.items):
                    # (a literal by its elements; else what every element agrees on)
                    parts = list(xs.items) if xs.made is None else [containers.join(list(xs.items))]
                    return self._combine(parts + arg_values[1:], node, op="add")
            if name == "enumerate" and arg_values:
                return Value(TUPLE, items=(Value(SCALAR), element_of(arg_values[0])), params=True)
            if name == "zip" and arg_values:
                return Value(TUPLE, items=tuple(element_of(a) for a in arg_values), params=True)
            if callee.kind == UNKNOWN and name in containers.BUILDERS:
                out = containers.from_call(name, node, arg_values)  # dict(...), defaultdict(list), list(xs)
                if out is not None:
                    return out
        elif type(func) is cst.Attribute and callee.kind == UNKNOWN and dotted(func) in (
                "collections.defaultdict", "collections.OrderedDict"):
            return containers.from_call(func.attr.value, node, arg_values)  # type: ignore[return-value]
        self._escape(arg_values)
        return UNKNOWN_VALUE

    # ------------------------------------------------------------------ functions of this file
    def resolve_method(self, receiver: Value, name: str) -> Optional[cst.FunctionDef]:
        """The method ``name`` of the class of ``receiver`` (an instance or module of a class of
        this file), looked up through the file's base classes."""
        if receiver.kind not in (MODULE, INSTANCE) or not isinstance(receiver.node, str):
            return None
        for _cls, info in class_chain(self.classes, receiver.node):
            fn = info.methods.get(name) if info is not None else None
            if fn is not None:
                return fn
        return None

    def _construct(self, name: Optional[str], call: cst.Call, args: List[Value], obj: Value) -> Value:
        """``Cls(...)`` of a class of the project: its ``__init__`` is walked here with the call's
        arguments when the walk has not reached the class yet (its attributes become known:
        ``self.proj = nn.Linear(...)``), or when an argument is something the model knows (the
        body is checked with it, as a function's at its call). An instance (not a module) then
        carries what this ``__init__`` bound on ``self`` (objects.instance_record)."""
        if name is None:
            return obj
        info = self.classes.get(name)
        # (its own `__init__`: a base is known by its last name only, and `Fixed(dist.Categorical)`
        # must not run the file's own `Categorical.__init__`)
        init = info.methods.get("__init__") if info is not None else None
        if init is None:
            return obj
        if name in self.walked_classes and not any(a.kind not in (UNKNOWN, CONST, SCALAR) for a in args):
            # its walk at the definition saw as much
            return self._frozen_instance(name, obj, self.frozen_inits.get(name))
        self.init_attrs, self.init_self = None, None
        self._call_function(init, call, args, obj, None)
        bound, self.init_attrs = self.init_attrs, None
        me, self.init_self = self.init_self, None
        if obj.kind == MODULE:
            return self._frozen_instance(name, obj, me)
        if obj.kind != INSTANCE or bound is None:
            return obj
        return instance_record(self, name, obj, bound)

    def _frozen_instance(self, name: str, obj: Value, me: Optional[Value]) -> Value:
        """A module whose ``__init__`` left ``self`` frozen as a whole (``self.requires_grad_(False)``
        or a loop freezing every ``self.parameters()``, and nothing that may hold parameters bound
        after it) is frozen, unless another method of its class may unfreeze it (freezing.py)."""
        if me is not None and me.kind == MODULE and me.params is False and not unfreezes_elsewhere(self, name):
            return with_params(obj, False)
        return obj

    def enter_class_of(self, fn: Any) -> bool:
        """Make the class of method ``fn`` the enclosing class (its attributes, its bases)."""
        cls = self.method_class.get(id(fn))
        if cls is None:
            return False
        self.class_stack.append(cls)
        self.class_attrs.append(self.class_tables.setdefault(cls.name.value, {}))
        return True

    def leave_class_of(self, pushed: bool) -> None:
        if pushed:
            self.class_stack.pop()
            self.class_attrs.pop()

    def _call_function(self, fn: Any, call: cst.Call, args: List[Value], receiver: Optional[Value],
                       receiver_key: Optional[str]) -> Optional[Value]:
        """A call of a function, lambda or method of this file or of another module of the
        project (walked in its own module's scope: imports.py)."""
        target = self.scope if type(fn) is cst.Lambda else self.scope_for(fn)
        if target is self.scope:
            return self._call_here(fn, call, args, receiver, receiver_key)
        saved = self.enter_scope(target)
        self.call_sites.append(call)
        try:
            return self._call_here(fn, call, args, receiver, receiver_key)
        finally:
            self.call_sites.pop()
            self.leave_scope(saved)

    def _call_here(self, fn: Any, call: cst.Call, args: List[Value], receiver: Optional[Value],
                   receiver_key: Optional[str]) -> Optional[Value]:
        """A one-expression body is evaluated with the call's arguments; a longer one is walked
        with them (rules see its statements with these values), with its effects on the
        receiver applied here."""
        out = self._inline(fn, call, args, receiver, receiver_key)
        if out is not None:
            return out
        if self.walk_callee is None or not type(fn) is cst.FunctionDef:
            return None
        # (also from a one-expression function being inlined: `return self.encoder(x)`)
        inlining, self._inlining = self._inlining, False
        try:
            return self.walk_callee(fn, call, args, receiver, receiver_key)
        finally:
            self._inlining = inlining

    def call_env(self, fn: Any, call: cst.Call, args: List[Value], receiver: Optional[Value],
                 keys: Optional[dict] = None) -> Optional[Env]:
        """The parameters of ``fn`` bound to this call's arguments (``self`` to the receiver);
        None when the call's form is beyond the model (``*args`` at the call site). ``keys``, when
        given, receives each parameter's argument as the caller names it (``store``, ``model.enc``)."""
        params = fn.params
        positional = list(getattr(params, "posonly_params", ())) + list(params.params)
        env: Env = {}
        decorators = {(dotted(d.decorator) or "").rsplit(".", 1)[-1] for d in getattr(fn, "decorators", ())}
        if receiver is not None and "staticmethod" in decorators:
            receiver = None  # self.helper(x) of a @staticmethod: x is its first parameter
        elif receiver is not None and "classmethod" in decorators:
            receiver = UNKNOWN_VALUE  # cls
        if receiver is not None:
            if not positional:
                return None
            env[positional[0].name.value] = receiver
            positional = positional[1:]
        by_name = {p.name.value: p for p in positional + list(params.kwonly_params)}
        i = 0
        for a, v in zip(call.args, args):
            if a.star:
                return None
            if a.keyword is None:
                name = positional[i].name.value if i < len(positional) else None
                i += 1
            else:
                name = a.keyword.value if a.keyword.value in by_name else None
            if name is not None:
                env[name] = v
                if keys is not None:
                    keys[name] = dotted(a.value)
        for p in positional + list(params.kwonly_params):
            name = p.name.value
            if name not in env and type(p.default) is cst.Call:
                # a parameter left to its default: `activation=nn.ReLU()` (one module object,
                # made when the function was defined; a module without parameters or state)
                q = self.qualname(p.default.func)
                if q in api.PARAMLESS_MODULES:
                    env[name] = _paramless_module(q, p.default)
        return env

    def argument_state(self, keys: dict, env: Env) -> None:
        """What the caller knows about its arguments' attributes and items (``trainer.w``, bound
        by ``trainer.setup()`` earlier) is known in the callee under the parameter's name."""
        if not self._dotted_keys:
            return
        for param, caller in keys.items():
            if caller is None:
                continue
            n = len(caller)
            for k, v in self.env.items():
                if k.startswith(caller) and k[n:n + 1] in (".", "[") and param + k[n:] not in env:
                    env[param + k[n:]] = v

    def apply_argument_writes(self, fn: Any, keys: dict, end: Env) -> None:
        """Effects of a walked call on its arguments: what the callee bound on a parameter's
        items or attributes (``store["best"] = ...``, ``model.head = nn.Linear(...)``) is bound on
        the argument the caller passed (unless the callee rebinds the parameter itself)."""
        rebound: Optional[set] = None
        for k, v in list(end.items()):
            cut = min((i for i in (k.find("."), k.find("[")) if i > 0), default=-1)
            caller = keys.get(k[:cut]) if cut > 0 else None
            if caller is None:
                continue
            if rebound is None:
                rebound = self._rebound.get(id(fn))
                if rebound is None:
                    rebound = self._rebound[id(fn)] = rebound_names(fn.body)
            if k[:cut] not in rebound:
                self.bind_key(caller + k[cut:], v)

    def _inline(self, fn: Any, call: cst.Call, args: List[Value], receiver: Optional[Value] = None,
                receiver_key: Optional[str] = None) -> Optional[Value]:
        """A one-expression helper of this module (``def to_np(t): return t.detach().numpy()``)
        or a lambda, evaluated with this call's arguments, so values and graph cuts flow through it."""
        if self._inlining:
            return None
        if type(fn) is cst.Lambda:
            ret_value = fn.body
        elif type(fn) is cst.FunctionDef and not fn.decorators:
            body = fn.body.body if type(fn.body) is cst.IndentedBlock else ()
            stmts = [b for b in body if not (type(b) is cst.SimpleStatementLine and len(b.body) == 1
                                             and type(b.body[0]) is cst.Expr
                                             and isinstance(b.body[0].value, cst.SimpleString))]
            if len(stmts) != 1 or not type(stmts[0]) is cst.SimpleStatementLine or len(stmts[0].body) != 1:
                return None
            ret = stmts[0].body[0]
            if not type(ret) is cst.Return or ret.value is None:
                return None
            ret_value = ret.value
        else:
            return None
        keys: Dict[str, Optional[str]] = {}
        env = self.call_env(fn, call, args, receiver, keys)
        if env is None:
            return None
        saved_env, saved_memo, saved_kind = self.env, self._memo, self.scope_kind
        self.env, self._memo, self.scope_kind, self._inlining = env, {}, "function", True
        pushed = self.enter_class_of(fn)
        self.frame_keys.append((True, self.frame_names(fn, keys, receiver, receiver_key)))
        bound = receiver is not None and type(fn) is cst.FunctionDef and not any(
            (dotted(d.decorator) or "").endswith("staticmethod") for d in fn.decorators)
        self.inline_literals.append((fn, literal_arguments(fn, call, bound)))
        given = dict(env) if bound and receiver_key is not None else None
        try:
            out = self.value_of(ret_value)
        finally:
            self.inline_literals.pop()
            self.frame_keys.pop()
            self.env, self._memo, self.scope_kind, self._inlining = saved_env, saved_memo, saved_kind, False
            self.leave_class_of(pushed)
        if given is not None and fn.params.params:
            # `return self.head(self.merge(x))`: what the calls in the expression bound on the
            # receiver's parts (`self.merge.activity`) is the caller's object's (`net.merge.activity`)
            me = fn.params.params[0].name.value + "."
            for k, v in env.items():
                if k.startswith(me) and given.get(k) is not v:
                    self.bind_key(receiver_key + k[len(me) - 1:], v)  # type: ignore[operator]
        before = union(a.cuts for a in args)
        for cut in out.cuts - before:  # a cut made inside the helper is reported at this call
            cut.node, cut.statement = call, self.current_statement
        return out

    def _instantiate(self, summary: Value) -> Value:
        """A fresh value shaped like a function's summarised result, at this call's grad mode."""
        if summary.kind == TENSOR:
            if summary.rg is True:
                grad = self.grad_enabled
                if grad is True:
                    return Value(TENSOR, rg=True, leaf=False, probable=True)
                return plain_tensor() if grad is False else Value(TENSOR, rg=None, leaf=None)
            if summary.rg is False:
                out = plain_tensor()
                out.inference = summary.inference  # an inference tensor it returns stays one
                return out
            return UNKNOWN_VALUE
        if summary.kind == MODULE:
            return Value(MODULE, params=summary.params, act=summary.act, inplace=summary.inplace,
                         node=summary.node)
        if summary.kind == TUPLE:
            return Value(TUPLE, items=tuple(self._instantiate(i) for i in summary.items))
        if summary.kind in (PARAMS, NAMED_PARAMS, SCALAR):
            return Value(summary.kind)
        return UNKNOWN_VALUE

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
                                 inputs=_inputs(node, args, 1 if q == "torch.autograd.grad" else None))
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
            return _paramless_module(q, node)
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
            self.backward_on(node, receiver, key, retain=self.retains(node), inputs=_inputs(node, args, None))
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
                        self.bind_key(key, frozen)
                    return frozen
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


def _inputs(node: cst.Call, args: List[Value], position: Optional[int]) -> Optional[Value]:
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


def _paramless_module(q: str, node: cst.Call) -> Value:
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
