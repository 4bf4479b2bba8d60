from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Set, Tuple

import libcst as cst

from gradlint.edits import insert_after, insert_before, replace
from gradlint.model.names import dotted, node_children, read_names, rebound_names
from gradlint.model.values import INSTANCE, MODULE, OPTIMIZER, next_id
from gradlint.rule import Fix, Rule, Severity

_CODE = cst.Module([])


def _method_call(node: cst.BaseExpression, *names: str) -> Optional[cst.Call]:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in names:
        return node
    return None


class StateDictAlias(Rule):
    """
    ## What it does
    Finds a "snapshot" of a model's weights that is really a live view, kept while training
    goes on: `best = model.state_dict()`, `copy.copy(model.state_dict())`,
    `model.state_dict().copy()`, `dict(model.named_parameters())`, `list(model.parameters())`,
    stored in a variable, an attribute or a container, when an `optimizer.step()` follows (or
    the snapshot is taken inside the training loop).

    ## Why is this bad
    Silently wrong. `state_dict()` returns the parameter and buffer tensors themselves (detached
    views sharing storage, BatchNorm running statistics included); shallow copies of the dict or
    list copy the references, not the data. Every later `optimizer.step()` changes the
    "snapshot": the "best model" you restore or save is the last one.

    The use may come on a later pass of a loop: a snapshot taken before a loop whose body
    restores it into the same module on every pass (`for lr in lrs: model.load_state_dict(init)`
    then training) reloads the module's current weights from the second pass on. A snapshot
    kept on an object of the file (`self.best = self.model.state_dict()` in a callback, under a
    condition) counts as used when another method walked with the same object reads it after
    the steps (`on_train_end()` restoring it).

    Saving or loading at once (`torch.save(model.state_dict(), path)`,
    `other.load_state_dict(model.state_dict())`) is fine and not reported, and so is a snapshot
    of a part that the following steps' optimizer does not hold (`model.encoder.state_dict()`
    with `SGD(model.head.parameters())`). Steps and snapshots inside the file's helper functions
    called in the training loop count as the loop's own.

    An optimizer's `state_dict()` is a live view of its state (Adam's `exp_avg` and `step`
    tensors, updated in place). Not reported: one taken before the optimizer's first step
    (torch's optimizers but Adagrad make their state at the first step: the dict holds
    `'state': {}` and keeps it), unless a state was loaded into it before (into its name, in
    the same walk); a snapshot whose
    receiver's name is then bound to a new object (a resume test making its model and optimizer
    anew) when the later steps are reached through the new one (for a module, with an
    optimizer also made after it); a snapshot retaken after the steps of every pass of a loop
    and read after that loop (it holds the last weights, as a copy would).

    ## Example
    ```python
    for epoch in range(epochs):
        train_one_epoch(model, optimizer)
        if val_acc > best_acc:
            best_state = model.state_dict()    # follows every later step
    model.load_state_dict(best_state)          # restores the last weights, not the best
    ```

    ## Use instead
    ```python
    best_state = copy.deepcopy(model.state_dict())
    # or
    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ```

    ## Fix safety
    Safe: the fix wraps the snapshot in `copy.deepcopy(...)` (adding `import copy` where needed)
    or clones the tensors of `dict(named_parameters())` / `list(parameters())`. The snapshot
    then holds the same values at that moment and no longer changes; nothing else is affected.

    ## References
    - https://pytorch.org/tutorials/beginner/saving_loading_models.html
    - https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.state_dict
    """

    code = "GL401"
    name = "state-dict-alias"
    severity = Severity.ERROR
    fixable = True
    message = "`{expr}` is a live view of {what}, not a snapshot: the optimizer steps that follow change it too"
    hint = "take a real copy: `copy.deepcopy(model.state_dict())`"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._pending: List[Tuple[Any, ...]] = []
        self._module: Optional[cst.Module] = None
        # (frame, name) of a snapshot's receiver -> its later rebindings to a new object:
        # (events so far, first value id after it, branches and loops around it, the statement)
        self._rebound: Dict[Tuple[int, str], List[Tuple[Any, ...]]] = {}
        self._owners: Set[Tuple[int, str]] = set()
        self._first_id = 0
        self._loaded: Set[Tuple[Any, str]] = set()  # (walk, receiver) of each load_state_dict() so far

    def visit_Module(self, node: cst.Module) -> None:
        self._module = node

    def _snapshot(self, value: cst.BaseExpression) -> Optional[Tuple[str, str]]:
        """(description, replacement) when ``value`` is a live view of a module's tensors."""
        q = self.model.qualname
        code = _CODE.code_for_node
        inner: Optional[cst.BaseExpression] = None
        if _method_call(value, "state_dict"):
            inner = value
        elif isinstance(value, cst.Call) and q(value.func) in ("copy.copy",) and value.args \
                and _method_call(value.args[0].value, "state_dict"):
            inner = value.args[0].value
        elif _method_call(value, "copy") and _method_call(value.func.value, "state_dict"):  # type: ignore[attr-defined]
            inner = value.func.value  # type: ignore[attr-defined]
        if inner is not None:
            return code(value), self._deepcopy(code(inner))
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and len(value.args) == 1:
            arg = value.args[0].value
            if value.func.value == "dict" and _method_call(arg, "named_parameters", "named_buffers"):
                return code(value), "{n: p.detach().clone() for n, p in %s}" % code(arg)
            if value.func.value in ("list", "tuple") and _method_call(arg, "parameters", "buffers"):
                return code(value), "%s(p.detach().clone() for p in %s)" % (value.func.value, code(arg)) \
                    if value.func.value == "tuple" else "[p.detach().clone() for p in %s]" % code(arg)
        return None

    def _deepcopy(self, inner: str) -> str:
        return f"{self.model.imports.spelling('copy.deepcopy') or 'copy.deepcopy'}({inner})"

    def _import_edit(self, text: str) -> Any:
        """``import copy`` where isort would put it: among the standard library's ``import``
        lines in alphabetical order (after ``from __future__``), before the third-party ones."""
        if self.model.imports.spelling("copy.deepcopy") is not None or self._module is None:
            return None  # `copy` (or `deepcopy`) is imported already
        body = self._module.body
        imports = []  # (statement, top-level module, is a plain `import`)
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
            ):
                imports.append((stmt,) + _top_module(stmt.body[0]))
            elif isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(
                stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.SimpleString) and not imports:
                continue  # the module docstring
            else:
                break
        future = [i for i in imports if i[1] == "__future__"]
        stdlib = [i for i in imports if i[1] != "__future__" and i[1] in _STDLIB]
        plain = [i for i in stdlib if i[2]]
        later = [i for i in plain if i[1] > "copy"]
        if later:
            return insert_before(later[0][0], "import copy\n")
        if plain:
            return insert_after(plain[-1][0], "\nimport copy")
        if stdlib:
            return insert_before(stdlib[0][0], "import copy\n")
        others = [i for i in imports if i[1] != "__future__"]
        if others:  # only third-party imports: a standard-library group of its own above them
            return insert_before(others[0][0], "import copy\n\n")
        if future:
            return insert_after(future[-1][0], "\n\nimport copy")
        first = next((s for s in body if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                                              and isinstance(s.body[0], cst.Expr)
                                              and isinstance(s.body[0].value, cst.SimpleString))), None)
        return insert_before(first, "import copy\n") if first is not None else None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value == "load_state_dict":
            key = dotted(func.value)
            if key is not None:
                # (before a snapshot in the same walk: its state may be filled)
                self._loaded.add((self.model.walk_root(), key))

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self._owners:
            self._first_id = next_id()  # values made by this statement (its right side) come after

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._owners:
            self._note_rebinding(node)
        found = self._snapshot(node.value)
        if found is None:
            return
        receiver = _receiver(node.value)
        if receiver is not None and self.model.value_of(receiver).kind == INSTANCE:
            return  # an object of a class that is no nn.Module: its state_dict() is its own
        if receiver is not None and self._not_stepped_yet(self.model.value_of(receiver), dotted(receiver)):
            return
        expr, text = found
        edits = [replace(node.value, text)]
        imp = self._import_edit(text)
        if imp is not None:
            edits.append(imp)
        fix = Fix(tuple(edits), safe=True, description=f"use `{text}`")
        model = self.model
        seq = len(model.events)
        loops = tuple(l.node for l in model.loops)
        function = model.walk_root()
        target = node.targets[0].target
        # an element of a container (`states[k] = model.state_dict()`): the container's reads
        # are the snapshot's (a local dict handed to torch.save and dropped is no kept snapshot)
        key = dotted(target.value if isinstance(target, cst.Subscript) else target)
        snapshot = model.value_of(node.value)
        # `self.best = ...` on an instance of a class of the file: its other methods' reads of
        # `self.best` walked with the same object count (a callback's `on_train_end`)
        head, _, attr = (key or "").partition(".")
        obj = model.env.get(head) if attr else None
        where = (obj.id, attr) if obj is not None and obj.kind == INSTANCE else None
        if where is not None and model.loops and \
                len(model.conditions) + len(model.branches) <= model.loops[-1].branch_depth:
            # taken on every pass (`self.last = ...`): after the loop it shows the last weights,
            # which is what a later read of that attribute wants
            where = None
        owner = _owner(node.value)
        place = (tuple(model.conditions) + tuple(model.branches), loops, len(model.call_statements))
        # taken on every pass of the innermost loop around it (not under an `if` of that loop):
        # read after that loop, it holds the weights of the last pass, as a copy would
        every_pass = model.loops[-1].node if model.loops and \
            len(model.conditions) + len(model.branches) <= model.loops[-1].branch_depth else None
        if owner is not None and "." not in owner:
            self._owners.add((model.frames[-1], owner))
        self._pending.append((node, model.here(), expr, fix, seq, loops, function, key, snapshot.id,
                              model.frames[-1], owner, where, tuple(model.loops),
                              self.model.value_of(receiver).kind if receiver is not None else None, place,
                              every_pass))

    def _not_stepped_yet(self, value: Any, key: Optional[str]) -> bool:
        """An optimizer of torch made in this file that keeps no state until its first step
        (all but Adagrad, which fills its state when made), outside any loop, with no step
        before that could be its own and no ``load_state_dict`` into its name before: its
        ``state_dict()`` holds no state tensors, only copies of its settings (``'state': {}``),
        and no later step changes it."""
        model = self.model
        made = value.made_node if value.kind == OPTIMIZER else None
        if type(made) is not cst.Call or model.loops or key is None or model.root_text is None:
            return False
        root = model.walk_root()
        if (model.qualname(made.func) or "").rsplit(".", 1)[-1] in _EAGER_STATE or (root, key) in self._loaded:
            return False
        return not any(e.kind == "step" and e.root is root and not (e.value is not None and e.value.kind == OPTIMIZER
                                                 and e.value.made_node is not None and e.value.made_node is not made)
                       for e in model.events)

    def _note_rebinding(self, node: cst.Assign) -> None:
        """``optimizer = torch.optim.Adam(...)`` after ``state = optimizer.state_dict()``: the name
        of a snapshot's receiver bound to a value its right side does not build from the old one
        (a resumed run made anew, a second model of a comparison)."""
        model = self.model
        frame = model.frames[-1]
        names: List[str] = []
        todo = [t.target for t in node.targets]
        while todo:
            t = todo.pop()
            if type(t) is cst.Name:
                names.append(t.value)
            elif isinstance(t, (cst.Tuple, cst.List)):
                todo.extend(e.value for e in t.elements)
        for name in names:
            if (frame, name) in self._owners and name not in read_names(node.value):
                self._rebound.setdefault((frame, name), []).append((
                    len(model.events), self._first_id, tuple(model.conditions) + tuple(model.branches),
                    tuple(l.node for l in model.loops), model.current_statement))

    def on_finish(self) -> None:
        if not self.model.imports_torch():
            return  # another framework's .step()/.state_dict()
        model = self.model
        steps = [e for e in model.events if e.kind == "step"]
        for pending in self._pending:
            (node, context, expr, fix, seq, loops, function, key, vid, frame, owner, where, walks, kind, place,
             every_pass) = pending
            # a step later in the same function (or a function it calls), or in a loop around
            # the snapshot, of an optimizer that may hold the snapshot's tensors ...
            rebound = [r for r in self._rebound.get((frame, owner or ""), ()) if r[0] >= seq]
            later = [e for e in steps if ((e.seq >= seq and e.root is function) or set(e.loops) & set(loops))
                     and not _elsewhere(e, owner) and not _on_new_object(e, owner, kind, place, rebound)]
            if not later:
                continue
            # ... and the snapshot is used after such a step (restored, saved, compared); a step
            # earlier in the loop body runs after the snapshot only on the next iteration, so
            # only a read after the loop counts for it
            # (reads of this very object, or of its name in the same walk of the same function,
            # or of the attribute holding it on the same instance)
            if key is None:
                last_read, read_tick = 1 << 30, 1 << 30
            else:
                a, b = model.value_reads.get(vid, (-1, -1)), model.frame_reads.get((frame, key), (-1, -1))
                c = model.object_reads.get(where, (-1, -1)) if where is not None else (-1, -1)
                last_read, read_tick = max(a[0], b[0], c[0]), max(a[1], b[1], c[1])
            if not any((last_read > e.seq or _restored_each_pass(model, e, loops, key, frame, owner))
                       if e.seq >= seq else ((read_tick > _exit_seq(e, walks) and not _last_pass(e, walks, every_pass))
                                             or vid in model.carried_reads or _read_next_time(model, e, loops, key))
                       for e in later):
                continue
            what = "the optimizer's state (its tensors are updated in place)" if _optimizer(kind, owner) \
                else "the weights"
            self.report(node, context=context, expr=expr, fix=fix, what=what)


