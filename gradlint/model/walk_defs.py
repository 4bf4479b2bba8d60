"""The walk of definitions: a function's body with its own scope and grad mode at entry
(decorators, custom autograd.Function methods, Lightning's evaluation steps), the instance bound
to a method's first parameter, what the function returns, a class body, a lambda."""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.classes import class_chain
from gradlint.model.freezing import record_frozen_init
from gradlint.model.names import dotted
from gradlint.model.objects import harvest as _harvest
from gradlint.model.syntax import const_bool
from gradlint.model.values import CLASS, FUNCTION, INSTANCE, MODULE, Value



# Decorators known not to change grad mode.
_NEUTRAL_DECORATORS = frozenset(
    "staticmethod classmethod property abstractmethod wraps lru_cache cache cached_property "
    "overload override contextmanager setter getter deleter dataclass".split()
)
_FUNCTION_BASES = ("Function", "InplaceFunction")
_AUTOGRAD_FUNCTION_METHODS = frozenset({"forward", "backward", "setup_context", "jvp", "vjp"})
# The hooks of a LightningModule that Lightning's evaluation loops call with grad off (under
# torch.inference_mode, or torch.no_grad with Trainer(inference_mode=False)); training_step is
# called with grad on.
_LIGHTNING_EVAL_STEPS = frozenset({"validation_step", "test_step", "predict_step"})
_LIGHTNING_MODULE = "LightningModule"  # pytorch_lightning / lightning.pytorch / lightning, by any import



