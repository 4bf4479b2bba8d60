from __future__ import annotations

from typing import Any, Dict, List

import libcst as cst

from gradlint.model.names import dotted
from gradlint.rule import Rule, Severity


class OptimizerStaleParams(Rule):
    """
    ## What it does
    Finds a submodule or parameter replaced (`model.head = nn.Linear(...)`,
    `model.weight = nn.Parameter(...)`, `model.head.bias = nn.Parameter(...)`,
    `model[1] = nn.Linear(...)`) after an optimizer was built from that model's parameters, in
    the same function, or in methods of the file called one after the other on the same object
    (`trainer.setup()` builds the optimizer, `trainer.finetune()` swaps the head). Also a
    method of the file called after the optimizer was built that replaces a layer of its module
    (`model.resize_token_embeddings(n)` whose body binds `self.embed = nn.Embedding(...)`,
    reported at the call), and a name rebound to a new module (`model = Net()`) while the
    optimizer built from the old one is stepped afterwards (no optimizer built again, no other
    name holding the old module). The optimizer may be built from `model.parameters()` or from
    param groups whose parameters all come from that module
    (`[p for n, p in model.named_parameters() if ...]`).

    ## Why is this bad
    Silently wrong. The optimizer holds the parameter objects it was given; the new layer's
    parameters get gradients but are never updated (and the old ones, no longer used, are
    "updated" with no effect). `model.to(device)` after building the optimizer is fine in torch
    2.x (it keeps the same Parameter objects) and is not reported.

    ## Example
    ```python
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.fc = nn.Linear(512, 10)      # fine-tuning head swapped too late
    ```

    Where it is reported: at the replacement, with the optimizer's construction as a related
    location (a replacement made by a function called from the one that built the optimizer:
    at that call, the replacement being another related location). Either line can be the one to change (move the replacement before the optimizer, or
    build the optimizer after it); the replacement is the later statement and usually the one
    added without the optimizer in mind (fine-tuning code that swaps a head after the training
    setup), and it is where `add_param_group(...)` goes if the optimizer must stay.

    ## Use instead
    Replace layers first, then build the optimizer (or `optimizer.add_param_group(...)` for the
    new parameters).

    ## References
    - https://pytorch.org/docs/stable/optim.html#constructing-it
    """

    code = "GL604"
    name = "optimizer-stale-params"
    severity = Severity.ERROR
    message = "`{target}` is replaced after the optimizer was built from `{owner}.parameters()`: the new parameters are never updated"
    hint = "replace layers before building the optimizer, or add the new parameters with add_param_group()"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._owners: Dict[str, Any] = {}  # module key -> function where its optimizer was built
        # (module key, function, statement count, walk root, module, node, optimizer, events so far)
        # of each optimizer built
        self._builds: List[Any] = []
        self._pending: List[Any] = []
        self._renamed: List[Any] = []  # names rebound to a new module after an optimizer was built
        self._site_key: Any = None
        self._assigned: List[Any] = []  # (name, statement count, walk root) of each name bound

    def visit_Assign(self, node: cst.Assign) -> None:
        model = self.model
        function = model.function_stack[-1] if model.function_stack else None
        root = model.walk_root()
        value = model.value_of(node.value)
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self._assigned.append((t.target.value, model.tick, root))
        if value.kind == "optimizer" and any(b[6] is value for b in self._builds):
            return  # the same optimizer object bound again (`opt = fabric.setup_optimizers(opt)`): no new build
        if value.kind == "optimizer" and not isinstance(value.node, str) and _optimized(value) is not None:
            # param groups of one module's parameters: known by the module object
            self._builds.append((None, function, model.tick, root, _optimized(value), node, value, len(model.events)))
            return
        if value.kind == "optimizer" and isinstance(value.node, str):
            # the module object too: a method walked at a call (`trainer.setup()`) builds the
            # optimizer that another (`trainer.finetune()`) makes stale
            obj = _optimized(value)
            key: Any = value.node
            if obj is not None and _module_of(model, key) is not obj:
                key = None  # built in a helper from its parameter `model`: here that name is another object
            else:
                obj = obj or _module_of(model, key)
            if key is not None:
                self._owners[key] = function
            self._builds.append((key, function, model.tick, root, obj, node, value, len(model.events)))
            return
        if model.in_module_forward():
            return  # a layer made in forward() (walked at a call): GL603's finding
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Name):
                self._rebound(node, target.value, value, function, root)
                continue
            if not isinstance(target, (cst.Attribute, cst.Subscript)):
                continue
            owner = dotted(target.value)
            if owner is None:
                continue
            if isinstance(node.value, cst.Call):
                # a layer made here put into a part of the optimised module (`model.head.bias =
                # nn.Parameter(...)`, `model[1] = nn.Linear(...)`): stale for the whole module's optimizer
                owner = next((o for o in _prefixes(owner) if self._owners.get(o, False) is function), owner)
            elif isinstance(target, cst.Subscript):
                continue
            obj = _module_of(model, owner)
            if self._owners.get(owner, False) is not function and not any(
                    r is root and m is obj for _, _, _, r, m, _, _, _ in self._builds if m is not None):
                continue
            new_params = (value.kind == "module" and value.params is not False) or (
                value.kind == "tensor" and value.is_param
            )
            if new_params:
                args = dict(target=dotted(target) or owner, owner=owner)
                where, context = node, model.here()
                site = self._call_site(owner, function, root, obj)
                if site is not None:
                    # made in a function walked at a call from the one that built the optimizer
                    # (`model.resize_token_embeddings(n)`): the call is the line to move
                    where, context = site, (site,) + tuple(context[1:])
                    name = self._site_key or _receiver(site)
                    if name is not None and args["target"].startswith("self."):
                        args = dict(target=name + args["target"][4:], owner=name)
                inner = model.function_stack[-1].name.value if model.function_stack else None
                note = f" (by this call: in `{inner}()`, at the related location)" if where is not node and inner else ""
                self._pending.append((where, context, args, owner, function, model.tick, root, obj,
                                      (note, [(node, "the replacement, in the function called")] if where is not node else [])))

    def visit_Call(self, node: cst.Call) -> None:
        """``model.to_empty(device=...)`` where the code has just tested that the module's
        parameters are on the meta device (``if any(p.is_meta for p in model.parameters()):``):
        materializing meta parameters makes new Parameter objects (torch 2.13), so an optimizer
        built before holds the meta ones."""
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "to_empty"):
            return
        model = self.model
        owner = dotted(func.value)
        obj = _module_of(model, owner) if owner is not None else None
        if obj is None or not any(_meta_test(t, owner) for t in model.conditions):
            return
        function = model.function_stack[-1] if model.function_stack else None
        root = model.walk_root()
        if not any((o == owner and f is function) or (r is root and m is obj)
                   for o, f, _, r, m, _, _, _ in self._builds):
            return
        args = dict(target=owner + ".parameters()", owner=owner)
        where, context = node, model.here()
        site = self._call_site(owner, function, root, obj)
        if site is not None:
            where, context = site, (site,) + tuple(context[1:])
            name = self._site_key or owner
            args = dict(target=name + ".parameters()", owner=name)
        self._pending.append((where, context, args, owner, function, model.tick, root, obj,
                              (" (to_empty() makes new Parameter objects for the meta-device ones)",
                               [(node, "the to_empty() call")] if where is not node else [])))

    def _call_site(self, owner: str, function: Any, root: Any, obj: Any) -> Any:
        """The statement, in the function that built the optimizer (still being walked), whose
        call led here (None when the optimizer was built here, or in a function walked before)."""
        model = self.model
        self._site_key = None
        found = [(f, o) for o, f, _, r, m, _, _, _ in self._builds
                 if (o == owner and f is function) or (obj is not None and r is root and m is obj)]
        fs = [f for f, _ in found]
        if not fs or fs[-1] is function:
            return None
        self._site_key = found[-1][1]  # the module's name where the optimizer was built (None: not known)
        stack, inline = model.function_stack, model.inline_stack
        at = 0
        if fs[-1] is not None:
            ats = [i for i, f in enumerate(stack) if f is fs[-1]]
            if not ats:
                return None  # built in a function walked before (`trainer.setup()`)
            at = ats[-1] + 1
        if at >= len(stack):
            return None
        callee = stack[at]
        js = [j for j, f in enumerate(inline) if f is callee]
        return model.call_statements[js[-1]] if js and js[-1] < len(model.call_statements) else None

    def _rebound(self, node: cst.Assign, name: str, value: Any, function: Any, root: Any) -> None:
        """``model = Net()`` while an optimizer built here holds the parameters of the module the
        name held: a step of that optimizer after it (with no optimizer built again) updates the
        old module, which nothing holds any more, not the one the name now gives."""
        model = self.model
        old = _module_of(model, name)
        if old is None or value.kind != "module" or value.params is False or value is old \
                or not isinstance(node.value, cst.Call):
            return
        if any(model.value_of(a.value) is old for a in node.value.args):
            return  # a wrapper of the same module (`DataParallel(model)`), or a copy of it
        if any(_holds(v, old) for k, v in model.env.items() if k != name):
            return  # another name, an object's attribute or a list (`models.append(model)`) still holds it
        built = [(b, opt) for o, f, _, r, m, b, opt, _ in self._builds
                 if (o == name and f is function) or (r is root and m is old)]
        if built:
            self._renamed.append((node, model.here(), name, root, len(model.events), model.tick, built[-1]))

    def on_finish(self) -> None:
        for node, context, name, root, start, tick, (built, opt) in self._renamed:
            later = self.model.events[start:]
            if any(r is root and t > tick for _, _, t, r, _, _, _, _ in self._builds):
                continue  # an optimizer is built again after the rebinding
            bound = [dotted(t.target) for t in built.targets] if isinstance(built, cst.Assign) else []
            if any(n in bound and r is root and t > tick for n, t, r in self._assigned):
                bound = []  # the optimizer's name is bound again after: a step through it may be another's
            if not any(e.kind == "step" and (e.value is opt or (e.value is not None and e.value.kind == "unknown"
                                                                and e.key is not None and e.key in bound
                                                                and e.root is root))
                       for e in later):
                continue  # the old optimizer is not stepped after it (a module-level name read in a
                # function walked at a call is not known there: its name)
            self.report(node, context=context, related=[(built, "the optimizer built before: it holds the old parameters")],
                        target=name, owner=name)
        for node, context, args, owner, function, tick, root, obj, (note, inner) in self._pending:
            mine = [(t, b) for o, f, t, r, m, b, _, _ in self._builds
                    if (o == owner and f is function) or (obj is not None and r is root and m is obj)]
            if any(t > tick for t, _ in mine):
                continue  # the optimizer is built again after the replacement
            built = [b for t, b in mine if t <= tick]
            related = [(built[-1], "the optimizer built before: it holds the old parameters")] if built else []
            related += inner
            self.report(node, context=context, related=related, note=note, **args)


