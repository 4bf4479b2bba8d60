from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

import libcst as cst

from gradlint.model.names import dotted, node_children, read_names, rebound_names, subtree
from gradlint.rule import Rule, Severity

_MODULE_HOOKS = frozenset({
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "register_full_backward_pre_hook", "register_backward_hook",
})
_TENSOR_HOOKS = frozenset({"register_hook", "register_post_accumulate_grad_hook"})
# methods that run once per batch or step by contract
_PER_CALL = frozenset({"forward", "__call__", "training_step", "validation_step", "test_step", "predict_step"})
_GROW = frozenset({"append", "add", "insert"})  # a handle put into a container
_LOOPS = (cst.For, cst.While)
_COMPS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_DEPTH = 3  # how many callers up a receiver is followed through parameters
_OPAQUE = cst.Pass()  # stands for a lambda or a class body between a call and its function


class HookNeverRemoved(Rule):
    """
    ## What it does
    Finds a module hook (`register_forward_hook`, `register_forward_pre_hook`,
    `register_full_backward_hook`, ...) or a tensor hook on a parameter (`register_hook`)
    registered by code that runs again and again on the same module, whose handle is lost before
    the next registration: dropped (the call's result is not kept), bound to a name that nothing
    reads, or stored in an attribute that the next call overwrites.

    "Again and again on the same module" is one of:
    - a loop body, with a receiver that does not change from one iteration to the next (it
      reads no name the loop binds; a loop over `model.modules()` registers once per module and
      is not reported);
    - `forward` (or `__call__`, `training_step`, ...) on a module of `self` or of the file's
      globals: every call registers again;
    - a function or a class's `__init__` that receives the module as an argument and is called,
      in this file, in a loop or comprehension (or from `forward`) with the same module each
      time (a feature extractor or Grad-CAM object built per image on one shared network).

    Not reported: handles kept in a container attribute (`self.handles.append(h)`), returned,
    passed on, used as a context manager (`with m.register_forward_hook(h):`), removed in the
    same function (`try: ... finally: h.remove()`); an attribute handle read before it is
    overwritten (`if self.handle is None:`, `self.handle.remove()`, a method that removes it);
    registrations under a test of a flag or handle the function sets, or of `None`/`hasattr`;
    a loop that `break`s or `return`s after registering; hooks on a tensor made in the same
    iteration (`x.register_hook(...)` on an activation: the tensor dies with its hooks); receivers
    the model cannot tell to be a module (or, for `register_hook`, a parameter or leaf tensor).

    ## Why is this bad
    Silently wrong. A module keeps every hook registered on it until its handle's `remove()`
    is called. Registered once per step, per call or per object, the hooks pile up: each
    forward runs all of them (time grows with every step), each keeps alive whatever it closes
    over or stores (activations with their graphs, per-call tensors), and hooks that change
    inputs or outputs apply once per copy. Nothing raises; memory and time grow until the
    process dies or the results drift.

    ## Example
    ```python
    def forward(self, input_ids):
        scalings = self.router(input_ids)
        handles = [layer.register_forward_pre_hook(inject(scalings), with_kwargs=True)
                   for layer in self.layers]
        self.hook_handles = handles      # the previous call's handles are lost, never removed
        return self.decoder(input_ids)
    ```

    ## Use instead
    ```python
    def forward(self, input_ids):
        scalings = self.router(input_ids)
        handles = [layer.register_forward_pre_hook(inject(scalings), with_kwargs=True)
                   for layer in self.layers]
        try:
            return self.decoder(input_ids)
        finally:
            for handle in handles:
                handle.remove()
    ```
    Register hooks that must stay once (in `__init__`, or guarded by `if self.handle is None`),
    and keep the `RemovableHandle` of a hook that must go, to call `remove()` (or use it as a
    context manager) before the code registers again.

    ## References
    - https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_forward_hook
    - https://pytorch.org/docs/stable/generated/torch.Tensor.register_hook.html
    - https://github.com/huggingface/peft/pull/2761
    """

    code = "GL707"
    name = "hook-never-removed"
    severity = Severity.ERROR
    message = "{what}"
    hint = "keep the hook's handle and call `handle.remove()` before registering again (try/finally, or `with`), or register once"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        # id(call) -> (call, context, receiver kinds seen on each walk)
        self._calls: Dict[int, Tuple[cst.Call, Any, List[str]]] = {}
        self._order: List[int] = []
        self._module: Optional[cst.Module] = None
        self._parent: Dict[int, cst.CSTNode] = {}
        self._site_map: Optional[Dict[str, List[cst.Call]]] = None

    def visit_Module(self, node: cst.Module) -> None:
        self._module = node

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute:
            return
        attr = func.attr.value
        if attr not in _MODULE_HOOKS and attr not in _TENSOR_HOOKS:
            return
        model = self.model
        if model.scope.src is not None:
            return  # another module's code: its own file is the place
        v = model.value_of(func.value)
        if attr in _MODULE_HOOKS:
            kind = v.kind if v.kind in ("module", "unknown") else "other"
        else:  # a tensor hook persists on a parameter or a leaf made before the code repeats
            kind = "leaf" if v.kind == "tensor" and (v.is_param or (v.leaf is True and v.rg is True)) else "other"
        entry = self._calls.get(id(node))
        if entry is None:
            entry = self._calls[id(node)] = (node, model.here(), [])
            self._order.append(id(node))
        entry[2].append(kind)

    # ------------------------------------------------------------------ the file's syntax
    def _parents(self) -> None:
        stack: List[cst.CSTNode] = [self._module] if self._module is not None else []
        while stack:
            n = stack.pop()
            for c in node_children(n):
                self._parent[id(c)] = n
                stack.append(c)

    def _scope(self, node: cst.CSTNode) -> Tuple[Optional[cst.FunctionDef], List[cst.CSTNode]]:
        """The function that holds ``node`` (None: module level) and the nodes between them."""
        between = []
        a = self._parent.get(id(node))
        while a is not None:
            if type(a) is cst.FunctionDef:
                return a, between
            if type(a) in (cst.Lambda, cst.ClassDef):
                return None, [_OPAQUE]  # a lambda or class body: not followed
            between.append(a)
            a = self._parent.get(id(a))
        return None, between

    def _class_of(self, fn: cst.FunctionDef) -> Optional[cst.ClassDef]:
        p = self._parent.get(id(fn))
        while p is not None and type(p) in (cst.IndentedBlock, cst.SimpleStatementSuite):
            p = self._parent.get(id(p))
        return p if type(p) is cst.ClassDef else None

    # ------------------------------------------------------------------ the handle's fate
    def _fate(self, call: cst.Call, fn: Any) -> Optional[Tuple[str, cst.CSTNode]]:
        """How the handle is lost: ("dropped" | "unused" | "overwritten", where to report), or
        None when it is kept (stored, returned, passed on, removed)."""
        parent = self._parent.get(id(call))
        if type(parent) is cst.Expr:
            return "dropped", call
        if type(parent) is cst.Assign and len(parent.targets) == 1:
            target = parent.targets[0].target
            if type(target) is cst.Name:
                return self._local(target.value, fn, call)
            key = dotted(target)
            if key is not None and key.startswith("self.") and key.count(".") == 1:
                return ("overwritten", parent) if not self._attr_kept(key, fn, parent) else None
            return None
        if type(parent) is cst.Arg:
            grow = self._parent.get(id(parent))
            if type(grow) is cst.Call and type(grow.func) is cst.Attribute and grow.func.attr.value in _GROW \
                    and type(self._parent.get(id(grow))) is cst.Expr and type(grow.func.value) is cst.Name:
                return self._local(grow.func.value.value, fn, call)
        return None

    def _local(self, name: str, fn: Any, call: cst.Call) -> Optional[Tuple[str, cst.CSTNode]]:
        """A handle (or a list of handles) bound to a local name: lost when nothing reads the
        name but the container's own growth, or when it is only stored into an attribute that a
        later call overwrites."""
        body = fn if fn is not None else self._module
        store: Optional[cst.Assign] = None
        for n, parent in _names(body, self._parent):
            if n.value != name or _is_target(n, parent):
                continue
            if type(parent) is cst.Attribute and parent.value is n and parent.attr.value in _GROW \
                    and type(self._parent.get(id(parent))) is cst.Call:
                continue  # `handles.append(...)`
            if type(parent) is cst.Assign and parent.value is n and len(parent.targets) == 1 and store is None:
                key = dotted(parent.targets[0].target)
                if key is not None and key.startswith("self.") and key.count(".") == 1:
                    store = parent
                    continue
            return None  # read: removed, returned, passed on
        if store is not None:
            key = dotted(store.targets[0].target) or ""
            return ("overwritten", store) if not self._attr_kept(key, fn, store) else None
        return "unused", call

    def _attr_kept(self, key: str, fn: Any, store: cst.Assign) -> bool:
        """Is ``self.<attr>`` read in the function (besides the store), or in a method of its
        class that the function calls (`self.remove_hooks()`)?"""
        if fn is None:
            return True
        if _reads_attr(fn, key, store):
            return True
        cls = self._class_of(fn)
        if cls is None:
            return False
        body = cls.body.body if type(cls.body) is cst.IndentedBlock else ()
        methods = {s.name.value: s for s in body if type(s) is cst.FunctionDef}
        for n in subtree(fn):
            if type(n) is cst.Call and type(n.func) is cst.Attribute and dotted(n.func.value) == "self":
                m = methods.get(n.func.attr.value)
                if m is not None and m is not fn and _reads_attr(m, key, None):
                    return True
        return False

    # ------------------------------------------------------------------ repetition
    def _repeats(self, call: cst.Call, fn: Any, between: List[cst.CSTNode]) -> Optional[Tuple[str, cst.CSTNode]]:
        if self._guarded(between, fn):
            return None
        receiver = call.func.value  # type: ignore[attr-defined]
        reads = read_names(receiver)
        args = set().union(*(read_names(x.value) for x in call.args)) if call.args else set()
        # a loop of the same function whose iterations all register the same hook on the same
        # receiver (not under an `if` on what the iteration binds: `if epoch == 0:`)
        for i, a in enumerate(between):
            if isinstance(a, _LOOPS) and not _exits(a):
                bound = rebound_names(a.body) | (_target_names(a.target) if type(a) is cst.For else set())
                if reads and not (reads | args) & bound \
                        and not any(type(x) is cst.If and read_names(x.test) & bound for x in between[:i]):
                    return "on every iteration of this loop", a
        root = _root(receiver)
        if fn is None or root is None:
            return None
        cls = self._class_of(fn)
        params = _param_names(fn)
        if cls is not None and params and fn.name.value in _PER_CALL and self._self_rooted(root, fn, between):
            return f"on every call of `{fn.name.value}()`", fn.name
        if root in params and not (cls is not None and root == params[0]):
            return self._callers(fn, root, cls, 0, set())
        if root not in params and root not in rebound_names(fn) and root in self._globals():
            return self._callers(fn, None, cls, 0, set(), gname=root)
        return None

    def _self_rooted(self, root: str, fn: cst.FunctionDef, between: List[cst.CSTNode]) -> bool:
        params = _param_names(fn)
        self_name = params[0]
        if root == self_name or (root not in params and root not in rebound_names(fn) and root in self._globals()):
            return True
        for a in between:  # `for layer in self.layers:`
            if type(a) is cst.For and root in _target_names(a.target):
                r = _root(a.iter)
                return r == self_name
        return False

    def _guarded(self, between: List[cst.CSTNode], fn: Any) -> bool:
        """Under an `if` that may make the registration run once: a test of `None`, `hasattr`,
        or of an attribute the code sets (a flag, the handle itself)."""
        scope = fn if fn is not None else self._module
        assigned = {dotted(t.target) for n in subtree(scope) if type(n) is cst.Assign for t in n.targets}
        for a in between:
            if type(a) is cst.If:
                for n in subtree(a.test):
                    if type(n) is cst.Name and n.value in ("None", "hasattr", "getattr"):
                        return True
                    if type(n) in (cst.Attribute, cst.Name) and dotted(n) in assigned:
                        return True
        return False

    def _globals(self) -> Set[str]:
        g: Set[str] = set()
        for stmt in self._module.body if self._module is not None else ():
            if type(stmt) is cst.SimpleStatementLine:
                for s in stmt.body:
                    if type(s) is cst.Assign:
                        for t in s.targets:
                            g |= _target_names(t.target)
        return g

    def _callers(self, fn: cst.FunctionDef, param: Optional[str], cls: Optional[cst.ClassDef], depth: int,
                 seen: set, via: str = "", gname: str = "") -> Optional[Tuple[str, cst.CSTNode]]:
        """A call of ``fn`` in this file that runs repeatedly with the same module for
        ``param`` (None: a global receiver, any argument)."""
        if depth > _DEPTH or id(fn) in seen:
            return None
        seen.add(id(fn))
        if cls is not None and fn.name.value != "__init__":
            return None
        name = cls.name.value if cls is not None else fn.name.value
        offset = 1 if cls is not None else 0
        via = via or f"once per `{name}(...)` call"
        for site in self._sites(name):
            arg = _argument(site, fn, param, offset) if param is not None else site
            if arg is None:
                continue
            reads = read_names(arg) if param is not None else {gname}
            g, between = self._scope(site)
            if between and between[-1] is _OPAQUE:
                continue
            for a in between:
                if isinstance(a, _LOOPS) and not _exits(a):
                    bound = rebound_names(a.body) | (_target_names(a.target) if type(a) is cst.For else set())
                elif isinstance(a, _COMPS):
                    bound = _comp_targets(a)
                else:
                    continue
                if not reads & bound:
                    where = "" if depth == 0 else f", made through `{name}(...)`,"
                    return f"{via}{where} in a loop that passes the same module each time", site
            if g is None:
                continue
            gcls = self._class_of(g)
            gparams = _param_names(g)
            if gcls is not None and gparams and g.name.value in _PER_CALL and param is not None \
                    and _root(arg) == gparams[0]:
                where = "" if depth == 0 else f", made through `{name}(...)`,"
                return f"{via}{where} in `{g.name.value}()`, on every call with the same module", site
            if param is None:
                found = self._callers(g, None, gcls, depth + 1, seen, via, gname)
            elif type(arg) is cst.Name and arg.value in gparams and not (gcls is not None and arg.value == gparams[0]):
                found = self._callers(g, arg.value, gcls, depth + 1, seen, via)
            else:
                found = None
            if found is not None:
                return found
        return None

    def _sites(self, name: str) -> List[cst.Call]:
        if self._site_map is None:
            self._site_map = {}
            for n in subtree(self._module):
                if type(n) is cst.Call and type(n.func) is cst.Name:
                    self._site_map.setdefault(n.func.value, []).append(n)
        return self._site_map.get(name, [])

    def on_finish(self) -> None:
        if not self._order or not self.model.imports_torch() or self._module is None:
            return
        own = {n.name.value for n in subtree(self._module) if type(n) is cst.FunctionDef}
        self._parents()
        done = set()
        for cid in self._order:
            call, context, kinds = self._calls[cid]
            if id(call) not in self._parent or any(k == "other" for k in kinds):
                continue
            attr = call.func.attr.value  # type: ignore[attr-defined]
            if attr in own and "unknown" in kinds:
                continue  # the file's own method of that name may be meant
            fn, between = self._scope(call)
            if between and between[-1] is _OPAQUE:
                continue
            fate = self._fate(call, fn)
            if fate is None:
                continue
            rep = self._repeats(call, fn, between)
            if rep is None:
                continue
            how, where = fate
            when, repeat_node = rep
            if id(where) in done:
                continue
            done.add(id(where))
            lost = {"dropped": "its handle is dropped",
                    "unused": "its handle is never removed",
                    "overwritten": "the handle is stored where the next registration overwrites it, never removed"}[how]
            target = "tensor" if attr in _TENSOR_HOOKS else "module"
            phase = "forward" if "forward" in attr else "backward"
            what = (f"`{attr}` runs {when}, and {lost}: the hooks pile up on the same {target}, each one runs "
                    f"at every later {phase} and keeps what it holds alive")
            related = [(repeat_node, "what repeats the registration")]
            if how == "overwritten":
                related.insert(0, (call, "the hook registered"))
                stmt = self._parent.get(id(where))
                self.report(where, context=(stmt, (), context[2]), what=what, related=related)
            else:
                self.report(call.func.attr, context=(context[0], (), context[2]), what=what,  # type: ignore[attr-defined]
                            related=related)


