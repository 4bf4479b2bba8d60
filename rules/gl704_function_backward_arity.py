from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.names import dotted, node_children
from gradlint.rule import Rule, Severity

# torch.autograd.Function and its aliases (qualified names after the module's imports)
_FUNCTION_QUALNAMES = frozenset({
    "torch.autograd.Function",
    "torch.autograd.function.Function",
    "torch.autograd.function.InplaceFunction",
})
# a call spelled like this as the last statement does not return
_NORETURN_WORDS = ("raise", "error", "fail", "abort", "exit", "throw", "unreachable", "not_implemented")

# classification of one returned expression:
#   ("n", items) a tuple of len(items) gradients; items[i] is True when certainly not None,
#                None when it may be None, False for a literal None
#   None         unknown (stay quiet)
_Shape = Optional[Tuple[Optional[bool], ...]]


# calls that return a tuple of tensors (the model may take some for one tensor)
_TUPLE_RETURNING = frozenset("""chunk split unbind sort topk max min kthvalue mode median svd qr eig eigh
    lu slogdet frexp aminmax std_mean var_mean unique unique_consecutive tensor_split hsplit vsplit dsplit
    broadcast_tensors meshgrid grad lstsq histogram""".split())


class _FunctionClass:
    __slots__ = ("node", "forward", "backward", "setup_context")

    def __init__(self, node: cst.ClassDef) -> None:
        self.node = node
        self.forward: Any = None  # a FunctionDef, or None when it is not one the rule can read
        self.backward: Any = None
        self.setup_context: Optional[bool] = False  # None: bound some other way than a def


class _Returns:
    """The `return` statements of one backward() definition: per Return node, its statement
    context and the shape seen on each walk of the body."""

    __slots__ = ("order", "seen")

    def __init__(self) -> None:
        self.order: List[int] = []
        self.seen: Dict[int, Tuple[Any, Any, List[_Shape]]] = {}


