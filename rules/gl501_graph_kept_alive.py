from __future__ import annotations

from typing import Any, Dict, List, Optional

import libcst as cst

from gradlint.edits import replace
from gradlint.model.names import dotted, node_children, reads_key, subtree
from gradlint.model.torchapi import NOT_INPLACE
from gradlint.rule import Fix, Rule, Severity

_CODE = cst.Module([])


def _graph_values(v: Any) -> List[Any]:
    """The non-leaf tensors that require grad in ``v`` (leaves such as parameters hold no graph)."""
    if v.kind == "tensor":
        return [v] if v.rg is True and v.leaf is False else []
    if v.kind == "tuple":
        out: List[Any] = []
        for i in v.items:
            out.extend(_graph_values(i))
        return out
    return []


class GraphKeptAlive(Rule):
    """
    ## What it does
    Finds a graph-carrying tensor (a loss, a model output) accumulated into something that
    outlives the loop iteration: `total_loss += loss`, `losses.append(loss)`,
    `history[k] += loss * n`, `outputs.append({"loss": loss})`, `total = total + loss`, a running
    average (`avg = loss if avg is None else 0.9 * avg + 0.1 * loss`), also when the loss comes
    from a function or method of the same module that returns it.
    It reports accumulation into a number (`total = 0`) in any loop, and into a list or dict in
    a training loop (one that calls `backward()` or `optimizer.step()`); collecting outputs in a
    module's `forward()` is how a forward pass works and is not reported (unless they go into a
    class attribute, `Block.cache[i] = out`, which every call shares and nothing frees).
    Objects count: the state of an object the loop calls (`meter.update(loss)` whose `update`
    sums into `self.sum`, reported at the call when the argument is the loss the caller
    back-propagated, else at the sum), objects held by objects (`Trainer(model, criterion)`),
    instances called through `__call__`, a step function that back-propagates its loss and
    returns it to a caller that sums it (reported at that `return`), a logging record that holds
    the loss a function also returns on its own for `backward()` (`return loss, {"loss": loss}`,
    kept by the caller: reported at the record's entry), a buffer blended in place
    with a value of the graph (`self.running_mean.mul_(0.9).add_(0.1 * mean)` with grad on: the
    buffer joins the graph and chains every step), and a forward hook
    (`layer.register_forward_hook(self.save)`) that appends the hooked output to a list no code
    ever empties (a warning: the hook runs in its callers' grad mode).

    ## Why is this bad
    Silently wrong (memory). The accumulated tensor references the loss, and the loss references
    its whole graph, so every iteration's graph stays alive: without `backward()` all the saved
    activations too (2 MB after one iteration, 80 MB after 40 in a measured example), with
    `backward()` the graph nodes (about 11 per iteration). Memory grows until the process dies;
    summing tensors also costs time in every step.

    Not reported: `total += loss.item()`, `losses.append(loss.detach())`, accumulation under
    `torch.no_grad()` (also in a LightningModule's `validation_step`, `test_step` and
    `predict_step`, which Lightning runs without grad), and an accumulated loss that is
    back-propagated later in the same function, itself or through a loss computed from it after
    the loop (`loss.backward()`, Lightning's `self.manual_backward(loss)`: summing losses to call
    `backward()` once is deliberate), and a number summed in a method of an `nn.Module` over
    loops bounded by the module's own sizes (`for i in range(self.num_blocks)`), in no training
    loop: a cost or penalty term built as one graph, as a forward builds one.

    ## Example
    ```python
    total_loss = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss           # keeps every iteration's graph
    ```

    ## Use instead
    ```python
        total_loss += loss.item()    # a Python float
        losses.append(loss.detach()) # a tensor without history
    ```

    ## Fix safety
    Unsafe: the fix replaces `loss` by `loss.item()` (augmented assignment) or `loss.detach()`
    (stored in a container). It is right when the accumulator is only reported or logged; if the
    code later back-propagates through the accumulated value, or needs a tensor where it now
    gets a float, behaviour changes. Applied only with `--unsafe-fixes`.

    ## References
    - https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory
    """

    code = "GL501"
    name = "graph-kept-alive"
    severity = Severity.ERROR
    fixable = True
    message = "a graph-carrying tensor is accumulated into `{acc}`, which outlives the loop iteration: every iteration's graph stays in memory"
    hint = "accumulate `loss.item()` (a float) or `loss.detach()`"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._pending: List[Any] = []
        # id of a graph tensor a function walked at its call back-propagated and returned -> (the return, where)
        self._returned: Dict[int, Any] = {}
        # id of a graph tensor put in a dict literal by a function walked at its call -> (the
        # element, where, the function); of those, the ones the function also returned on their own
        self._recorded: Dict[int, Any] = {}
        self._logged_copy: Dict[int, Any] = {}

    def _candidate(self, node: cst.CSTNode, acc: Optional[str], value_node: cst.BaseExpression, item: bool) -> None:
        model = self.model
        if acc is None or not model.loops:
            return
        class_state = _class_attribute(model, acc)
        if not class_state and not model.defined_before_loop(acc):
            return
        if acc.endswith(".data"):
            # `x.data[i] = t`, `x.data += t`: `.data` is a new detached tensor at each read, the
            # write lands in x's storage and the graph stays on that temporary, which dies
            return
        if model.function_stack and model.function_stack[-1].name.value == "forward" and not class_state:
            # collecting a forward pass's outputs: the graph is meant to live until backward()
            # (not a class attribute, `Block.cache[i] = out`: state of the program, kept across calls)
            return
        values = _graph_values(model.value_of(value_node))
        if not values:
            return
        # a number accumulator (total = 0) only makes sense for reporting; anything else must be
        # in a training loop (one that calls backward()/step()) to be worth a finding
        numeric = model.lookup(acc.split(".")[0] if "." not in acc else acc).kind == "scalar"
        fix = None
        code = _CODE.code_for_node(value_node)
        if isinstance(value_node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            text = f"{code}.item()" if item else f"{code}.detach()"
            fix = Fix((replace(value_node, text),), safe=False,
                      description=f"use `{text}`")
        function = model.function_stack[-1] if model.function_stack else None
        # a sum over the module's own parts (`for i in range(self.num_blocks)`) in a method of an
        # nn.Module, in no training loop: a cost or penalty term built as one graph, as a forward
        # builds one (the loops of this function, all bounded by sizes of `self`)
        own = [l.node for l in model.loops if l.level == len(model.inline_stack)]
        structural = tuple(own) if numeric and own and _module_method(model, function) \
            and all(_over_own_sizes(n) for n in own) else None
        self._pending.append((node, model.here(), acc, values, fix, numeric, model.loops[-1].node,
                              model.walk_root(), len(model.events), model.frames[-1], function,
                              _handed_in(model, function, values), structural))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        target = node.target
        base = target.value if isinstance(target, cst.Subscript) else target
        self._candidate(node, dotted(base), node.value, item=not isinstance(target, cst.Subscript))

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        key = dotted(target)
        value = node.value
        if key is not None and isinstance(value, cst.IfExp):
            # `avg = loss if avg is None else 0.9 * avg + 0.1 * loss`: the branch that keeps `avg`
            value = next((b for b in (value.orelse, value.body) if _added_to(b, key) is not None), value)
        if key is not None and isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
            added = _added_to(value, key)
            if added is not None:
                self._candidate(node, key, added, item=added is value.right)
        elif isinstance(target, cst.Subscript):
            self._candidate(node, dotted(target.value), value, item=False)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend", "add", "insert") and node.args \
                and not self._own_method(func):
            arg = node.args[-1].value
            self._candidate(node, dotted(func.value), arg, item=False)
            if func.attr.value == "append":
                self._hook_keeps(node, dotted(func.value), arg)
        if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and not func.attr.value.startswith("_") \
                and func.attr.value not in NOT_INPLACE and node.args:
            self._state_written(node, func)

    def _own_method(self, func: cst.Attribute) -> bool:
        """``meter.add(loss)`` on an object of a class of the project that defines ``add`` itself:
        no container's method; its body, walked at the call, says what it keeps."""
        receiver = self.model.value_of(func.value)
        return self.model.resolve_method(receiver, func.attr.value) is not None

    def _hook_keeps(self, node: cst.Call, acc: Optional[str], arg: cst.BaseExpression) -> None:
        """``self.activations.append(output)`` in a method the class registers as a forward hook
        (``layer.register_forward_hook(self.save)``), of the hooked module's output itself, on a
        list nothing ever empties: every forward pass adds its output, with the graph of that
        forward when grad is on (a warning: the hook's grad mode is its callers')."""
        model = self.model
        if acc is None or not acc.startswith("self.") or acc.count(".") != 1 or not model.function_stack \
                or not model.imports_torch():
            return
        fn = model.function_stack[-1]
        cls = model.method_class.get(id(fn))
        params = [p.name.value for p in fn.params.params]
        if cls is None or len(params) != 4 or not isinstance(arg, cst.Name) or arg.value != params[3]:
            return
        if not _registered_hook(cls, fn.name.value) or _emptied(model, cls, acc[5:]):
            return
        self.report(node, acc=acc, severity=Severity.WARNING)

    def _state_written(self, node: cst.Call, func: cst.Attribute) -> None:
        """``self.running_mean.mul_(1 - m).add_(m * mean)`` with grad on, where ``mean`` carries
        the graph of this call: the object's plain tensor (a buffer) joins the graph, and every
        later call adds to it, so it holds the graphs of all the steps so far."""
        model = self.model
        receiver = func.value
        while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) \
                and receiver.func.attr.value.endswith("_") and receiver.func.attr.value not in NOT_INPLACE:
            receiver = receiver.func.value  # `buf.mul_(a).add_(b)`: both write `buf`
        key = dotted(receiver)
        if key is None or not key.startswith("self.") or ".data" in key or not model.function_stack \
                or model.grad_enabled is not True:
            return
        if "." in key[5:] or not _is_buffer(model, key[5:]):
            return
        values = [v for a in node.args for v in _graph_values(model.value_of(a.value))]
        if not values:
            return
        self.report(node, acc=key, severity=None if any(not v.probable for v in values) else Severity.WARNING)

    def visit_Dict(self, node: cst.Dict) -> None:
        model = self.model
        if not model.inline_stack or not model.function_stack:
            return
        for el in node.elements:
            if isinstance(el, cst.DictElement):
                for v in _graph_values(model.value_of(el.value)):
                    self._recorded[v.id] = (el.value, model.here(), model.function_stack[-1])

    def visit_Return(self, node: cst.Return) -> None:
        model = self.model
        if node.value is None or not model.inline_stack or not model.function_stack:
            return
        fn = model.function_stack[-1]
        given = {model.lookup(p.name.value).id for p in fn.params.params}
        parts = [e.value for e in node.value.elements] if isinstance(node.value, cst.Tuple) else [node.value]
        for part in parts:
            v = model.value_of(part)  # (a tensor returned itself, not one in a list it returns)
            if v.kind == "tensor" and _graph_values(v) and v.id in model.backwarded_deps and v.id not in given:
                # a graph this function made and back-propagated itself
                self._returned.setdefault(v.id, (node, model.here(), fn, part))

    def leave_Return(self, node: cst.Return) -> None:
        model = self.model
        if node.value is None or not model.inline_stack or not model.function_stack:
            return
        fn = model.function_stack[-1]
        if isinstance(node.value, cst.Tuple):
            # `return loss, logging_output` with `logging_output = {"loss": loss, ...}`: the record
            # is a copy for logging of the tensor returned on its own (for backward)
            items = [model.value_of(e.value) for e in node.value.elements]
            alone = {i.id for i in items if i.kind == "tensor" and i.rg is True and i.leaf is False}
            for i in items:
                if i.kind == "tuple" and i.keys is not None:
                    for v in _graph_values(i):
                        hit = self._recorded.get(v.id)
                        if v.id in alone and hit is not None and hit[2] is fn:
                            self._logged_copy[v.id] = hit

    def _returned_after_backward(self, values: List[Any], function: Any) -> Any:
        """``return loss`` of a step function that back-propagated ``loss`` itself, whose caller
        (``function``) accumulates what it returns (``tr_loss += self.training_step(batch)``):
        the caller has no use for that graph (its backward() is done), so the line to change is
        the return."""
        return next((self._returned[v.id] for v in values
                     if v.id in self._returned and self._returned[v.id][2] is not function), None)

    def on_finish(self) -> None:
        model = self.model
        training_loops = {loop for e in model.events if e.kind in ("backward", "step") for loop in e.loops}
        # statements whose accumulated values reach a backward() after their loop (through what
        # is computed from the accumulator: `loss = total / n; loss.backward()`), on any walk of it
        later = [e for e in model.events if e.kind == "backward" and e.value is not None and e.value.deps]
        backwarded = {id(p[0]) for p in self._pending
                      if any(p[6] not in e.loops and any(v.id in e.value.deps for v in p[3]) for e in later)}
        for node, context, acc, values, fix, numeric, loop, root, seq, frame, function, call, structural in self._pending:
            if structural is not None and not training_loops.intersection(structural):
                continue  # a cost or penalty term summed over the module's own parts (see _candidate)
            if ((root, acc) in model.backwarded_in if acc.isidentifier() else acc in model.backwarded_keys):
                continue  # the accumulated losses are back-propagated (a local: in the same function): deliberate
            if id(node) in backwarded or _propagated_after(model, values, loop, root, seq,
                                                           model.frame_reads.get((frame, acc))):
                continue  # ... or what is computed from them, once the loop is over (`loss = nll + penalty`)
            if _backward_after(model.events, loop, seq, function):
                continue  # summed over sub-batches or domains, back-propagated once after the loop
            if _over_structure(loop):
                continue  # a loop over parameters or submodules (a penalty term): bounded, one graph
            if loop not in training_loops and (not numeric or _returns(function, acc)):
                continue  # (a loss built as a sum and returned to the caller, which uses it)
            certain = any(not v.probable or v.id in model.backwarded for v in values)
            moved = self._returned_after_backward(values, function)
            related: List[Any] = []
            if call is not None:
                # `meter.update(loss)`: the accumulator is the callee's state, the graph is the
                # caller's argument; the call is the line to change (`meter.update(loss.item())`)
                related = [(node, "where the called function accumulates it")]
                node, context, fix = call[0], call[1], None
            elif any(v.id in self._logged_copy and v.id in model.backwarded_deps for v in values):
                # the kept record holds the back-propagated loss that a function returned both on
                # its own and in the record: the record's entry is the line to change
                el, context = next(self._logged_copy[v.id][:2] for v in values if v.id in self._logged_copy)
                related = [(node, "where the caller keeps the record")]
                code = _CODE.code_for_node(el)
                node, fix = el, Fix((replace(el, f"{code}.detach()"),), safe=False,
                                    description=f"store `{code}.detach()`")
            elif moved is not None:
                ret, context, part = moved[0], moved[1], moved[3]
                code = _CODE.code_for_node(part)
                related = [(node, "where the caller accumulates it")]
                node, fix = ret, Fix((replace(part, f"{code}.detach()"),), safe=False,
                                     description=f"return `{code}.detach()`")
            self.report(node, context=context, acc=acc, fix=fix, related=related,
                        severity=None if certain else Severity.WARNING)