def _holds(value: Any, obj: Any, depth: int = 0) -> bool:
    """``value`` is ``obj`` or a list, tuple or dict value that has it among its elements."""
    if value is obj:
        return True
    if depth > 4 or getattr(value, "kind", None) != "tuple":
        return False
    return any(_holds(i, obj, depth + 1) for i in value.items)


def _receiver(statement: Any) -> Any:
    """``x`` of a statement ``x.method(...)`` or ``y = x.method(...)`` (None otherwise)."""
    body = getattr(statement, "body", None)
    small = body[0] if isinstance(body, (list, tuple)) and len(body) == 1 else None
    call = getattr(small, "value", None)
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
        return dotted(call.func.value)
    return None


def _meta_test(test: Any, owner: str) -> bool:
    """An ``if`` test that holds only when some parameter of ``owner`` is on the meta device:
    ``any(p.is_meta for p in owner.parameters())``, ``owner.weight.is_meta``."""
    if isinstance(test, cst.Attribute):
        key = dotted(test) or ""
        return test.attr.value == "is_meta" and key.startswith(owner + ".")
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "any" \
            and len(test.args) == 1 and isinstance(test.args[0].value, cst.GeneratorExp):
        gen = test.args[0].value
        elt, comp = gen.elt, gen.for_in
        it = comp.iter
        return (isinstance(elt, cst.Attribute) and elt.attr.value == "is_meta"
                and isinstance(comp.target, cst.Name) and dotted(elt.value) == comp.target.value
                and comp.inner_for_in is None and not comp.ifs
                and isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute)
                and it.func.attr.value in ("parameters", "buffers") and dotted(it.func.value) == owner)
    return False