class FunctionBackwardArity(Rule):
    """
    ## What it does
    Finds a custom `torch.autograd.Function` whose `backward` returns a different number of
    gradients than its `forward` takes inputs, or ends without a `return` on a path. Every input
    but `ctx` counts, a non-tensor one too (it needs a `None`); returning nothing is returning
    None, one gradient.

    It counts what each `return` of `backward` certainly returns: a tuple written out, a single
    tensor expression, `None`, or nothing at all. Trailing extra `None`s are accepted, as torch
    accepts them; an extra gradient that may be a tensor is not. When `forward` has parameters
    with defaults, the number of inputs is the number of arguments that the file's
    `Fn.apply(...)` calls pass; with `setup_context`, torch binds the defaults, so every
    parameter counts. A `forward(ctx, *args)` or `**kwargs`, keyword-only parameters, a return
    whose length the model does not know (`return grads`, `return helper(g)`) and a Function
    whose `forward` or `backward` is inherited from a class outside the file are not judged.

    ## Why is this bad
    The first `loss.backward()` through the Function raises
    `RuntimeError: function FnBackward returned an incorrect number of gradients (expected 2, got 1)`.
    A `backward` that computes its gradients and forgets the `return` fails the same way for a
    Function with two or more inputs; for a single input it silently returns None: the input
    gets no gradient and the parameters before it never train.

    ## Example
    ```python
    class Sign(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, training):
            return x.sign()

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output        # one gradient for two inputs
    ```

    ## Use instead
    ```python
        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, None  # one per forward input: None for `training`
    ```

    ## References
    - https://pytorch.org/docs/stable/notes/extending.html#extending-torch-autograd
    - https://pytorch.org/docs/stable/generated/torch.autograd.Function.backward.html
    """

    code = "GL704"
    name = "function-backward-arity"
    severity = Severity.ERROR
    message = "{what}"
    hint = "return one gradient per forward() input (None for inputs that need none), as a tuple, on every path"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._classes: Dict[str, _FunctionClass] = {}
        self._backwards: Dict[int, _Returns] = {}
        self._dupes: set = set()
        self._module: Optional[cst.Module] = None
        # class name -> {id(call): call} for `x.apply(...)` calls where the model knows that
        # `x` is the class (a class passed to a module or a trainer and stored on self)
        self._resolved: Dict[str, Dict[int, cst.Call]] = {}

    # ------------------------------------------------------------------ collection
    def visit_Module(self, node: cst.Module) -> None:
        self._module = node

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        bases = [b for b in node.bases if b.keyword is None]
        if len(bases) != 1 or any(b.keyword is not None and b.keyword.value == "metaclass" for b in node.bases):
            return
        base = bases[0].value
        parent: Optional[_FunctionClass] = None
        if self.model.qualname(base) not in _FUNCTION_QUALNAMES:
            key = dotted(base)
            parent = self._classes.get(key) if key is not None else None
            if parent is None:
                return
        info = _FunctionClass(node)
        if parent is not None:
            info.forward, info.backward, info.setup_context = parent.forward, parent.backward, parent.setup_context
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                name = stmt.name.value
                if name == "forward":
                    info.forward = stmt
                elif name == "backward":
                    info.backward = stmt
                elif name == "setup_context":
                    info.setup_context = True
            elif isinstance(stmt, cst.SimpleStatementLine):
                # `backward = staticmethod(_bw)`, `forward = ...`: not a definition we can read
                for small in stmt.body:
                    targets = small.targets if isinstance(small, cst.Assign) else (
                        [small] if isinstance(small, cst.AnnAssign) else [])
                    for t in targets:
                        n = t.target
                        if isinstance(n, cst.Name) and n.value in ("forward", "backward"):
                            setattr(info, n.value, None)
                        elif isinstance(n, cst.Name) and n.value == "setup_context":
                            info.setup_context = None
            elif not isinstance(stmt, cst.FunctionDef) and not isinstance(stmt, cst.ClassDef):
                info.forward = None  # methods defined under `if`/`try`: which one holds is unknown
        if node.name.value in self._classes or node.name.value in self._dupes:
            self._dupes.add(node.name.value)  # two classes of one name: calls cannot be told apart
        self._classes[node.name.value] = info
        if isinstance(info.backward, cst.FunctionDef):
            self._backwards.setdefault(id(info.backward), _Returns())

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "apply" or isinstance(func.value, cst.Name):
            return
        v = self.model.value_of(func.value)
        if v.kind == "class" and isinstance(v.node, cst.ClassDef) and v.node.name.value in self._classes:
            self._resolved.setdefault(v.node.name.value, {})[id(node)] = node

    def visit_Return(self, node: cst.Return) -> None:
        model = self.model
        if not model.function_stack:
            return
        returns = self._backwards.get(id(model.function_stack[-1]))
        if returns is None:
            return
        shape = self._shape(node.value)
        entry = returns.seen.get(id(node))
        if entry is None:
            entry = returns.seen[id(node)] = (node, (model.current_statement, (), model.expecting_error), [])
            returns.order.append(id(node))
        entry[2].append(shape)

    def _shape(self, value: Optional[cst.BaseExpression]) -> _Shape:
        if value is None or _is_none(value):
            return (False,)
        if isinstance(value, cst.Tuple):
            if any(isinstance(el, cst.StarredElement) for el in value.elements):
                return None
            return tuple(self._certainty(el.value) for el in value.elements)
        if isinstance(value, cst.List):
            return (True,)  # a list is one (wrong) gradient, not a sequence of them
        if isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)) and (
                value.func.value if isinstance(value.func, cst.Name) else value.func.attr.value) in _TUPLE_RETURNING:
            return None
        v = self.model.value_of(value)
        if v.kind == "tensor":
            return (self._certainty(value),)
        return None

    def _certainty(self, expr: cst.BaseExpression) -> Optional[bool]:
        """False: the literal None; True: certainly not None (a computed tensor); None: may be
        None (a name the model does not know, a grad_output that may be None)."""
        if _is_none(expr):
            return False
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.List, cst.Tuple)):
            return True
        v = self.model.value_of(expr)
        if v.kind == "tensor" and v.made != "fn_grad_output":
            return True
        return None

    # ------------------------------------------------------------------ judgement
    def on_finish(self) -> None:
        for name, info in self._classes.items():
            if name in self._dupes:
                continue
            if not isinstance(info.forward, cst.FunctionDef) or not isinstance(info.backward, cst.FunctionDef):
                continue
            if info.setup_context is None:
                continue
            if not _is_static(info.forward) or not _is_static(info.backward):
                continue
            arity = _arity(info.forward, info.setup_context)
            if arity is None:
                continue
            required, total = arity
            sites: List[Tuple[int, Any]] = []
            if required != total:
                sites = self._apply_sites(name)
            self._judge(name, info, required, total, sites)

    def _judge(self, name: str, info: _FunctionClass, required: int, total: int,
               sites: List[Tuple[int, Any]]) -> None:
        if required == total:
            candidates = [(total, None)]
        elif sites:
            candidates = sites
        else:
            candidates = [(n, None) for n in range(required, total + 1)]
        fwd = info.forward
        returns = self._backwards.get(id(info.backward)) or _Returns()
        for rid in returns.order:
            node, context, shapes = returns.seen[rid]
            if not shapes or any(s is None for s in shapes) or any(s != shapes[0] for s in shapes[1:]):
                continue
            shape = shapes[0]
            bad = [(n, site) for n, site in candidates if not _accepts(shape, n)]
            if not bad or (not sites and len(bad) != len(candidates)):
                continue
            n, site = bad[0]
            got = len(shape)
            if node.value is None:
                what = (f"backward() of custom Function `{name}` returns nothing here (None counts as one "
                        f"gradient) but forward() takes {n} inputs: torch raises RuntimeError "
                        f"(returned an incorrect number of gradients, expected {n}, got 1) at backward")
            else:
                what = (f"backward() of custom Function `{name}` returns {got} gradient{'s' if got != 1 else ''} "
                        f"but forward() takes {n} input{'s' if n != 1 else ''} (each input, a non-tensor one "
                        f"too, needs one; None for no gradient): torch raises RuntimeError (returned an "
                        f"incorrect number of gradients, expected {n}, got {got}) at backward")
            self.report(node, context=context, related=self._related(fwd, n, site), what=what)
        fall = _falls_off_at(info.backward)
        if fall is None:
            return
        # falling off the end returns None: one gradient
        bad = [(n, site) for n, site in candidates if n != 1]
        if bad and (sites or len(bad) == len(candidates)):
            n, site = bad[0]
            what = (f"backward() of custom Function `{name}` ends here without a return (None counts as one "
                    f"gradient) but forward() takes {n} inputs: torch raises RuntimeError (returned an incorrect "
                    f"number of gradients, expected {n}, got 1) at backward")
        elif not bad and _computes(info.backward):
            n, site = 1, None
            what = (f"backward() of custom Function `{name}` ends here without a return: it returns None, so the "
                    f"input gets no gradient (silently; nothing before the Function trains)")
        else:
            return
        self.report(fall, context=(fall, (), False), related=self._related(fwd, n, site), what=what)

    def _related(self, fwd: cst.FunctionDef, n: int, site: Any) -> List[Tuple[Any, str]]:
        rel: List[Tuple[Any, str]] = [(fwd, f"forward() takes {n} input{'s' if n != 1 else ''}")]
        if site is not None:
            rel.append((site, f"called with {n} inputs here; the error is raised at the backward() through it"))
        return rel

    def _apply_sites(self, name: str) -> List[Tuple[int, Any]]:
        """(number of inputs, call) for each `Name.apply(...)` call of the file, calls of names
        bound to `Name.apply` (`quant = Name.apply`; `self.quant = Name.apply` counts in its
        class only) and calls where the model knows the receiver is the class. Empty when one
        of them passes a number of inputs that is not known (`*args`, keywords)."""
        if self._module is None:
            return []
        # (scope, key) -> what it is bound to: {True} Name.apply only, {False} other values only
        aliases: Dict[Tuple[int, str], set] = {}
        calls: List[Tuple[int, cst.Call]] = []
        stack: List[Tuple[cst.CSTNode, int]] = [(self._module, 0)]
        while stack:
            n, scope = stack.pop()
            if isinstance(n, cst.ClassDef):
                scope = id(n)
            if isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None:
                targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
                mine = _is_apply(n.value, name)
                for t in targets:
                    key = dotted(t)
                    if key is not None:
                        aliases.setdefault((scope if key.startswith("self.") else 0, key), set()).add(mine)
            elif isinstance(n, cst.Call):
                calls.append((scope, n))
            stack.extend((c, scope) for c in node_children(n))
        out: List[Tuple[int, Any]] = []
        resolved = self._resolved.get(name, {})
        for scope, c in calls:
            key = dotted(c.func)
            bound = aliases.get((scope if key is not None and key.startswith("self.") else 0, key or ""), set())
            if True in bound and False in bound:
                return []  # a name bound to Name.apply and to something else: unknown
            if not (_is_apply(c.func, name) or True in bound or id(c) in resolved):
                continue
            if any(a.star or a.keyword is not None for a in c.args):
                return []  # a call whose number of inputs is unknown: other counts may be right there
            out.append((len(c.args), c))
        return out