# ---------------------------------------------------------------------------- syntax helpers
def _names(body: Any, parents: Dict[int, cst.CSTNode]) -> List[Tuple[cst.Name, Any]]:
    """Every Name read or bound under ``body`` (attribute names and keywords left out) with its parent."""
    out = []
    for n in subtree(body):
        if type(n) is cst.Name:
            p = parents.get(id(n))
            if type(p) is cst.Attribute and p.attr is n:
                continue
            if type(p) is cst.Arg and p.keyword is n:
                continue
            out.append((n, p))
    return out


def _is_target(n: cst.Name, parent: Any) -> bool:
    if type(parent) in (cst.AssignTarget, cst.For) and parent.target is n:
        return True
    return type(parent) in (cst.FunctionDef, cst.ClassDef, cst.Param)


def _reads_attr(fn: Any, key: str, store: Optional[cst.Assign]) -> bool:
    skip = id(store.targets[0].target) if store is not None else None
    return any(type(n) is cst.Attribute and id(n) != skip and dotted(n) == key for n in subtree(fn))


def _root(expr: Any) -> Optional[str]:
    """The name an expression starts from: `encoder.get_submodule(n).conv` -> `encoder`."""
    while True:
        t = type(expr)
        if t is cst.Name:
            return expr.value
        if t in (cst.Attribute, cst.Subscript):
            expr = expr.value
        elif t is cst.Call:
            if type(expr.func) is cst.Name and expr.func.value in ("getattr", "list", "next", "iter") and expr.args:
                expr = expr.args[0].value
            else:
                expr = expr.func
        else:
            return None


