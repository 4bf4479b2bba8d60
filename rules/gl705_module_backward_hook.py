from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.names import dotted, node_children, subtree
from gradlint.rule import Rule, Severity

# kinds of receivers that may be an nn.Module: a module the model knows, or a value it does not
# know (a parameter, `model.modules()` elements, attributes of other objects). A tensor has no
# `register_backward_hook` method (its hook is `register_hook`), nor has anything else torch
# makes; other kinds (numbers, strings, tuples, optimizers) certainly are no module.
_MAYBE_MODULE = ("module", "unknown", "instance")


class ModuleBackwardHook(Rule):
    """
    ## What it does
    Finds `module.register_backward_hook(hook)`, the deprecated non-full module backward hook.

    The receiver must be an `nn.Module` as far as the model knows, or a value it does not know
    (a function's parameter, an element of `model.modules()`, an attribute of another object):
    no tensor, optimizer or other torch object has a method of that name (a tensor's hook is
    `register_hook`, which is not reported), so in a file that imports torch the call is the
    Module method. Not reported: `register_full_backward_hook`; an instance of a class of the
    file that does not derive from a class outside it (it is no module); in a file that defines
    its own `register_backward_hook` method (a hook manager, a Module-like base class), calls
    on values the model does not know (they may be that method) and calls inside that method;
    the fallback branch of a feature check for the full hook (`if hasattr(m,
    "register_full_backward_hook"): ... else: m.register_backward_hook(h)`, or the handler of a
    `try` that calls the full hook), which only runs on torch < 1.8; a hook on a submodule
    whose forward never runs (its owner's class and this file only read its members, as a tied
    `F.linear(x, self.decoder.weight)` does: the hook never fires); a hook that reads neither
    gradient and returns nothing (`lambda *a: None`, a body of `pass`: a test that registers it
    only to find it). The message says what holds for the hook at hand: a hook that reads
    `grad_input` (or returns a replacement for it, or cannot be read) gets wrong values; one that
    reads only `grad_output` gets the right ones, and what remains is the deprecation (torch's
    `FutureWarning` at each call of a module whose forward has more than one op).

    ## Why is this bad
    The non-full hook is attached to the autograd node of the *last* operation of the module's
    forward, not to the module: its `grad_input` holds the gradients of that op's inputs, not of
    the module's inputs. For a module whose forward is more than one op (`x + y + z`, a Linear
    layer with a bias, an activation after a conv) `grad_input` has the wrong number of entries
    or the wrong tensors, and code that reads it computes silently wrong values. torch emits
    `FutureWarning: Using a non-full backward hook when the forward contains multiple autograd
    Nodes is deprecated ... This hook will be missing some grad_input` at the module call.

    ## Example
    ```python
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            layer.register_backward_hook(save_grad)
    ```

    ## Use instead
    ```python
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            layer.register_full_backward_hook(save_grad)
    ```
    The full hook receives one `grad_input` entry per module input (`None` for inputs that do
    not require grad) and `grad_output` per output. It cannot be combined with in-place changes
    of the module's inputs or outputs, and a hook that indexed the old op-specific `grad_input`
    (for `nn.Linear`: bias, input, weight) must be adapted.

    ## References
    - https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_backward_hook
    - https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook
    """

    code = "GL705"
    name = "module-backward-hook"
    severity = Severity.WARNING
    message = "`register_backward_hook` is the deprecated non-full module hook: {detail}"
    hint = "use `register_full_backward_hook`"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        # id(call) -> (call, context, receiver kinds seen on each walk)
        self._calls: Dict[int, Tuple[cst.Call, Any, List[str]]] = {}
        self._order: List[int] = []
        self._own_method = False
        # ids of calls in the fallback branch of a feature check for the full hook
        # (`if hasattr(m, "register_full_backward_hook"): ... else: <here>`, or the handler
        # of `try: m.register_full_backward_hook(h) except AttributeError: <here>`): code for
        # torch < 1.8 that never runs on a torch that has the full hook
        self._fallback: set = set()
        self._module: Optional[cst.Module] = None
        self._member_cache: Dict[Tuple[int, str], bool] = {}

    def visit_Module(self, node: cst.Module) -> None:
        self._module = node
        # a class of this file that defines its own register_backward_hook: calls on values the
        # model does not know may be that method
        for info in self.model.classes.values():
            if "register_backward_hook" in info.methods:
                self._own_method = True

    def visit_If(self, node: cst.If) -> None:
        if node.orelse is not None and _mentions_full_hook(node.test):
            self._fallback.update(_calls_in(node.orelse))

    def visit_Try(self, node: cst.Try) -> None:
        if node.handlers and _mentions_full_hook(node.body):
            for h in node.handlers:
                self._fallback.update(_calls_in(h))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "register_backward_hook":
            return
        model = self.model
        if any(f.name.value == "register_backward_hook" for f in model.function_stack):
            return  # an override that forwards to the base method: its callers are the place
        if id(node) in self._fallback:
            return
        receiver = model.value_of(func.value)
        kind = receiver.kind
        use = _hook_use(model, node)
        if use == "nothing":
            return  # a hook that reads nothing and returns nothing: nothing it gives can be wrong
        if kind == "instance" and not self._may_be_module(receiver.node):
            kind = "not-a-module"
        if kind == "unknown" and self._own_method:
            kind = "own"  # may be the file's own method
        if self._never_called(func.value):
            kind = "never-called"  # a submodule whose weights its parent uses (`F.linear(x, self.proj.weight)`)
        entry = self._calls.get(id(node))
        if entry is None:
            entry = self._calls[id(node)] = (node, model.here(), [], use)
            self._order.append(id(node))
        entry[2].append(kind)

    def _never_called(self, receiver: cst.BaseExpression) -> bool:
        """Is ``receiver`` (``self.proj``, ``model.encoder.proj``) a submodule that nothing calls:
        its owner is a module of a class the model knows, and every use of the attribute, in that
        class (and its bases) and in this file, reads a member of it (``self.proj.weight``) or
        binds it, never calls it, passes it on, or iterates the owner's children? Then its forward
        never runs, and neither does a backward hook on it."""
        if not isinstance(receiver, cst.Attribute):
            return False
        owner = self.model.value_of(receiver.value)
        if owner.kind not in ("module", "instance") or not isinstance(owner.node, str):
            return False
        trees = [self._module] if self._module is not None else []
        seen = set()
        todo = [owner.node]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            info = self.model.classes.get(name)
            if info is None:
                if name in ("Module", "object"):
                    continue
                return False  # a base the rule cannot read may call it
            trees.append(info.node)
            todo.extend(info.bases)
        attr = receiver.attr.value
        return all(_only_members(t, attr, self._member_cache) for t in trees)

    def _may_be_module(self, name: Any) -> bool:
        """Can an instance of the file's class ``name`` be an nn.Module? Only when a base
        class outside the file (other than ``object``) may make it one; the model already
        knows the classes that derive from torch.nn."""
        seen = set()
        todo = [name]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            info = self.model.classes.get(n) if isinstance(n, str) else None
            if info is None:
                return False  # not a class the rule can read: stay quiet
            if "register_backward_hook" in info.methods:
                return False  # its own method
            for b in info.bases:
                if b in self.model.classes:
                    todo.append(b)
                elif b not in ("object", "ABC", "Generic", "Protocol"):
                    return not self._own_method
        return False

    def on_finish(self) -> None:
        if not self.model.imports_torch():
            return  # another framework's Cell/Layer.register_backward_hook
        for cid in self._order:
            node, context, kinds, use = self._calls[cid]
            if not kinds or any(k not in _MAYBE_MODULE for k in kinds):
                continue
            related = []
            hook = _hook_definition(self.model, node)
            if hook is not None and use == "grad_input":
                related.append((hook, "this hook's grad_input covers the module's last op only"))
            self.report(node.func.attr, context=(context[0], (), context[2]), related=related, detail=_DETAIL[use])


