"""Loops: the state a loop body starts from, and what one iteration leaves for the next."""

from __future__ import annotations

import re
from typing import Any, Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from gradlint.model.lattice import FREED, must_deps
from gradlint.model.names import dotted, node_children, node_fact, reads_key, rebound_names
from gradlint.model.values import TENSOR, next_id
from gradlint.model.weights import covers


class Loop:
    """A loop being walked: the names bound before it, and where its values start."""

    __slots__ = ("node", "outer", "start_id", "first_use", "freed", "products", "level", "before",
                 "branch_depth", "exit_tick", "retained")

    def __init__(self, node: Any, outer: set, start_id: int, level: int = 0) -> None:
        self.node = node
        # how many calls deep the walk was when it met the loop (a helper walked at a call site
        # inside the loop must not count as the loop's own body for the names it binds)
        self.level = level
        self.outer = outer  # keys bound before the loop (the loop variable excluded)
        self.start_id = start_id  # values with a smaller id were made before the loop
        # outer name -> the statement that first reads it in the body, or None when the body
        # rebinds it before any read
        self.first_use: Dict[str, Any] = {}
        # ids of graph values that a backward() in the body frees (without retain_graph)
        self.freed: set = set()
        # statement -> ids of the values it bound (to see whether a first use feeds a backward)
        self.products: Dict[int, set] = {}
        # backward() calls in the body through a graph built before the loop: (node, value, key)
        self.before: List[Any] = []
        # how many branches (`if` tests, else/except markers) enclosed the loop: more, in its
        # body, means code that runs on some passes only
        self.branch_depth = 0
        self.exit_tick: Optional[int] = None  # the statement count when this walk of it ended
        # ids of graph values that a backward(retain_graph=True) in the body went through
        self.retained: set = set()


class LoopMixin:
    def enter_loop(self, node: Any, outer: set) -> None:
        self.loops.append(Loop(node, outer, next_id(), len(self.inline_stack)))
        self.loops[-1].branch_depth = len(self.conditions) + len(self.branches)
        self.loop_depth += 1
        self.loop_frames.setdefault(id(node), set()).add(self.frames[-1])

    def carried_cause(self, value: Any) -> Any:
        """In a loop's second pass: the statement that bound ``value`` at the end of the first
        iteration (the back edge brought it here), or None."""
        if not self.repeat or value is None:
            return None
        return self.carried.get(getattr(value, "id", None))

    def counter_names(self) -> FrozenSet[str]:
        """The names that hold a Python int here: the counter of an enclosing loop of this
        function, ``for i in range(...)`` or ``for i, x in enumerate(...)``, that its body
        never rebinds (``x[i]`` with such a name is basic indexing: a view)."""
        level = len(self.inline_stack)
        names: Set[str] = set()
        for loop in self.loops:
            if loop.level == level and type(loop.node) is cst.For:
                names |= _loop_counter(loop.node)
        return frozenset(names)

    def own_loop(self) -> Optional[Loop]:
        """The innermost loop, when it belongs to the function being walked (not to a caller)."""
        if self.loops and self.loops[-1].level == len(self.inline_stack):
            return self.loops[-1]
        return None

    def exit_loop(self) -> None:
        loop = self.loops.pop()
        self.loop_depth -= 1
        self.tick += 1
        self.loop_exit_seq[id(loop.node)] = self.tick
        loop.exit_tick = self.tick
        # names the body reads before rebinding them: the next iteration reads the last one's
        self.loop_first_reads.setdefault(id(loop.node), set()).update(
            k for k, st in loop.first_use.items() if st is not None)
        if loop.before:
            # the pre-loop graph reaches the next iteration only through names bound before the
            # loop that still hold it at the end of the body (not rebound, not refreshed)
            carried: set = set()
            for k in loop.outer:
                v = self.env.get(k)
                if v is not None and v.kind == TENSOR:
                    carried |= must_deps(v)
            for node, value, _key in loop.before:
                # (a graph the model only assumes, a module's output it could not follow, is no
                # ground for an error)
                if any(d < loop.start_id and d in self.savers and d in carried and d not in self.probable_savers
                       for d in must_deps(value)):
                    self._emit("graph_before_loop", (node, value, loop.node))
        # a name read at the top of the body that the body rebinds to a graph value freed by
        # the body's own backward(): the next iteration back-propagates into a freed graph
        for key, stmt in loop.first_use.items():
            if stmt is None or _reads_only_cut(stmt, key):
                continue
            end = self.env.get(key)
            feeds_backward = loop.products.get(id(stmt), set()) & loop.freed
            if feeds_backward and end is not None and end.kind == TENSOR and end.rg is True and any(
                    d >= loop.start_id for d in must_deps(end) & loop.freed & self.savers):
                self._emit("loop_carried_graph", (stmt, key))
            elif self.repeat and end is not None and end.kind == TENSOR and end.rg is True \
                    and loop.products.get(id(stmt), set()) & loop.retained:
                step = self._steps_saved_weights(loop, must_deps(end))
                if step is not None:
                    self._emit("loop_carried_stepped", (stmt, key, step))

    def _steps_saved_weights(self, loop: Loop, deps: set) -> Any:
        """On a loop's second pass (where the carried state requires grad): the ``step()`` event
        that follows, in every iteration, the ``backward(retain_graph=True)`` of this loop and
        updates a weight that the graph of ``deps`` (made in this pass, kept by that backward)
        saved; None if there is none. The next iteration back-propagates into that graph."""
        level = len(self.call_statements)  # type: ignore[attr-defined]
        keys = [k[level] for d in deps if d >= loop.start_id and d in loop.retained
                for _, k in self.weight_saves.get(d, ()) if level in k]  # type: ignore[attr-defined]
        if not keys:
            return None
        events = self.events  # type: ignore[attr-defined]
        for b in events:
            if b.kind != "backward" or not b.loops or b.loops[-1] is not loop.node or b.exits \
                    or id(b.node) not in self.retaining:  # type: ignore[attr-defined]
                continue
            for e in events[b.seq + 1:]:
                if e.loops != b.loops or e.function is not b.function or e.root is not b.root or e.conds != b.conds:
                    continue
                if e.kind in ("zero_grad", "zero_grad_keep") or (e.kind == "step" and e.exits):
                    break  # (no gradient left for the step to apply)
                if e.kind == "step" and e.module is not None and any(covers(e.module, k) for k in keys):
                    return e
        return None

    def defined_before_loop(self, key: Optional[str]) -> bool:
        """Is ``key`` a name bound before the innermost loop (it outlives an iteration)?"""
        if key is None or not self.loops:
            return False
        loop = self.own_loop()
        if loop is None:  # a helper walked at a call site inside a loop: its object's state outlives
            return key.startswith("self.") or key.startswith("self[")
        outer = loop.outer
        return key in outer or re.split(r"[.\[]", key, 1)[0] in outer