def _registered_hook(cls: cst.ClassDef, name: str) -> bool:
    """Does a method of ``cls`` register its method ``name`` as a forward hook?"""
    for n in subtree(cls):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) \
                and n.func.attr.value == "register_forward_hook" and n.args \
                and dotted(n.args[0].value) == "self." + name:
            return True
    return False


def _emptied(model: Any, cls: cst.ClassDef, attr: str) -> bool:
    """Does code of the file empty or rebind ``<obj>.<attr>`` besides an ``__init__`` (a reset
    per call: ``self.acts = []``, ``self.acts.clear()``, ``del self.acts[:]``, ``pop``)? Through
    ``self`` in the methods of ``cls``, its bases and subclasses; through another name anywhere."""
    name = cls.name.value
    own = {name} | set(model.classes[name].bases if name in model.classes else ())
    own |= {c for c, info in model.classes.items() if name in info.bases}
    functions = [(m, c in own) for c, info in model.classes.items() for m in info.methods.values()]
    functions += [(f, False) for f in model.functions.values()]

    def hit(e: Any, mine: bool) -> bool:
        return isinstance(e, cst.Attribute) and e.attr.value == attr and (
            mine or not (isinstance(e.value, cst.Name) and e.value.value == "self"))

    for method, mine in functions:
        init = method.name.value == "__init__"
        for n in subtree(method):
            if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and not init:
                targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
                if any(hit(e, mine) for t in targets for e in subtree(t)):
                    return True
            elif isinstance(n, cst.Del):
                if any(hit(e, mine) for e in subtree(n)):
                    return True
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) \
                    and n.func.attr.value in ("clear", "pop", "remove") and hit(n.func.value, mine):
                return True
    return False


