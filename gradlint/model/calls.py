"""Calls and summaries: torch functions and factories, tensor methods, optimizers, and the
functions, lambdas and methods of this file (inlined with the call's arguments)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import libcst as cst

from gradlint.model import containers, torchapi as api
from gradlint.model.classes import class_chain
from gradlint.model.env import Env
from gradlint.model.names import dotted, rebound_names
from gradlint.model.freezing import inherited_init, unfreezes_elsewhere, with_params
from gradlint.model.instances import instance_record
from gradlint.model.syntax import literal_arguments
from gradlint.model.calls_methods import MethodCallMixin
from gradlint.model.calls_torch import TorchCallMixin, paramless_module
from gradlint.model.values import (
    NAMESPACE, CLASS, CONST, FUNCTION, INSTANCE, MODULE, NAMED_PARAMS, PARAMS, SCALAR, TENSOR, TUPLE,
    UNKNOWN, UNKNOWN_VALUE, Value, element_of, next_id, plain_tensor, union,
)


# how many calls of this file's functions one file may walk with their arguments (each walk
# costs about a walk of the callee's body); and how deep such calls may nest
INLINE_BUDGET = 200
INLINE_DEPTH = 3


class CallMixin(TorchCallMixin, MethodCallMixin):
    # ------------------------------------------------------------------ calls
    def _eval_call(self, node: cst.Call) -> Value:
        func = node.func
        callee = func.value if type(func) is cst.Name else (func.attr.value if type(func) is cst.Attribute else None)
        if callee is not None:
            mode = "off" if self.grad_enabled is not True else ("assumed" if self.grad_assumed else "on")
            caller = self.function_stack[-1].name.value if self.function_stack else None
            self.calls.setdefault(callee, []).append((caller, mode))
        arg_values = [self.value_of(a.value) for a in node.args]
        if callee == "__init__":
            inherited_init(self, node)  # `super().__init__()`: what the base's did to self (freezing.py)
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
            if bound is None and receiver.kind == CLASS:
                # `Cls.helper(x)`: a static method (or a method given its instance explicitly),
                # `Cls.build(...)`: a class method, its class as `cls`
                out = self._call_on_class(receiver, func.attr.value, node, arg_values)
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

    def _call_on_class(self, cls: Value, name: str, call: cst.Call, args: List[Value]) -> Optional[Value]:
        """``Cls.f(...)`` of a class of the project: a static method with the call's arguments,
        a class method with ``cls`` bound to the class, a plain method with its instance passed
        explicitly (``Base.forward(self, x)``). None when the model cannot follow it."""
        node = cls.node
        cname = node.name.value if type(node) is cst.ClassDef else node if isinstance(node, str) else None
        if cname is None or cname not in self.classes:
            return None
        fn = next((info.methods[name] for _c, info in class_chain(self.classes, cname)
                   if info is not None and name in info.methods), None)
        if fn is None:
            return None
        kinds = {(dotted(d.decorator) or "").rsplit(".", 1)[-1] for d in fn.decorators}
        if "classmethod" in kinds:
            return self._call_function(fn, call, args, cls, dotted(call.func.value))  # type: ignore[attr-defined]
        if kinds - {"staticmethod"}:
            return None  # a property, a decorator that changes the call
        return self._call_function(fn, call, args, None, None)

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
            receiver = receiver if receiver.kind == CLASS else UNKNOWN_VALUE  # cls (`Cls.build()`: that class)
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
                    env[name] = paramless_module(q, p.default)
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
