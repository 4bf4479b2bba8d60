"""Calls as the walk drives them: the pass over a file's definitions, walking a function of the
file (or of another module of the project) at its call with the call's arguments, whether a call
is worth such a walk, and evaluating another module's top level (its assignments; its grad-mode
switches at import). A mixin of ``Walker`` (``walk.py``), which keeps the traversal itself."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import libcst as cst

from gradlint.model.calls import INLINE_DEPTH
from gradlint.model.env import FREED
from gradlint.model.names import DEFINITION_TYPES, call_facts, dotted, node_children, node_fact
from gradlint.model.instances import record_state
from gradlint.model.classes import ClassInfo
from gradlint.model.objects import harvest as _harvest, receiver_state
from gradlint.model.selfbinds import binds_own_attributes
from gradlint.model.syntax import literal_arguments
from gradlint.model.values import CONST, INSTANCE, MODULE, UNKNOWN, Value, join_values

# the walks one summary of another module's function may make (calls inside it)
SUMMARY_BUDGET = 20
# calls that make a function worth walking at each call site even with unknown arguments
_EVENT_CALLS = frozenset({"backward", "zero_grad", "clip_grad_norm_", "clip_grad_value_", "set_grad_enabled"})


class CallWalker:
    """Walker's part that drives calls (see the module docstring)."""

    model: Any
    muted: int
    _summarising: set
    _tainted: set

    def _definitions(self, body: Any, cls: Optional[cst.ClassDef] = None) -> None:
        """The pass over the file's definitions before the walk: functions, classes (their
        methods and base names) at module level, in ``if``/``try`` blocks, and nested classes,
        so that a call can reach a function or method defined later in the file."""
        model = self.model
        for stmt in body:
            t = type(stmt)
            if t is cst.FunctionDef:
                if cls is None:
                    model.functions.setdefault(stmt.name.value, stmt)
                else:
                    model.classes[cls.name.value].methods.setdefault(stmt.name.value, stmt)
                    model.method_class[id(stmt)] = cls
            elif t is cst.ClassDef:
                model.classes.setdefault(stmt.name.value, ClassInfo.of(stmt))
                self._definitions(stmt.body.body if type(stmt.body) is cst.IndentedBlock else (), stmt)
            elif t is cst.If and cls is None:
                self._definitions(stmt.body.body, None)
                orelse = stmt.orelse
                while orelse is not None:
                    self._definitions(orelse.body.body, None)
                    orelse = orelse.orelse if type(orelse) is cst.If else None
            elif t in (cst.Try, cst.With) and cls is None:
                self._definitions(stmt.body.body, None)

    def _walk_callee(self, fn: cst.FunctionDef, call: cst.Call, args: List[Value], receiver: Optional[Value],
                     receiver_key: Optional[str]) -> Optional[Value]:
        """Walk ``fn``'s body at this call with the call's arguments (rules see its statements
        with these values): returns what it returns, and applies its effects here: attributes
        it binds on the receiver (``self.hidden = out``), graphs its ``backward()`` frees, and its
        training events (logged as it runs, so a loop that calls ``train_step()`` is a training
        loop)."""
        model = self.model
        if (fn in model.inline_stack or fn in model.function_stack or len(model.inline_stack) >= INLINE_DEPTH
                or model.inline_budget <= 0 or self._is_generator(fn)):
            if not self._is_generator(fn) and self._clearing(fn.name.value) \
                    and not (receiver is not None and fn.name.value == "zero_grad"):
                # not walked here (too deep), but what it runs clears gradients: the loop that
                # calls it clears them (`self.mp_trainer.zero_grad()` of a helper over the
                # parameters); a method named zero_grad is logged as such by the caller
                model.log("zero_grad", None, call)
            return None
        if id(fn) in model.fn_scope and receiver is None and not self.muted and receiver_key is None \
                and all(a.kind in (UNKNOWN, CONST, "scalar") for a in args) \
                and not self._eventful(fn.name.value) and not self._reads_module_values(fn):
            return self._summarised(fn, call, args)
        if not self._worth_walking(fn, args, receiver):
            return None
        return self._walk_body(fn, call, args, receiver, receiver_key)

    def _reads_module_values(self, fn: cst.FunctionDef) -> bool:
        """Does ``fn`` name a value its module binds at top level (``W`` of ``W = torch.randn(...)``)?
        Then its walk here knows more than its own module's lint does: it is walked in full."""
        scope = self.model.fn_scope.get(id(fn))
        if scope is None or not scope.assigned:
            return False
        memo = self._memo_for(fn)
        names = memo.get(("names", id(fn)))
        if names is None:
            names = memo[("names", id(fn))] = {n.value for n in _walk_names(fn.body)}
        return not names.isdisjoint(scope.assigned)

    def _summarised(self, fn: cst.FunctionDef, call: cst.Call, args: List[Value]) -> Optional[Value]:
        """A function of another module called with nothing the model knows (no argument, no
        receiver, no training event): what it returns, from one walk per process (muted, grad
        on by assumption, from a fresh call depth and budget, so the result does not depend on
        which file asked first), made anew at this call's grad mode: as a function of the
        file is summarised by its walk at its definition. Findings in its body with unknown
        arguments are its own module's lint's."""
        model = self.model
        memo = self._memo_for(fn)
        key = ("summary", id(fn))
        if key not in memo:
            if fn in self._summarising:
                self._tainted.update(self._summarising)  # a cycle: not kept (order-dependent)
                return None
            saved = (model.grad_enabled, model.grad_assumed, model.grad_off_site, model.inline_stack,
                     model.function_stack, model.inline_budget)
            model.grad_enabled, model.grad_assumed, model.grad_off_site = True, True, None
            model.inline_stack, model.function_stack, model.inline_budget = [], [], SUMMARY_BUDGET
            self.muted += 1
            self._summarising.add(fn)
            try:
                out = self._walk_body(fn, call, args, None, None)
            finally:
                self._summarising.discard(fn)
                self.muted -= 1
                (model.grad_enabled, model.grad_assumed, model.grad_off_site, model.inline_stack,
                 model.function_stack, model.inline_budget) = saved
            if fn in self._tainted:
                self._tainted.discard(fn)
            else:
                memo[key] = out
        else:
            out = memo[key]
        if out is None:
            return None
        if out.kind == CONST:
            return Value(CONST)
        return model._instantiate(out)

    def _walk_body(self, fn: cst.FunctionDef, call: cst.Call, args: List[Value], receiver: Optional[Value],
                   receiver_key: Optional[str]) -> Optional[Value]:
        model = self.model
        keys: Dict[str, Optional[str]] = {}
        env = model.call_env(fn, call, args, receiver, keys)
        if env is None:
            return None
        receiver_state(model.env, env, receiver, receiver_key, fn)
        record_state(model, env, receiver, fn)
        model.inline_budget -= 1
        mode, assumed = self._function_grad_mode(fn)
        off_site = model.grad_off_site
        if assumed:
            mode, assumed = model.grad_enabled, model.grad_assumed
            if mode is False and off_site is None:
                off_site = model.current_statement  # the call made with grad off
        else:
            off_site = None  # the function sets its own mode
        freed = model.env.get(FREED)
        if freed is not None:
            env[FREED] = freed
        me = fn.params.params[0].name.value if receiver_key is not None and fn.params.params else None
        bound = dict(keys, **{me: receiver_key}) if me is not None else keys
        model.argument_state(bound, env)
        frozen_in = _frozen_for_call(model, bound)  # (seen from the caller's scope)
        saved = (model.env, model._memo, model.scope_kind, model.grad_enabled, model.grad_assumed,
                 model.current_statement, model.loop_depth, model._dotted_keys, model.grad_off_site)
        model.grad_off_site = off_site
        model.restore(env)
        model._memo = {}
        model.scope_kind = "function"
        model.grad_enabled, model.grad_assumed = mode, assumed
        model.call_statements.append(model.current_statement)
        model.inline_literals.append((fn, literal_arguments(fn, call, receiver is not None and not _static(fn))))
        model.frame_keys.append((False, model.frame_names(fn, keys, receiver, receiver_key)))
        model.inline_stack.append(fn)
        model.function_stack.append(fn)
        model.returns.append([])
        model.frame_count += 1
        model.frames.append(model.frame_count)
        pushed = model.enter_class_of(fn)
        for key in frozen_in:
            model.freeze(key)  # `soft_update(target, ...)` of a target the caller froze
        frozen_before = len(model.freezes)
        try:
            self._block(fn.body)
            end = model.env
        finally:
            model.frames.pop()
            model.leave_class_of(pushed)
            returned = model.returns.pop()
            model.function_stack.pop()
            model.inline_stack.pop()
            model.inline_literals.pop()
            model.frame_keys.pop()
            model.call_statements.pop()
            (model.env, model._memo, model.scope_kind, model.grad_enabled, model.grad_assumed,
             model.current_statement, model.loop_depth, model._dotted_keys, model.grad_off_site) = saved
        cls = model.method_class.get(id(fn))
        if cls is not None and cls.name.value not in model.walked_classes:
            # a method of a class further down the file: what it binds on self is known
            _harvest(fn, end, model.class_tables.setdefault(cls.name.value, {}))
        if receiver is not None and fn.name.value == "__init__" and fn.params.params:
            me = fn.params.params[0].name.value
            if env.get(me) is receiver:  # what a construction's `__init__` bound on self (calls._construct)
                n = len(me) + 1
                model.init_attrs = {k[n:]: v for k, v in end.items()
                                    if k.startswith(me + ".") and "." not in k[n:] and "[" not in k[n:]}
                model.init_self = end.get(me)
        # effects on the caller: attributes bound on the receiver, graphs freed
        if receiver is not None and receiver_key is not None and fn.params.params:
            me = fn.params.params[0].name.value + "."
            for k, v in end.items():
                if k.startswith(me):
                    model.bind_key(receiver_key + "." + k[len(me):], v)
        model.apply_argument_writes(fn, keys, end)
        _frozen_by_call(model, model.freezes[frozen_before:], bound)
        if FREED in end:
            model.env[FREED] = end[FREED]
        if not returned:
            return Value(CONST) if _falls_off(fn) else None
        return join_values(returned)

    def _walk_statement(self, stmt: Any) -> None:
        """One statement of another module, run here (an import's effect on grad mode)."""
        model = self.model
        prev = model.current_statement
        model.current_statement = stmt
        model.tick += 1
        try:
            self.walk(stmt)
        finally:
            model.current_statement = prev

    def _module_values(self, scope: Any) -> Dict[str, Value]:
        """What another module's top-level assignments bind, evaluated in order in its scope
        (only assignment lines: no loop, ``if`` or call statement of it runs), with the rules
        muted and the training events it logs dropped."""
        model = self.model
        body = scope.src.module.body if scope.src is not None and scope.src.module is not None else ()
        lines = [s for s in body if type(s) is cst.SimpleStatementLine
                 and all(type(x) in (cst.Assign, cst.AnnAssign, cst.AugAssign) for x in s.body)]
        if not lines:
            return {}
        saved = (model.env, model._memo, model.scope_kind, model.grad_enabled, model.grad_assumed,
                 model.current_statement, model.loop_depth, model._dotted_keys, model.grad_off_site,
                 model.loops, model.inference, model.function_stack, model.returns, len(model.events))
        scoped = model.enter_scope(scope)
        model.env, model._memo, model._dotted_keys = {}, {}, 0
        model.scope_kind = "function"  # names not bound here are its globals (imports.py)
        model.grad_enabled, model.grad_assumed, model.grad_off_site = True, False, None
        model.loop_depth, model.loops, model.inference = 0, [], False
        model.function_stack, model.returns = [], []
        self.muted += 1
        try:
            self._block(lines)
            return {k: v for k, v in model.env.items() if "." not in k and "[" not in k}
        finally:
            self.muted -= 1
            model.leave_scope(scoped)
            (model.env, model._memo, model.scope_kind, model.grad_enabled, model.grad_assumed,
             model.current_statement, model.loop_depth, model._dotted_keys, model.grad_off_site,
             model.loops, model.inference, model.function_stack, model.returns, n_events) = saved
            del model.events[n_events:]

    def _worth_walking(self, fn: cst.FunctionDef, args: List[Value], receiver: Optional[Value]) -> bool:
        """Would walking ``fn`` at this call tell more than its own walk did? Yes when an argument
        is something the model knows (a tensor, a module, an optimizer, ...), when
        the call is made at module level (a script's `main()`, which may use what is defined
        after it), or when ``fn`` holds training events (a loop calling it is a training loop)."""
        model = self.model
        if model.scope_kind == "module" and not model.function_stack:
            return True
        cls = model.method_class.get(id(fn))
        if cls is not None and cls.name.value not in model.walked_classes and fn.name.value == "__init__":
            return True  # an instance of a class further down: its attributes
        if any(a.kind not in (UNKNOWN, CONST, "scalar") for a in args):
            return True
        if id(fn) in model.fn_scope:
            return True  # a function of another module: no walk at its definition summarised it
        if receiver is not None and receiver.kind == INSTANCE:
            return True  # `trainer.setup()`: the attributes it binds are the object's from then on
        if receiver is not None and receiver.kind in (MODULE, INSTANCE) \
                and binds_own_attributes(fn, self._binds_cache):
            return True  # `self.build()`: its effects on the object
        return self._eventful(fn.name.value)

    def _memo_for(self, fn: Any) -> Dict[Any, Any]:
        scope = self.model.fn_scope.get(id(fn))
        return scope.src.memo if scope is not None and scope.src is not None else self._called_memo

    def _is_generator(self, fn: Any) -> bool:
        memo = self._memo_for(fn)
        hit = memo.get(("generator", id(fn)))
        if hit is None:
            hit = memo[("generator", id(fn))] = _is_generator(fn)
        return hit

    def _graph(self) -> Dict[str, list]:
        """The file's functions and methods (and those of the modules its walk has met) by name;
        the answers below are kept until it grows."""
        model = self.model
        # (the classes and functions of other modules join as the walk meets their imports)
        size = (len(model.functions), len(model.classes), len(model.foreign_functions))
        if self._call_graph is not None and self._eventful_size == size:
            return self._call_graph
        self._eventful_size = size
        by_name: Dict[str, list] = {}
        for fn in list(model.functions.values()) + model.foreign_functions \
                + [m for c in model.classes.values() for m in c.methods.values()]:
            by_name.setdefault(fn.name.value, []).append(fn)
        self._call_graph = by_name
        self._answers = {}
        return by_name

    def _facts(self, fn: Any) -> Any:
        """(called names, clears gradients) of ``fn``'s body: once per file for its own
        functions, once per process for another module's (kept with its tree); read only for
        the functions a question reaches."""
        memo = self._memo_for(fn)
        facts = memo.get(("calls", id(fn)))
        if facts is None:
            facts = memo[("calls", id(fn))] = call_facts(fn.body)
        return facts

    def _reaches(self, name: str, kind: str) -> bool:
        """Does calling a function named ``name`` run (itself or through the functions it calls,
        by name) a training event or a gradient clearing (kind 'eventful'), or a gradient
        clearing / ``zero_grad()`` (kind 'clearing')? A search over the call graph from
        ``name``, reading only the functions it reaches."""
        by_name = self._graph()
        answers = self._answers
        hit = answers.get((kind, name))
        if hit is not None:
            return hit
        seen = {name}
        stack = [name]
        found = False
        while stack and not found:
            n = stack.pop()
            known = answers.get((kind, n))
            if known is not None:
                if known:
                    found = True
                continue  # (False: nothing it reaches holds one)
            for fn in by_name.get(n, ()):
                names, clears = self._facts(fn)
                if clears or (kind == "clearing" and "zero_grad" in names) \
                        or (kind == "eventful" and not names.isdisjoint(_EVENT_CALLS)):
                    found = True
                    break
                for c in names:
                    if c not in seen and c in by_name:
                        seen.add(c)
                        stack.append(c)
        answers[(kind, name)] = found
        if not found:  # nothing reachable from any name searched holds one
            for n in seen:
                answers[(kind, n)] = False
        return found

    def _eventful(self, name: str) -> bool:
        """Does a function of this name hold training events (a loop calling it is a training
        loop), directly or through a function of the file (or project) it calls?"""
        return self._reaches(name, "eventful")

    def _clearing(self, name: str) -> bool:
        """Does a function of this name clear gradients when called (``zero_grad(self.model_params)``
        of a helper that runs ``param.grad.zero_()``), directly or through a function it calls?"""
        return self._reaches(name, "clearing")