def _is_apply(expr: Any, name: str) -> bool:
    return (isinstance(expr, cst.Attribute) and expr.attr.value == "apply"
            and (dotted(expr.value) or "").rsplit(".", 1)[-1] == name)


def _is_none(expr: Any) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _is_static(fn: cst.FunctionDef) -> bool:
    return any((dotted(d.decorator) or "").rsplit(".", 1)[-1] == "staticmethod" for d in fn.decorators)


def _arity(forward: cst.FunctionDef, setup_context: bool) -> Optional[Tuple[int, int]]:
    """(required, total) number of inputs of ``forward`` (ctx excluded), or None when unsure."""
    p = forward.params
    if isinstance(p.star_arg, cst.Param) or p.star_kwarg is not None \
            or p.kwonly_params or p.posonly_params:
        return None
    params = list(p.params)
    if not setup_context:
        if not params:
            return None
        params = params[1:]
    total = len(params)
    required = sum(1 for q in params if q.default is None)
    if setup_context:
        required = total  # Function.apply binds the defaults: every parameter is an input
    if total == 0:
        return None
    return required, total


def _accepts(shape: Tuple[Optional[bool], ...], n: int) -> bool:
    """Does torch accept this many returned gradients for ``n`` inputs? The same number, or more
    when every extra one is None."""
    m = len(shape)
    if m == n:
        return True
    if m < n:
        return False
    return not any(c is True for c in shape[n:])