def _class_attribute(model: Any, acc: str) -> bool:
    """Is ``acc`` (``Block.cache``) an attribute that a class of the file binds in its body?"""
    parts = acc.split(".")
    info = model.classes.get(parts[0]) if len(parts) == 2 else None
    if info is None:
        return False
    for stmt in info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ():
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else \
                    [small.target] if isinstance(small, cst.AnnAssign) else []
                if any(isinstance(t, cst.Name) and t.value == parts[1] for t in targets):
                    return True
    return False


def _is_buffer(model: Any, name: str) -> bool:
    """Is ``self.<name>`` a buffer that the class of the method being walked (or a base of it)
    registers?"""
    cls = model.method_class.get(id(model.function_stack[-1]))
    todo, seen = [cls.name.value] if cls is not None else [], set()
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        if (c, name) in model.buffer_names:
            return True
        info = model.classes.get(c)
        todo.extend(info.bases if info is not None else ())
    return False


def _handed_in(model: Any, function: Any, values: List[Any]) -> Any:
    """The call statement (and where it is) that handed ``values``' graph to ``function``, a
    function walked at that call in the linted file, through an argument that is a tensor the
    caller back-propagated itself (a loss logged after its backward(): `meter.update(loss)`);
    None otherwise (a metric that computes a score from a model's output keeps its own state
    free of graphs: the line to change is its accumulation)."""
    if function is None or not model.inline_stack or model.inline_stack[-1] is not function \
            or model.call_sites or not model.call_statements:
        return None
    given = set()
    for p in function.params.params:
        for v in _graph_values(model.lookup(p.name.value)):
            if v.id in model.backwarded:
                given.add(v.id)
    if not given or not any(v.deps & given for v in values):
        return None
    chain = model.assumed_chain()
    stmt = model.call_statements[-1]
    at = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else stmt
    return at, (stmt, chain[:-1])