def _prefixes(key: str) -> List[str]:
    """``model.head[0]`` -> ``model.head[0]``, ``model.head``, ``model`` (longest first)."""
    out = [key]
    while True:
        cut = max(key.rfind("."), key.rfind("["))
        if cut <= 0:
            return out
        key = key[:cut]
        out.append(key)


def _optimized(optimizer: Any) -> Any:
    """The module whose ``parameters()`` the optimizer was built from, when the model knows it:
    ``model.parameters()``, or param groups whose parameters all come from that one module
    (``[p for n, p in model.named_parameters() if ...]``; the groups' options aside)."""
    mods = [i.alias_of for i in optimizer.items if i.kind == "params" and i.alias_of is not None]
    if len(mods) == 1 and mods[0].kind == "module":
        return mods[0]
    owners = []
    for i in optimizer.items:
        if i.kind in ("scalar", "const"):
            continue  # a group's option (lr, weight_decay, a name)
        m = i.alias_of if i.kind == "params" else i.owner if i.kind == "tensor" else None
        if m is None or m.kind != "module":
            return None
        owners.append(m)
    return owners[0] if owners and all(m is owners[0] for m in owners) else None


def _module_of(model: Any, key: str) -> Any:
    """The module value ``key`` names now (None when it names no module the model knows)."""
    v = model.env.get(key)
    return v if v is not None and v.kind == "module" else None