class DefinitionWalker:
    """The ``Walker``'s handlers for ``def``, ``class`` and ``lambda`` (a mixin: ``walk.py``)."""

    def _function(self, node: cst.FunctionDef) -> None:
        model = self.model
        for d in node.decorators:
            self.walk(d)
        self.field(node.params)
        self.field(node.returns)
        saved_env, saved_grad, saved_kind = model.snapshot(), model.grad_enabled, model.scope_kind
        saved_loop, saved_assumed, saved_loops = model.loop_depth, model.grad_assumed, model.loops
        model.loops = []
        model.restore({})
        model.grad_enabled, model.grad_assumed = self._function_grad_mode(node)
        saved_inference = model.inference
        model.inference = False
        role = self._autograd_function_role(node)
        if role is not None:
            # forward(ctx, *inputs) / backward(ctx, *grad_outputs) of a custom autograd.Function
            for i, p in enumerate(list(node.params.params)[1:]):
                ann = dotted(p.annotation.annotation) if p.annotation is not None else None
                if ann is None or ann.rsplit(".", 1)[-1] == "Tensor":
                    v = Value("tensor", rg=None, leaf=None, made=role)
                    model.fn_inputs[v.id] = (node, i)
                    model.bind_key(p.name.value, v)
        model.scope_kind = "function"
        model.loop_depth = 0
        cls = model.method_class.get(id(node))
        if cls is not None and model.class_stack and model.class_stack[-1] is cls and role is None:
            self._bind_self(node, cls)
        model.function_stack.append(node)
        model.returns.append([])
        model.frame_count += 1
        model.frames.append(model.frame_count)
        try:
            self._block(node.body)
            if cls is not None and model.class_attrs and model.class_stack and model.class_stack[-1] is cls:
                _harvest(node, model.env, model.class_attrs[-1])
                if node.name.value == "__init__" and node.params.params:
                    # what `self` holds at its end: frozen as a whole or not (freezing.py)
                    me = node.params.params[0].name.value
                    model.frozen_inits[cls.name.value] = model.env.get(me)
                    record_frozen_init(model, cls.name.value, me)
        finally:
            model.frames.pop()
            model.function_stack.pop()
            returned = model.returns.pop()
            if role == "fn_input" and model.class_stack:
                model.function_returns(model.class_stack[-1], node, returned)  # (customviews.py)
            model.restore(saved_env)
            model.grad_enabled, model.scope_kind, model.loop_depth = saved_grad, saved_kind, saved_loop
            model.grad_assumed, model.loops = saved_assumed, saved_loops
            model.inference = saved_inference
        fn = Value(FUNCTION, node=node, items=_summary(returned))
        model.bind_key(node.name.value, fn)
        if saved_kind == "class" and model.class_attrs:
            model.class_attrs[-1]["self." + node.name.value] = fn

    def _bind_self(self, node: cst.FunctionDef, cls: cst.ClassDef) -> None:
        """The first parameter of a method is the instance: a module of that class, or an
        instance of it (static and class methods excepted)."""
        for d in node.decorators:
            if (dotted(d.decorator) or "").rsplit(".", 1)[-1] in ("staticmethod", "classmethod"):
                return
        params = node.params.params
        if not params:
            return
        model = self.model
        is_module = bool(model.class_attrs) and model.class_attrs[-1].get("__module__") is not None
        name = cls.name.value
        model.bind_key(params[0].name.value,
                       Value(MODULE, params=None, node=name) if is_module else Value(INSTANCE, node=name))

    def _autograd_function_role(self, node: cst.FunctionDef) -> Optional[str]:
        model = self.model
        if not model.class_stack or node.name.value not in ("forward", "backward"):
            return None
        for b in model.class_stack[-1].bases:
            name = (dotted(b.value) or "").rsplit(".", 1)[-1]
            if name.endswith(_FUNCTION_BASES):
                return "fn_input" if node.name.value == "forward" else "fn_grad_output"
        return None

    def _function_grad_mode(self, node: cst.FunctionDef) -> Tuple[Optional[bool], bool]:
        """Grad mode at the function's entry, and whether it is only assumed (on by default:
        the callers decide, see Model.grad_off_functions)."""
        model = self.model
        mode: Optional[bool] = True
        explicit = False
        for d in node.decorators:
            expr = d.decorator
            call_args = None
            if type(expr) is cst.Call:
                call_args = expr.args
                expr = expr.func
            q = model.qualname(expr)
            if q in api.GRAD_OFF:
                if q == "torch.inference_mode" and call_args and const_bool(call_args[0].value) is False:
                    continue
                mode, explicit = False, True
            elif q in api.GRAD_ON:
                mode, explicit = True, True
            elif q in api.SET_GRAD:
                mode, explicit = const_bool(call_args[0].value if call_args else None), True
            else:
                last = (dotted(expr) or "").rsplit(".", 1)[-1]
                if last in _NEUTRAL_DECORATORS:
                    continue
                low = last.lower()
                if "grad" in low or "inference" in low or "differentiable" in low:
                    mode, explicit = None, True
        if mode is True and model.class_stack and node.name.value in _AUTOGRAD_FUNCTION_METHODS:
            cls = model.class_stack[-1]
            for b in cls.bases:
                name = (dotted(b.value) or "").rsplit(".", 1)[-1]
                if name.endswith(_FUNCTION_BASES):
                    return False, False  # custom autograd.Function: forward/backward run with grad off
        if mode is True and not explicit and node.name.value in _LIGHTNING_EVAL_STEPS:
            cls = model.method_class.get(id(node))
            if cls is not None and self._lightning_module(cls.name.value):
                return False, False  # Lightning's validation/test/predict loop: run without grad
        return mode, mode is True and not explicit

    def _lightning_module(self, name: str) -> bool:
        """Is the class ``name`` a LightningModule, through its bases (of this file or of the
        project's modules it imports: NeMo's ``ModelPT(LightningModule, ...)``)?"""
        return any(c == _LIGHTNING_MODULE for c, _info in class_chain(self.model.classes, name))

    def _class(self, node: cst.ClassDef) -> None:
        model = self.model
        for d in node.decorators:
            self.walk(d)
        for b in node.bases:
            self.walk(b)
        is_module = False
        for b in node.bases:
            q = model.qualname(b.value)
            if q in api.MODULE_BASES or (q or "").startswith("torch.nn."):
                is_module = True
            else:
                base = model.value_of(b.value)
                if base.kind == CLASS and base.params:
                    is_module = True
        saved_env, saved_kind = model.snapshot(), model.scope_kind
        model.restore({})
        model.scope_kind = "class"
        model.class_stack.append(node)
        table = model.class_tables.setdefault(node.name.value, {})
        model.walked_classes.add(node.name.value)
        if is_module:
            table["__module__"] = Value(CLASS)
        model.class_attrs.append(table)
        try:
            self._block(node.body)
        finally:
            model.class_stack.pop()
            model.class_attrs.pop()
            model.restore(saved_env)
            model.scope_kind = saved_kind
        model.bind_key(node.name.value, Value(CLASS, node=node, params=is_module or None))


    def _lambda(self, node: cst.Lambda) -> None:
        model = self.model
        saved = model.snapshot()
        self.walk(node.params)
        for p in _param_names(node.params):
            model.unbind(p)
        self.walk(node.body)
        model.restore(saved)



def _param_names(params: cst.Parameters) -> List[str]:
    out = []
    for p in list(params.params) + list(params.kwonly_params) + list(getattr(params, "posonly_params", ())):
        out.append(p.name.value)
    for p in (params.star_arg, params.star_kwarg):
        if type(p) is cst.Param:
            out.append(p.name.value)
    return out


def _summary(returned: List[Value]) -> Tuple[Value, ...]:
    """What a function returns, when every ``return`` agrees on its shape: a tensor that
    requires grad (a loss), a module, a tuple of such, ... (or nothing known)."""
    if not returned:
        return ()
    first = returned[0]
    if all(_same_shape(first, v) for v in returned[1:]) and first.kind not in ("unknown", "function", "class"):
        return (first,)
    return ()


def _same_shape(a: Value, b: Value) -> bool:
    if a.kind != b.kind:
        return False
    if a.kind == "tensor":
        return a.rg == b.rg
    if a.kind == "tuple":
        return len(a.items) == len(b.items) and all(_same_shape(x, y) for x, y in zip(a.items, b.items))
    return True
