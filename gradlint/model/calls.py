"""Calls and summaries: torch functions and factories, tensor methods, optimizers, and the
functions, lambdas and methods of this file (inlined with the call's arguments)."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.env import Env
from gradlint.model.names import dotted
from gradlint.model.syntax import const_bool, conversion_copies, kwarg, kwvalue, positional, retains
from gradlint.model.values import (
    CLASS, FUNCTION, INSTANCE, MODULE, NAMED_PARAMS, NDARRAY, OPTIMIZER, PARAMS, SCALAR, TENSOR, TUPLE,
    UNKNOWN, UNKNOWN_VALUE, CONST_VALUE, Cut, Value, element_of, flatten, leaf_rg, plain_tensor, src_of, union,
)


# how many calls of this file's functions one file may walk with their arguments (each walk
# costs about a walk of the callee's body); and how deep such calls may nest
INLINE_BUDGET = 200
INLINE_DEPTH = 3


class CallMixin:
    # ------------------------------------------------------------------ calls
    def _eval_call(self, node: cst.Call) -> Value:
        func = node.func
        callee = func.value if isinstance(func, cst.Name) else (func.attr.value if isinstance(func, cst.Attribute) else None)
        if callee is not None:
            mode = "off" if self.grad_enabled is not True else ("assumed" if self.grad_assumed else "on")
            caller = self.function_stack[-1].name.value if self.function_stack else None
            self.calls.setdefault(callee, []).append((caller, mode))
        arg_values = [self.value_of(a.value) for a in node.args]
        q = self.qualname(func)
        if q is not None:
            return self._call_qualified(q, node, arg_values)
        receiver: Optional[Value] = None
        if isinstance(func, cst.Attribute):
            key = dotted(func)
            bound = None
            if key is not None:
                bound = self.env.get(key) or (self.class_attrs[-1].get(key) if self.class_attrs else None)
            if bound is None or bound.kind not in (MODULE, FUNCTION, CLASS):
                receiver = self.value_of(func.value)
                method = self.resolve_method(receiver, func.attr.value)
                if method is not None:
                    out = self._call_function(method, node, arg_values, receiver, dotted(func.value))
                    if out is not None:
                        return out
                return self._call_method(receiver, func.attr.value, node, arg_values)
            if bound.kind == FUNCTION:
                receiver = self.value_of(func.value)
        callee = self.value_of(func)
        if callee.kind == MODULE:
            return self._call_module(callee, arg_values, node)
        if callee.kind == FUNCTION:
            is_method = id(callee.node) in self.method_class
            if is_method and receiver is None:
                receiver = UNKNOWN_VALUE
            out = self._call_function(callee.node, node, arg_values, receiver if is_method else None,
                                      dotted(func.value) if is_method and isinstance(func, cst.Attribute) else None)
            if out is not None:
                return out
        if callee.kind == FUNCTION and callee.items:
            # a function of this module whose result the model summarised (e.g. a loss)
            self._escape(arg_values)
            return self._instantiate(callee.items[0])
        if callee.kind == CLASS:
            if not callee.params:
                self._escape(arg_values)
                if callee.node is not None and callee.node.name.value in self.classes:
                    return Value(INSTANCE, node=callee.node.name.value)
                return UNKNOWN_VALUE
            return Value(MODULE, params=None, made="inference" if self.inference else None, made_node=node,
                         node=callee.node.name.value if callee.node is not None else None)
        if isinstance(func, cst.Name):
            name = func.value
            if name in ("zero_grad", "zero_grads") and callee.kind == UNKNOWN:
                self.log("zero_grad", None, node)  # an imported helper that clears gradients
            if name in ("list", "tuple") and arg_values and arg_values[0].kind in (PARAMS, NAMED_PARAMS):
                return arg_values[0]
            if name in ("float", "int") and arg_values and arg_values[0].kind == TENSOR:
                v = arg_values[0]
                return Value(SCALAR, src=v if v.rg else v.src, cuts=v.cuts)
            if name == "enumerate" and arg_values:
                return Value(TUPLE, items=(Value(SCALAR), element_of(arg_values[0])), params=True)
            if name == "zip" and arg_values:
                return Value(TUPLE, items=tuple(element_of(a) for a in arg_values), params=True)
        self._escape(arg_values)
        return UNKNOWN_VALUE

    # ------------------------------------------------------------------ functions of this file
    def resolve_method(self, receiver: Value, name: str) -> Optional[cst.FunctionDef]:
        """The method ``name`` of the class of ``receiver`` (an instance or module of a class of
        this file), looked up through the file's base classes."""
        if receiver.kind not in (MODULE, INSTANCE) or not isinstance(receiver.node, str):
            return None
        seen = set()
        todo = [receiver.node]
        while todo:
            cls = todo.pop(0)
            info = self.classes.get(cls)
            if info is None or cls in seen:
                continue
            seen.add(cls)
            fn = info.methods.get(name)
            if fn is not None:
                return fn
            todo.extend(info.bases)
        return None

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
        """A call of a function, lambda or method of this file: a one-expression body is
        evaluated with the call's arguments; a longer one is walked with them (rules see its
        statements with these values), with its effects on the receiver applied here."""
        out = self._inline(fn, call, args, receiver)
        if out is not None:
            return out
        if self.walk_callee is None or not isinstance(fn, cst.FunctionDef) or self._inlining:
            return None
        return self.walk_callee(fn, call, args, receiver, receiver_key)

    def call_env(self, fn: Any, call: cst.Call, args: List[Value], receiver: Optional[Value]) -> Optional[Env]:
        """The parameters of ``fn`` bound to this call's arguments (``self`` to the receiver);
        None when the call's form is beyond the model (``*args`` at the call site)."""
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
                if i < len(positional):
                    env[positional[i].name.value] = v
                i += 1
            elif a.keyword.value in by_name:
                env[a.keyword.value] = v
        return env

    def _inline(self, fn: Any, call: cst.Call, args: List[Value], receiver: Optional[Value] = None) -> Optional[Value]:
        """A one-expression helper of this module (``def to_np(t): return t.detach().numpy()``)
        or a lambda, evaluated with this call's arguments, so values and graph cuts flow through it."""
        if self._inlining:
            return None
        if isinstance(fn, cst.Lambda):
            ret_value = fn.body
        elif isinstance(fn, cst.FunctionDef) and not fn.decorators:
            body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ()
            stmts = [b for b in body if not (isinstance(b, cst.SimpleStatementLine) and len(b.body) == 1
                                             and isinstance(b.body[0], cst.Expr)
                                             and isinstance(b.body[0].value, cst.SimpleString))]
            if len(stmts) != 1 or not isinstance(stmts[0], cst.SimpleStatementLine) or len(stmts[0].body) != 1:
                return None
            ret = stmts[0].body[0]
            if not isinstance(ret, cst.Return) or ret.value is None:
                return None
            ret_value = ret.value
        else:
            return None
        env = self.call_env(fn, call, args, receiver)
        if env is None:
            return None
        saved_env, saved_memo, saved_kind = self.env, self._memo, self.scope_kind
        self.env, self._memo, self.scope_kind, self._inlining = env, {}, "function", True
        pushed = self.enter_class_of(fn)
        try:
            out = self.value_of(ret_value)
        finally:
            self.env, self._memo, self.scope_kind, self._inlining = saved_env, saved_memo, saved_kind, False
            self.leave_class_of(pushed)
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
                return plain_tensor()
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
        if q in api.FACTORIES or q in api.REBUILDERS:
            return self._factory(q, node, args)
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
                return leaf_rg(cuts=cuts, is_param=True)
            if flag is False:
                return plain_tensor(cuts=cuts)
            return Value(TENSOR, rg=None, leaf=True, cuts=cuts)
        if q in api.BACKWARD_FUNCS:
            if args:
                self.backward_on(node, args[0], dotted(node.args[0].value), retain=retains(node))
            self._escape(args[1:])  # autograd.grad(loss, inputs): gradients of these are wanted
            return UNKNOWN_VALUE
        if q in api.DIFF_FUNCS:
            tensors = [a for a in args if a.kind in (TENSOR, TUPLE)]
            if tensors:
                if q in api.INPLACE_KW_FUNCS and const_bool(kwvalue(node, "inplace")) is True:
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
            inplace = const_bool(kwvalue(node, "inplace")) is True
            return Value(MODULE, params=False, act=api.MODULE_ACTS.get(q), inplace=inplace,
                         node=q.rsplit(".", 1)[-1])
        if q in api.PARAM_MODULES:
            self._emit("param_made", (node, q.replace("torch.nn.", "nn.") + "(...)"))
            return Value(MODULE, params=True, made="inference" if self.inference else None, made_node=node, node=q)
        if q in api.CONTAINER_MODULES:
            has = [a.params for a in args if a.kind == MODULE]
            prev = None
            for arg, v in zip(node.args, args):
                if v.kind == MODULE and v.inplace and prev is not None and prev.act in api.SAVES_OUTPUT:
                    self._emit("sequential_inplace", (arg, prev, v))
                prev = v if v.kind == MODULE else None
            return Value(MODULE, params=True if any(has) else None)
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
        if q == "copy.deepcopy" and args:
            self._emit("deepcopy", (node, args[0], dotted(node.args[0].value)))
            return UNKNOWN_VALUE
        if q.startswith("torch.optim.") and q.rsplit(".", 1)[-1][:1].isupper() and "lr_scheduler" not in q:
            params = args[0] if args else UNKNOWN_VALUE
            self._emit("optimizer", (node, flatten(params)))
            self._escape(args)
            owner = None
            first = node.args[0].value if node.args else None
            if isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute) \
                    and first.func.attr.value in ("parameters", "named_parameters"):
                owner = dotted(first.func.value)
            return Value(OPTIMIZER, node=owner, items=tuple(flatten(params)), made_node=node)
        self._escape(args)
        return UNKNOWN_VALUE

    def _factory(self, q: str, node: cst.Call, args: List[Value]) -> Value:
        v = self._factory_value(q, node, args)
        if self.inference and v.kind == TENSOR and v.made is None:
            v.made, v.made_node = "inference", node
        return v

    def _factory_value(self, q: str, node: cst.Call, args: List[Value]) -> Value:
        rg_arg = kwarg(node, "requires_grad")
        flag = False if rg_arg is None else const_bool(rg_arg.value)
        data = args[0] if args and node.args[0].keyword is None else UNKNOWN_VALUE
        cuts = union(a.cuts for a in args)
        if q in api.REBUILDERS or q == "torch.Tensor":
            if q == "torch.as_tensor" and data.kind == TENSOR:
                return data  # as_tensor returns the tensor itself
            if data.kind == TENSOR and data.rg is True:
                # torch.tensor(t): a copy without history (and a UserWarning)
                if flag is True:
                    return self._cut_leaf(Cut(node, "copy_rg", data, self.current_statement), cuts)
                return plain_tensor(cuts=cuts, src=data) if flag is False else Value(TENSOR, rg=None, leaf=True, cuts=cuts)
            src = src_of(data)
            if src is not None:
                kind = "numpy" if data.kind == NDARRAY else "scalar"
                cuts = cuts | {Cut(node, kind, src, self.current_statement)}
                if flag is True:  # torch.tensor(loss.item(), requires_grad=True)
                    return leaf_rg(cuts=cuts, made="rewrap", made_node=node)
        if flag is True:
            return leaf_rg(cuts=cuts, fresh=q in api.FACTORIES and q != "torch.tensor" or data.kind != TENSOR)
        if flag is False:
            return plain_tensor(cuts=cuts)
        return Value(TENSOR, rg=None, leaf=True, cuts=cuts)

    def _call_method(self, receiver: Value, attr: str, node: cst.Call, args: List[Value]) -> Value:
        kind = receiver.kind
        if attr in ("parameters", "named_parameters"):
            key = dotted(node.func.value)  # type: ignore[attr-defined]
            frozen = (key is not None and self.frozen(key)) or (kind == MODULE and receiver.params is False)
            return Value(PARAMS if attr == "parameters" else NAMED_PARAMS, node=key, params=False if frozen else None,
                         alias_of=receiver)  # (the parameters of that module)
        if attr == "backward":
            key = dotted(node.func.value)  # type: ignore[attr-defined]
            if kind == UNKNOWN and args and node.args[0].keyword is None:
                receiver = args[0]  # accelerator.backward(loss), manual_backward(loss)
                key = dotted(node.args[0].value)
            self.backward_on(node, receiver, key, retain=retains(node))
            return UNKNOWN_VALUE
        if attr in ("step", "zero_grad"):
            self._train_call(receiver, attr, node)
        if attr == "mark_dirty":
            self.dirty.update(a.id for a in args)
            return UNKNOWN_VALUE
        if attr == "state_dict":
            return Value(UNKNOWN)  # a value of its own, so that reads of it can be followed
        if kind == MODULE:
            if attr == "requires_grad_":
                flag = const_bool(positional(node)[0]) if positional(node) else True
                key = dotted(node.func.value)  # type: ignore[attr-defined]
                if flag is not True:
                    # frozen: calling it is differentiable in its inputs only; its weights are no
                    # trainable leaves (`nn.Conv2d(...).requires_grad_(False)` too)
                    frozen = Value(MODULE, params=False if flag is False else None, node=receiver.node)
                    if key is not None:
                        self.frozen_keys.add(key)
                        self.bind_key(key, frozen)
                    return frozen
                return receiver
            if attr in ("to", "cuda", "cpu", "train", "eval", "float", "double", "half", "bfloat16", "type"):
                return receiver
            if attr == "forward":
                return self._call_module(receiver, args, node)
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
            new = self._requires_grad(receiver, flag, node)
            if new is None:
                return UNKNOWN_VALUE
            key = dotted(node.func.value)  # type: ignore[attr-defined]
            if key is not None:
                self.bind_key(key, new)
            return new
        if attr == "detach" or attr == "detach_":
            if kind == TENSOR:
                src = receiver if receiver.rg else receiver.src
                out = plain_tensor(cuts=receiver.cuts, src=src,
                                   alias_of=receiver if attr == "detach" else None,
                                   alias_kind="detach" if attr == "detach" else None)
                if src is not None:
                    out.made_node = self.current_statement  # where the graph is cut
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
            if kind == NDARRAY:
                return Value(SCALAR, src=receiver.src, cuts=receiver.cuts)
            return Value(SCALAR)
        if kind == TUPLE and attr in ("append", "extend", "insert") and args and receiver.params is None:
            key = dotted(node.func.value)  # type: ignore[attr-defined]
            if key is not None:  # xs.append(t): the list now holds t too
                added = args[-1].items if attr == "extend" and args[-1].kind == TUPLE else (
                    (UNKNOWN_VALUE,) if attr == "extend" else (args[-1],))
                self.bind_key(key, Value(TUPLE, items=receiver.items + tuple(added), made="list"))
            return CONST_VALUE
        if kind == NDARRAY:
            return Value(NDARRAY, src=receiver.src, cuts=union([receiver.cuts] + [a.cuts for a in args]))
        if kind != TENSOR:
            return UNKNOWN_VALUE
        if attr.endswith("_") and not attr.startswith("_") and attr not in api.NOT_INPLACE:
            if not (attr == "copy_" and node.args and dotted(node.args[0].value) == dotted(node.func.value)):  # type: ignore[attr-defined]
                self.inplace(node, receiver, f"`.{attr}()`")  # (x.copy_(x) changes nothing)
            if receiver.alias_kind == "grad" and attr == "zero_":
                self.log("zero_grad_keep", dotted(node.func.value), node)  # type: ignore[attr-defined]
            new = self._inplace_effect(node.func.value, args)  # type: ignore[attr-defined]
            return new if new is not None else receiver
        if attr == "clone":
            if receiver.rg is False:
                return plain_tensor(cuts=receiver.cuts, src=receiver.src)
            return self._derived(receiver, [], node)
        if attr in api.CONVERSION_METHODS:
            v = self._derived(receiver, [], node)
            if (receiver.fresh and receiver.leaf_requiring_grad and self.grad_enabled is True
                    and self._conversion_site(node.func.value)):  # type: ignore[attr-defined]
                certain = conversion_copies(attr, node)
                if certain is not None:
                    return Value(TENSOR, rg=True, leaf=False if certain else None, deps=v.deps,
                                 cuts=v.cuts, made="conv", made_node=node, certain=certain)
            if receiver.rg is True and receiver.leaf is True and self.grad_enabled is True:
                # may return self (same device/dtype): leaf-ness unknown
                return Value(TENSOR, rg=True, leaf=None, deps=v.deps, cuts=v.cuts)
            if receiver.rg is False:
                out = plain_tensor(cuts=receiver.cuts, src=receiver.src)
                out.made, out.made_node = receiver.made, receiver.made_node  # .float() of a computed value
                return out
            return v
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