def _frozen_for_call(model: Any, keys: Dict[str, Optional[str]]) -> List[str]:
    """What the caller froze of the arguments it passes, under the parameters' names."""
    out: List[str] = []
    frozen = model.visible_frozen()
    for param, caller in keys.items():
        if caller is None:
            continue
        for f in frozen:
            if f == caller or caller.startswith((f + ".", f + "[")):
                out.append(param)  # the argument, or a module it belongs to
            elif f.startswith((caller + ".", caller + "[")):
                out.append(param + f[len(caller):])  # a part of it (`trainer.ema` for `self`)
    return out


def _frozen_by_call(model: Any, new: List[str], keys: Dict[str, Optional[str]]) -> None:
    """What a walked call froze through a parameter (``def freeze(m): for p in m.parameters():
    p.requires_grad_(False)``) is frozen under the caller's name for the argument (``teacher``)."""
    for f in set(new):
        cut = min((i for i in (f.find("."), f.find("[")) if i > 0), default=len(f))
        caller = keys.get(f[:cut])
        if caller is not None:
            model.freeze(caller + f[cut:])


def _static(fn: cst.FunctionDef) -> bool:
    return any((dotted(d.decorator) or "").rsplit(".", 1)[-1] == "staticmethod" for d in fn.decorators)


def _is_generator(fn: cst.FunctionDef) -> bool:
    """Does ``fn``'s own body (not a nested function's) contain ``yield``?"""
    stack = node_children(fn.body)
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.Yield:
            return True
        if t in DEFINITION_TYPES:
            continue
        stack.extend(node_children(n))
    return False


def _falls_off(fn: cst.FunctionDef) -> bool:
    """A function without any ``return value`` statement (it returns None)."""
    return node_fact("falls_off", fn, _scan_falls_off)


def _scan_falls_off(fn: cst.FunctionDef) -> bool:
    stack = node_children(fn.body)
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.Return and n.value is not None:
            return False
        if t in DEFINITION_TYPES:
            continue
        stack.extend(node_children(n))
    return True


def _walk_names(node: Any) -> Any:
    """Every ``Name`` node under ``node``."""
    todo = [node]
    while todo:
        n = todo.pop()
        if type(n) is cst.Name:
            yield n
        todo.extend(node_children(n))