_CUTTING = frozenset({"detach", "detach_", "data", "item", "tolist", "numpy", "shape", "size", "dim"})


def _reads_only_cut(stmt: Any, key: str) -> bool:
    """Does ``stmt`` read ``key`` only through a cut (``h.detach()``, ``h.data``, ``h.item()``),
    so that nothing of the previous iteration's graph flows into what it computes?"""
    return node_fact(("cut", key), stmt, lambda n: _scan_reads_only_cut(n, key))


def _scan_reads_only_cut(stmt: Any, key: str) -> bool:
    reads = cut = 0
    stack = [stmt]
    while stack:
        n = stack.pop()
        if type(n) is cst.Attribute and n.attr.value in _CUTTING and dotted(n.value) == key:
            cut += 1
            reads += 1
            continue
        if type(n) is cst.AssignTarget:
            continue  # what the statement binds is no read
        if isinstance(n, (cst.Name, cst.Attribute)) and dotted(n) == key:
            reads += 1
            continue
        stack.extend(node_children(n))
    return reads > 0 and reads == cut


def loop_freed(body_ends: List[Dict[str, Any]], born: int) -> set:
    """The graphs made in a loop's body (ids from ``born`` on) that a backward() in it freed at
    the end of every walked pass (``body_ends``): after the loop they are freed wherever they
    exist (on the path where the body did not run, nothing made in it does)."""
    common: Optional[set] = None
    for env in body_ends:
        f = env.get(FREED)
        got = {d for d in f.items if d >= born} if f is not None else set()  # type: ignore[union-attr]
        common = got if common is None else common & got
    return common or set()


def leaves_early(body: Any) -> bool:
    """Does a ``break`` or ``continue`` of this loop occur in ``body``? The walk follows the
    body to its end only: a pass that leaves early may skip what the rest of the body does."""
    return node_fact("leaves_early", body, _scan_leaves_early)


def _scan_leaves_early(body: Any) -> bool:
    stack = [body]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.Break, cst.Continue)):
            return True
        if isinstance(n, (cst.For, cst.While)):
            stack.extend(node_children(n.orelse) if n.orelse is not None else ())
            continue  # (its own break/continue leave it, not this loop)
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(node_children(n))
    return False


def carried_attributes(fn: Any, cache: Dict[int, Tuple[str, ...]]) -> Tuple[str, ...]:
    """The attributes a method rebinds from their own value, not through a cut
    (``self.hidden = self.cell(x, self.hidden)``, ``out, self.h = self.rnn(x, self.h)``): state
    that each call carries into the next. Computed once per function (``cache``: per file, keyed
    by the node's id, which is stable while the file's tree lives)."""
    got = cache.get(id(fn))
    if got is not None:
        return got
    out: List[str] = []
    me = fn.params.params[0].name.value if fn.params.params else None
    stack = node_children(fn.body) if me is not None else []
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if type(n) is cst.Assign:
            targets: List[Any] = []
            for t in n.targets:
                tt = t.target
                targets.extend(e.value for e in tt.elements) if isinstance(tt, (cst.Tuple, cst.List)) else targets.append(tt)
            for t in targets:
                key = dotted(t) if type(t) is cst.Attribute else None
                if key is not None and key.count(".") == 1 and key.startswith(me + ".") \
                        and reads_key(n.value, key) and not _reads_only_cut(n.value, key):
                    out.append(key[len(me) + 1:])
        stack.extend(node_children(n))
    got = cache[id(fn)] = tuple(dict.fromkeys(out))
    return got


_COUNTERS: Dict[int, Tuple[Any, FrozenSet[str]]] = {}


def _loop_counter(node: cst.For) -> FrozenSet[str]:
    """``i`` of ``for i in range(...)`` / ``for i, x in enumerate(...)`` when the body does not
    rebind it (cached per loop node)."""
    hit = _COUNTERS.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    name = None
    it, target = node.iter, node.target
    if type(it) is cst.Call and type(it.func) is cst.Name:
        if it.func.value == "range" and type(target) is cst.Name:
            name = target.value
        elif it.func.value == "enumerate" and isinstance(target, (cst.Tuple, cst.List)) \
                and len(target.elements) == 2 and type(target.elements[0].value) is cst.Name:
            name = target.elements[0].value.value
    out = frozenset({name}) if name is not None and name not in rebound_names(node.body) else frozenset()
    if node.orelse is not None and name in rebound_names(node.orelse):
        out = frozenset()
    _COUNTERS[id(node)] = (node, out)
    return out