_DETAIL = {
    "grad_input": ("its grad_input holds the gradients of the inputs of the module's last autograd op, not of the "
                   "module's inputs (for a forward of more than one op, entries are missing or wrong, silently)"),
    "grad_output": ("this hook reads only grad_output, which is right (the gradient of the module's output, of its "
                    "first output when it returns several), but torch warns (FutureWarning) at each call of a "
                    "module whose forward has more than one op, and will remove the non-full hook"),
    "effects": ("this hook reads neither grad_input nor grad_output, so no gradient it sees is wrong, but torch "
                "warns (FutureWarning) at each call of a module whose forward has more than one op, and will "
                "remove the non-full hook"),
}


def _hook_use(model: Any, call: cst.Call) -> str:
    """What the hook given to ``register_backward_hook`` does with its arguments ``(module,
    grad_input, grad_output)``: 'grad_input' when it reads grad_input, returns a value (which
    replaces grad_input), or cannot be read (a hook made by a factory, ``*args`` it reads);
    'grad_output' when it reads grad_output only; 'effects' when it reads neither but does
    something; 'nothing' for a hook whose body does nothing (``lambda *a: None``, ``pass``)."""
    args = [a for a in call.args if a.keyword is None and not a.star]
    if len(args) != 1 or len(call.args) != 1:
        return "grad_input"
    arg = args[0].value
    fn: Any = None
    bound = False
    if isinstance(arg, cst.Lambda):
        fn = arg
    else:
        v = model.value_of(arg)
        if v.kind == "function" and isinstance(v.node, (cst.FunctionDef, cst.Lambda)):
            fn = v.node
        elif isinstance(arg, cst.Attribute):
            fn = model.resolve_method(model.value_of(arg.value), arg.attr.value)
        # `self._log`: a method of a class, bound to its instance
        bound = isinstance(arg, cst.Attribute) and isinstance(fn, cst.FunctionDef) and id(fn) in model.method_class
    if fn is None:
        return "grad_input"
    params = fn.params
    positional = [p.name.value for p in list(getattr(params, "posonly_params", ())) + list(params.params)]
    if bound:
        decorators = {(dotted(d.decorator) or "") for d in fn.decorators}
        if "staticmethod" not in decorators:
            positional = positional[1:]
    star = params.star_arg.name.value if isinstance(params.star_arg, cst.Param) else None
    starkw = params.star_kwarg.name.value if params.star_kwarg is not None else None
    grad_in = positional[1] if len(positional) > 1 else None
    grad_out = positional[2] if len(positional) > 2 else None
    if len(positional) < 3 and star is None:
        return "grad_input"  # not a hook torch can call: leave it as it was
    body = fn.body
    names = {n.value for n in subtree(body) if isinstance(n, cst.Name)}
    if (star is not None and star in names) or (starkw is not None and starkw in names):
        return "grad_input"
    if isinstance(fn, cst.Lambda):
        returns = not (isinstance(body, (cst.Call, cst.Ellipsis)) or (isinstance(body, cst.Name) and body.value == "None"))
        does = not (isinstance(body, cst.Ellipsis) or (isinstance(body, cst.Name) and body.value == "None"))
    else:
        returns = any(isinstance(n, cst.Return) and n.value is not None
                      and not (isinstance(n.value, cst.Name) and n.value.value == "None")
                      for n in subtree(body, nested=False))
        does = not _empty_body(fn)
    if returns or (grad_in is not None and grad_in in names):
        return "grad_input"
    if grad_out is not None and grad_out in names:
        return "grad_output"
    return "effects" if does else "nothing"