def _added_to(value: Any, key: str) -> Any:
    """In ``key + t``, ``t + key``, ``a * key + t`` (a running sum or average of ``key``): ``t``."""
    if not isinstance(value, cst.BinaryOperation) or not isinstance(value.operator, cst.Add):
        return None
    for kept, other in ((value.left, value.right), (value.right, value.left)):
        if isinstance(kept, cst.BinaryOperation) and isinstance(kept.operator, cst.Multiply):
            kept = kept.right if dotted(kept.right) == key else kept.left
        if dotted(kept) == key and not reads_key(other, key):
            return other
    return None


def _propagated_after(model: Any, values: List[Any], loop: Any, root: Any, seq: int, read: Any) -> bool:
    """Does a backward() (or autograd.grad) after the loop, in the same function, go through the
    graphs of the accumulated values, or follow the loop that the accumulator is read after (a
    graph mixed with an unknown value does not list all it goes through)?"""
    deps = set()
    for v in values:
        deps |= v.deps
    read_after = read is not None and read[1] > model.loop_exit_seq.get(id(loop), 1 << 30)
    for e in model.events:
        if e.kind != "backward" or e.seq < seq or e.root is not root or loop in e.loops or e.value is None:
            continue
        outs = e.value.items if e.value.kind == "tuple" else (e.value,)
        if any(o.kind == "tensor" and o.deps & deps for o in outs):
            return True
        if read_after:
            return True
    return False