def _receiver(value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The object whose ``state_dict()`` / ``parameters()`` ... a snapshot expression calls."""
    while isinstance(value, cst.Call):
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in _VIEWS:
            return func.value
        if isinstance(func, cst.Attribute) and func.attr.value == "copy" and not value.args:
            value = func.value
        elif value.args:
            value = value.args[0].value
        else:
            return None
    return None


def _owner(value: cst.BaseExpression) -> Optional[str]:
    """The module whose tensors a snapshot expression views (``model.encoder`` in
    ``copy.copy(model.encoder.state_dict())``), when it is named."""
    receiver = _receiver(value)
    return dotted(receiver) if receiver is not None else None


# torch.optim classes that fill their per-parameter state when made, not at the first step
_EAGER_STATE = frozenset({"Adagrad"})

_VIEWS = frozenset(("state_dict", "named_parameters", "named_buffers", "parameters", "buffers"))


def _elsewhere(step: Any, owner: Optional[str]) -> bool:
    """Is the step's optimizer known to hold another part of the same object than the snapshot
    (``SGD(model.head.parameters())`` and ``model.encoder.state_dict()``)? Its steps then never
    change the snapshot's tensors."""
    opt = step.value.node if step.value is not None else None
    if not isinstance(opt, str) or owner is None or opt.split(".")[0] != owner.split(".")[0]:
        return False
    return not (opt + ".").startswith(owner + ".") and not (owner + ".").startswith(opt + ".")


def _on_new_object(step: Any, owner: Optional[str], kind: Optional[str], place: Tuple[Any, ...],
                   rebound: List[Tuple[Any, ...]]) -> bool:
    """Does the step run on objects made after the snapshot's receiver name was bound anew?
    The name was rebound in the snapshot's block (same branches, same loops), to a value not
    built from the old one, before the statement of that block that leads to the step, and
    that statement reaches the step through the name (``train(model, optimizer)``). For an
    optimizer's snapshot that is another optimizer; for a module's, the step's optimizer must
    also be made after the rebinding (one made before holds the old module's parameters)."""
    if not rebound or owner is None:
        return False
    conds, loops, depth = place
    if len(step.chain) <= depth:
        return False
    statement = step.chain[depth]  # the statement of the snapshot's block that leads to the step
    if owner not in read_names(statement):
        return False
    for seq, first_id, r_conds, r_loops, r_statement in rebound:
        if seq > step.seq or r_statement is statement or len(r_conds) != len(conds) \
                or any(a is not b for a, b in zip(r_conds, conds)) or r_loops != loops:
            continue
        if _optimizer(kind, owner) or (step.value is not None and step.value.kind == OPTIMIZER
                                 and step.value.id >= first_id):
            return True
    return False


def _optimizer(kind: Optional[str], owner: Optional[str]) -> bool:
    """Is a snapshot's receiver an optimizer: made by torch.optim, or, when the model does not
    know it, named like one (``optimizer``, ``opt``, ``self.optim``), as the model takes the
    ``step()`` of an unknown object so named for an optimizer's?"""
    if kind == OPTIMIZER:
        return True
    return kind not in (MODULE, INSTANCE) and (owner or "").rsplit(".", 1)[-1].lower().startswith("opt")


def _last_pass(step: Any, walks: Tuple[Any, ...], every_pass: Any) -> bool:
    """Is the snapshot taken on every pass of the innermost loop around both it and the step
    (the step earlier in the body)? Then after that loop it was taken after the last step:
    the weights of the last pass, as a copy would hold them."""
    shared = [loop for loop in walks if loop.node in step.loops]
    return every_pass is not None and bool(shared) and shared[-1].node is every_pass


def _exit_seq(step: Any, walks: Tuple[Any, ...]) -> int:
    """The statement count when the innermost loop around both the step and the snapshot ended
    (this walk of it: a loop of a method is walked at each call)."""
    shared = [loop for loop in walks if loop.node in step.loops]
    end = shared[-1].exit_tick if shared else None
    return end if end is not None else 1 << 30


def _read_next_time(model: Any, step: Any, loops: Tuple[Any, ...], key: Optional[str]) -> bool:
    """Does the body of the loop around both read ``key`` before rebinding it (so the next
    iteration reads the snapshot the previous one took)?"""
    shared = [loop for loop in step.loops if loop in loops]
    return bool(shared) and key in model.loop_first_reads.get(id(shared[-1]), ())


def _restored_each_pass(model: Any, step: Any, loops: Tuple[Any, ...], key: Optional[str], frame: int,
                        owner: Optional[str]) -> bool:
    """Is the step in a loop after the snapshot, of the same walk of the same function, whose
    body restores the snapshot into the module it was taken from on every pass (a statement
    not under an ``if``: ``for run in runs: model.load_state_dict(init); train(...)``) and never
    rebinds it? From the second pass on, the module reloads its own current weights: the reset
    does nothing. (Other reads of a live view at the top of each pass, `torch.save(state, ...)`,
    `target.load_state_dict(state)`, mean the current weights and are fine.)"""
    if key is None or owner is None:
        return False
    for node in step.loops:
        if node in loops or frame not in model.loop_frames.get(id(node), ()):
            continue
        if not isinstance(node, (cst.For, cst.While)) or _binds(node, key):
            continue
        for stmt in node.body.body:
            if isinstance(stmt, cst.SimpleStatementLine) and any(
                    _loads(n, owner, key) for s in stmt.body for n in node_children(s)):
                return True
    return False


def _loads(node: Any, owner: str, key: str) -> bool:
    """Is ``node`` the call ``<owner>.load_state_dict(<key>, ...)``?"""
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "load_state_dict" and dotted(node.func.value) == owner
            and bool(node.args) and node.args[0].keyword is None and dotted(node.args[0].value) == key)


def _binds(node: cst.CSTNode, key: str) -> bool:
    """Does the code under ``node`` bind ``key`` (a name or an attribute chain) anywhere?"""
    if "." not in key:
        return key in rebound_names(node)
    stack = [node]
    while stack:
        n = stack.pop()
        targets: List[Any] = []
        if type(n) is cst.Assign:
            targets = [t.target for t in n.targets]
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For)):
            targets = [n.target]
        elif type(n) is cst.AsName:
            targets = [n.name]
        while targets:
            t = targets.pop()
            if isinstance(t, (cst.Tuple, cst.List)):
                targets.extend(e.value for e in t.elements)
            elif type(t) is cst.StarredElement:
                targets.append(t.value)
            elif dotted(t) == key:
                return True
        stack.extend(node_children(n))
    return False


_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))


def _top_module(stmt: Any) -> Tuple[str, bool]:
    """The top-level module an import statement names, and whether it is a plain ``import``."""
    if isinstance(stmt, cst.Import):
        name = stmt.names[0].name
        is_plain = True
    else:
        if stmt.relative:
            return ".", False
        name = stmt.module
        is_plain = False
    while isinstance(name, cst.Attribute):
        name = name.value
    return (name.value if isinstance(name, cst.Name) else ""), is_plain