def _target_names(target: Any) -> Set[str]:
    out: Set[str] = set()
    stack = [target]
    while stack:
        t = stack.pop()
        if type(t) is cst.Name:
            out.add(t.value)
        elif type(t) in (cst.Tuple, cst.List):
            stack.extend(e.value for e in t.elements)
        elif type(t) is cst.StarredElement:
            stack.append(t.value)
    return out


def _comp_targets(comp: Any) -> Set[str]:
    out: Set[str] = set()
    f = comp.for_in
    while f is not None:
        out |= _target_names(f.target)
        f = f.inner_for_in
    return out


def _exits(loop: Any) -> bool:
    """Does the loop's own body `break` or `return` (it may register once)?"""
    stack = [(c, False) for c in node_children(loop.body)]
    while stack:
        n, inner = stack.pop()
        t = type(n)
        if t is cst.Return or (t is cst.Break and not inner):
            return True
        if t in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        stack.extend((c, inner or t in _LOOPS) for c in node_children(n))
    return False


def _param_names(fn: cst.FunctionDef) -> List[str]:
    p = fn.params
    return [x.name.value for x in list(p.posonly_params) + list(p.params) + list(p.kwonly_params)]


def _argument(site: cst.Call, fn: cst.FunctionDef, param: str, offset: int) -> Optional[cst.BaseExpression]:
    """The expression ``site`` passes for ``fn``'s parameter ``param`` (None: not found)."""
    if any((dotted(d.decorator) or "").endswith(("staticmethod", "classmethod")) for d in fn.decorators):
        return None
    names = [x.name.value for x in list(fn.params.posonly_params) + list(fn.params.params)][offset:]
    i = 0
    for a in site.args:
        if a.star:
            return None
        if a.keyword is not None:
            if a.keyword.value == param:
                return a.value
            continue
        if i < len(names) and names[i] == param:
            return a.value
        i += 1
    return None