def _backward_after(events: List[Any], loop: Any, seq: int, fn: Any) -> bool:
    """Does ``fn`` call backward() after ``loop`` (and no backward()/step() of its own in it)?
    (``autograd.grad`` of a penalty in a helper the loop calls does not make it a training loop.)"""
    after = False
    for e in events:
        if e.function is not fn or e.kind not in ("backward", "step"):
            continue
        if loop in e.loops:
            return False
        after = after or (e.kind == "backward" and e.seq >= seq)
    return after


_STRUCTURE = frozenset({"parameters", "named_parameters", "modules", "named_modules", "children",
                        "named_children", "buffers", "named_buffers"})


def _over_structure(loop: Any) -> bool:
    """``for name, p in model.named_parameters():``: the loop walks a model's parts, not steps."""
    it = getattr(loop, "iter", None)
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("enumerate", "list", "zip") \
            and it.args:
        it = it.args[0].value
    return isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in _STRUCTURE


def _module_method(model: Any, function: Any) -> bool:
    """Is ``function`` a method of a class the model knows to be an ``nn.Module``?"""
    cls = model.method_class.get(id(function)) if function is not None else None
    return cls is not None and model.class_tables.get(cls.name.value, {}).get("__module__") is not None


def _over_own_sizes(loop: Any) -> bool:
    """``for i in range(self.num_blocks)``, ``for j in range(len(self.paths))``,
    ``range(1, self.depth)``: a loop whose bounds are numbers and sizes of ``self``'s
    attributes (not a loader or a list of batches, which ``self`` may also hold)."""
    it = getattr(loop, "iter", None)
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range" and it.args):
        return False
    for a in it.args:
        v = a.value
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value == "len" and len(v.args) == 1:
            v = v.args[0].value
        if isinstance(v, cst.Integer):
            continue
        key = dotted(v)
        if key is None or not key.startswith("self."):
            return False
    return True


def _returns(function: Any, name: str) -> bool:
    """Does ``function`` return ``name`` (alone or in a tuple)?"""
    if function is None:
        return False
    stack = node_children(function.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue  # not the nested functions
        if isinstance(n, cst.Return) and n.value is not None:
            value = n.value
            parts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
            if any(dotted(p) == name for p in parts):
                return True
        stack.extend(node_children(n))
    return False