def _body(block: Any) -> List[Any]:
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    if isinstance(block, cst.SimpleStatementSuite):
        return [block]
    return []


def _falls_off_at(fn: cst.FunctionDef) -> Any:
    """The statement after which ``fn`` certainly can end without a return (the last of a block
    that some path reaches), or None when no such path is certain: an `if` without `else`, a
    loop, a `try` are not followed."""
    body = _body(fn.body)
    if not body:
        return None
    if not _has_value_return(fn):
        # no `return value` anywhere: every path that does not raise returns None
        if all(_is_stub(s) for s in body) or _has_bare_return(fn):
            return None  # not implemented, or `return` on purpose
        last = body[-1]
        if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and _terminates_simple(last):
            return None
        return _falls(body) or last
    return _falls(body)


def _falls(stmts: List[Any]) -> Any:
    if not stmts:
        return None
    last = stmts[-1]
    if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        if _terminates_simple(last):
            return None
        return last
    if isinstance(last, cst.If):
        if last.orelse is None:
            return None  # the `if` may be a guard for a path that never happens
        hit = _falls(_body(last.body))
        if hit is not None:
            return hit
        orelse = last.orelse
        if isinstance(orelse, cst.If):
            return _falls([orelse])
        return _falls(_body(orelse.body))
    if isinstance(last, cst.With):
        return _falls(_body(last.body))
    return None


def _terminates_simple(line: Any) -> bool:
    for small in line.body:
        if isinstance(small, (cst.Return, cst.Raise)):
            return True
        if isinstance(small, cst.Assert) and isinstance(small.test, cst.Name) and small.test.value == "False":
            return True
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            callee = (dotted(small.value.func) or "").rsplit(".", 1)[-1].lower()
            if any(w in callee for w in _NORETURN_WORDS):
                return True
    return False


def _is_stub(stmt: Any) -> bool:
    """`pass`, `...`, a docstring, `raise`, `return`: a backward that is not implemented."""
    if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        for small in stmt.body:
            if isinstance(small, (cst.Pass, cst.Raise, cst.Return)):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.Ellipsis, cst.SimpleString,
                                                                        cst.ConcatenatedString)):
                continue
            return False
        return True
    return False


def _has_value_return(fn: cst.FunctionDef) -> bool:
    stack = node_children(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Return) and n.value is not None:
            return True
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(node_children(n))
    return False


def _has_bare_return(fn: cst.FunctionDef) -> bool:
    stack = node_children(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Return) and n.value is None:
            return True
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(node_children(n))
    return False


def _computes(fn: cst.FunctionDef) -> bool:
    """Does ``fn`` compute something (an assignment) before it falls off? (A body of only
    calls, such as a backward that prints or hooks, may return None on purpose.)"""
    stack = node_children(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            return True
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(node_children(n))
    return False