def _empty_body(fn: cst.FunctionDef) -> bool:
    """A body of ``pass``, ``...``, a docstring, ``return``/``return None`` only."""
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [fn.body]
    for stmt in body:
        parts = stmt.body if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else None
        if parts is None:
            return False
        for p in parts:
            if isinstance(p, cst.Pass):
                continue
            if isinstance(p, cst.Expr) and isinstance(p.value, (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)):
                continue
            if isinstance(p, cst.Return) and (p.value is None or (isinstance(p.value, cst.Name) and p.value.value == "None")):
                continue
            return False
    return True


# the methods through which a module's children are reached and called by a loop
_CHILD_ITERATION = frozenset({"children", "named_children", "_modules"})


def _only_members(tree: Any, attr: str, cache: Dict[Tuple[int, str], bool]) -> bool:
    """In ``tree``, is every use of ``.attr`` a read of one of its members (``.attr.weight``,
    ``.attr.register_backward_hook(...)``) or a binding (``self.attr = nn.Linear(...)``), none a
    call (``.attr(x)``, ``.attr.forward(x)``), a pass-on (``nn.Sequential(self.attr)``, ``return
    self.attr``), and is no child of a module iterated (``self.children()``)?"""
    key = (id(tree), attr)
    got = cache.get(key)
    if got is not None:
        return got
    got = True
    stack: List[Tuple[Any, Any]] = [(tree, None)]
    while stack and got:
        n, parent = stack.pop()
        if isinstance(n, cst.Attribute):
            if n.attr.value in _CHILD_ITERATION:
                got = False
            elif n.attr.value == attr and not _member_or_binding(n, parent):
                got = False
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in (
                "forward", "__call__") and isinstance(n.func.value, cst.Attribute) and n.func.value.attr.value == attr:
            got = False
        elif isinstance(n, cst.SimpleString) and n.value.strip("\"'") == attr:
            got = False  # `getattr(self, "proj")`
        stack.extend((c, n) for c in node_children(n))
    cache[key] = got
    return got


def _member_or_binding(node: cst.Attribute, parent: Any) -> bool:
    if isinstance(parent, cst.Attribute) and parent.value is node:
        return True  # `.attr.weight` (a call of `.attr.forward` is found at the call)
    if isinstance(parent, cst.AssignTarget) and parent.target is node:
        return True
    if isinstance(parent, (cst.AnnAssign, cst.AugAssign)) and parent.target is node:
        return True
    return False


def _hook_definition(model: Any, call: cst.Call) -> Optional[Any]:
    args = [a for a in call.args if a.keyword is None and not a.star]
    if not args or not isinstance(args[0].value, cst.Name):
        return None
    return model.functions.get(args[0].value.value)


def _mentions_full_hook(node: Any) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.SimpleString) and "register_full_backward_hook" in n.value:
            return True
        if isinstance(n, cst.Attribute) and n.attr.value == "register_full_backward_hook":
            return True
        if isinstance(n, cst.CSTNode):
            stack.extend(node_children(n))
    return False


def _calls_in(node: Any) -> List[int]:
    out: List[int] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call):
            out.append(id(n))
        stack.extend(node_children(n))
    return out
