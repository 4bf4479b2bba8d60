"""Graphs that ``backward()`` goes through, and graphs kept after it.

GL502 backward-through-freed-graph: torch raises "Trying to backward through the graph a second
time" at the second ``backward()``: the symptom. The cause is the earlier ``backward()`` that
freed the shared part (it needed ``retain_graph=True``, or the two losses summed), or, when the
same ``backward()`` fails on the next iteration, the statement that built the shared part before
the loop (or carried it from one iteration to the next, ``h = rnn(x, h)``). Each ``backward()``
without ``retain_graph`` records the autograd nodes it went through (ids only: no reference to
the graph is kept); at the failure, the freed nodes of the failing graph name the earlier
``backward()``, and the user's live frames name the variable that holds the shared part.

GL501 graph-kept-alive: after each ``backward()`` (without ``retain_graph``/``create_graph``) the
root's autograd node is marked with the step's number (``node.metadata``, a dict every node has),
and the user's live frames are scanned (locals, attributes of ``self``, two levels into lists,
tuples and dicts): a tensor whose graph holds the roots of two or more back-propagated steps (a
running total of losses), or a container holding graph tensors first seen at two or more steps
(a list of losses, of logged norms, of dicts of outputs), keeps every step's graph alive: memory
grows each step. Reported at the statement that adds to the holder (``losses.append(loss)``,
``total += loss``). A program that never calls ``backward()`` gives no steps to compare. The
scans run after the 2nd, 3rd and 4th ``backward()``, every 8th up to the 64th, and later every
8th that comes when the program has run 200 times the last scan's duration since it (on a small
model a scan costs more than a step: this bounds the scans to about 0.5% of the run).
"""

from __future__ import annotations

import collections
import time
from typing import Any, Deque, FrozenSet, List, Optional, Set, Tuple

from torch import Tensor

from gradlint.runtime.attribution import display_path, where, where_raw
from gradlint.runtime.mode import _graph_freed, node_key
from gradlint.runtime.sites import binding_line, bindings, find_holders, growth_lines, location, user_frames
from gradlint.runtime.watchers import Watcher

SECOND_TIME = "backward through the graph a second time"
MODIFIED = "modified by an inplace operation"
MAX_NODES = 50_000
WALKED_STEPS = 32  # backward() calls whose graph is recorded (GL502)
SCAN_EVERY = 8  # GL501: frames are scanned after backward() 2, 3, 4 and then every 8th ...
SCAN_SHARE = 200  # ... and after the 64th, only when the program ran 200x the last scan's time since

def graph_ids(roots: List[Any], limit: int = MAX_NODES) -> Set[int]:
    """Ids (``node_key``) of the autograd nodes reachable from the roots' ``grad_fn``."""
    seen: Set[int] = set()
    stack = [r.grad_fn for r in roots if getattr(r, "grad_fn", None) is not None]
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or node_key(node) in seen:
            continue
        seen.add(node_key(node))
        stack.extend(n for n, _ in node.next_functions)
    return seen


def _freed_region(roots: List[Any]) -> Tuple[Set[int], Set[int]]:
    """``(freed, reaching)``: ids of the nodes of the roots' graph whose saved tensors are freed,
    and of the nodes from which a freed one can be reached (the freed ones included)."""
    nodes: dict = {}
    order: List[Any] = []
    stack = [(r.grad_fn, False) for r in roots if getattr(r, "grad_fn", None) is not None]
    while stack and len(nodes) < MAX_NODES:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node is None or node_key(node) in nodes:
            continue
        nodes[node_key(node)] = node
        stack.append((node, True))
        stack.extend((n, False) for n, _ in node.next_functions if n is not None and node_key(n) not in nodes)
    freed = {i for i, n in nodes.items() if _graph_freed(n)}
    reaching = set(freed)
    for node in order:  # post-order: children first
        if node_key(node) not in reaching and any(n is not None and node_key(n) in reaching for n, _ in node.next_functions):
            reaching.add(node_key(node))
    return freed, reaching


class _Backward:
    __slots__ = ("path", "line", "ids", "retained")

    def __init__(self, path: str, line: int, ids: FrozenSet[int], retained: bool) -> None:
        self.path, self.line, self.ids, self.retained = path, line, ids, retained


STEP = "gradlint.step"  # node.metadata key: the number of the backward() this node was the root of
SEEN = "gradlint.seen"  # node.metadata key: the step at which a scan first saw this graph tensor
_CONTAINERS = (list, tuple, dict)


def _meta(node: Any) -> Optional[dict]:
    try:
        return node.metadata
    except Exception:
        return None


def _steps_in(t: Any, limit: int = 64) -> Set[int]:
    """The marks of back-propagated roots in ``t``'s graph (not below a marked root)."""
    out: Set[int] = set()
    stack = [t.grad_fn]
    seen: Set[int] = set()
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or node_key(node) in seen:
            continue
        seen.add(node_key(node))
        meta = _meta(node)
        if meta and STEP in meta:
            out.add(meta[STEP])
            continue
        stack.extend(n for n, _ in node.next_functions)
    return out


class Graphs(Watcher):
    codes = frozenset({"GL502", "GL501"})

    def __init__(self, monitor: Any) -> None:
        super().__init__(monitor)
        self._done: Deque[_Backward] = collections.deque(maxlen=8)
        self._current: Optional[_Backward] = None
        self._step = 0
        self._scanned = 0.0  # perf_counter at the end of the last GL501 scan
        self._scan_cost = 0.0  # its duration

    def before_backward(self, roots: List[Any], retain: bool, is_grad: bool) -> None:
        self._current = None
        if not roots:
            return
        path, line = where_raw()
        # the nodes each backward() went through, for the first backward() calls (a second
        # backward through a freed graph fails early); later ones record their line only
        ids = frozenset(graph_ids(roots)) if self._step < WALKED_STEPS else frozenset()
        self._current = _Backward(path, line, ids, retain)

    def after_backward(self, roots: List[Any], retain: bool, is_grad: bool) -> None:
        if self._current is not None:
            self._done.append(self._current)
            self._current = None
        if retain:  # create_graph / retain_graph: graphs are kept on purpose (higher-order, MAML)
            return
        self._step += 1
        for r in roots:
            meta = _meta(r.grad_fn) if getattr(r, "grad_fn", None) is not None else None
            if meta is not None:
                meta[STEP] = self._step
        step = self._step
        if 2 <= step <= 4 or (step % SCAN_EVERY == 0 and self._scan_due()):  # a leak persists
            start = time.perf_counter()
            self._scan_kept()
            self._scanned = time.perf_counter()
            self._scan_cost = self._scanned - start

    def _scan_due(self) -> bool:
        """Every 8th backward() up to the 64th; later, when the program has run at least
        ``SCAN_SHARE`` times the last scan's cost since it (a leak persists and grows: a later
        scan finds it), so that the scans cost at most about 0.5% of the run."""
        return self._step <= 64 or time.perf_counter() - self._scanned >= SCAN_SHARE * self._scan_cost

    def on_error(self, exc: BaseException, func: Any, args: Any, kwargs: Any) -> bool:
        text = str(exc)
        if MODIFIED in text:
            return self._retained_and_modified(func, args, kwargs)
        if SECOND_TIME not in text:
            return False
        self._current = None
        from gradlint.runtime.mode import _backward_roots, describe

        roots = _backward_roots(func, args, kwargs) or [a for a in args if hasattr(a, "grad_fn")]
        freed, reaching = _freed_region(roots)
        hit = None
        for rec in reversed(self._done):
            if not rec.retained and rec.ids & freed:
                hit = rec
                break
        if hit is None and self._done:
            hit = self._done[-1]
        here = where()
        shape = describe(roots[0]) if roots else "a tensor"
        related = [(here[0], here[1], "torch raises here")]
        if hit is not None and (display_path(hit.path), hit.line) != here:
            self.m._add("GL502", f"this backward() frees the graph that a later backward() ({shape}) goes through "
                                 f"again: torch raises \"Trying to backward through the graph a second time\"; "
                                 f"pass retain_graph=True here, or add the losses and call backward() once",
                        display_path(hit.path), hit.line, related=related)
            return True
        site = self._shared_site(roots, freed, reaching, hit.ids if hit is not None else frozenset())
        if site is not None:
            path, line, name, carried = site
            what = ("carries the graph of the previous iteration into this one" if carried
                    else "builds a graph that every iteration's backward() goes through")
            self.m._add("GL502", f"`{name}` {what}: the first backward() frees it and the next one ({shape}) "
                                 f"raises \"Trying to backward through the graph a second time\"; detach it, or "
                                 f"compute it inside the loop", path, line, related=related)
            return True
        self.m._add("GL502", f"backward() through a graph that an earlier backward() freed ({shape}): torch raises "
                             f"\"Trying to backward through the graph a second time\"", here[0], here[1])
        return True

    def _retained_and_modified(self, func: Any, args: Any, kwargs: Any) -> bool:
        """``backward(retain_graph=True)`` each iteration on a graph carried from the previous one
        (``h = rnn(x, h)`` without ``detach()``): the retained graph saved the weights, the
        optimizer changed them in place, and the next backward() raises "modified by an inplace
        operation". The cause is the statement that carries the graph over."""
        self._current = None
        if self.m._found and any(k[0] in ("GL102", "GL104", "GL103") for k in self.m._found):
            return False
        retained = [rec for rec in self._done if rec.retained]
        if not retained:
            return False
        from gradlint.runtime.mode import _backward_roots, describe

        roots = _backward_roots(func, args, kwargs)
        ids = graph_ids(roots)
        old = set()
        for rec in retained:
            old |= rec.ids & ids
        if not old:
            return False
        here = where()
        for frame, name, value in find_holders(list(user_frames()), lambda v: getattr(v, "grad_fn", None) is not None):
            lines = [ln for ln, reads in bindings(frame, name) if reads and ln <= frame.f_lineno]
            if lines and graph_ids([value], limit=5_000) & old:
                path, _ = location(frame)
                self.m._add("GL502", f"`{name.split('[', 1)[0]}` carries the graph of the previous iteration into "
                                     f"this one ({describe(value)}); backward(retain_graph=True) keeps that graph, "
                                     f"the optimizer then changes the weights it saved, and the next backward() "
                                     f"raises \"modified by an inplace operation\": detach it each iteration",
                            path, lines[-1], related=[(here[0], here[1], "torch raises here")])
                return True
        return False

    def _shared_site(self, roots: List[Any], freed: Set[int], reaching: Set[int],
                     walked: FrozenSet[int]) -> Optional[Tuple[str, int, str, bool]]:
        """The statement that bound the variable holding the shared (freed) part."""
        root_nodes = {node_key(r.grad_fn) for r in roots if getattr(r, "grad_fn", None) is not None}
        frames = list(user_frames())

        def shared(v: Any) -> bool:
            fn = getattr(v, "grad_fn", None)
            if fn is None:
                return False
            key = node_key(fn)
            return key in reaching and key in walked and key not in root_nodes

        def carried(v: Any) -> bool:  # its graph goes through the freed part (checked below)
            return getattr(v, "grad_fn", None) is not None

        for match, is_carried in ((shared, False), (carried, True)):
            for frame, name, value in find_holders(frames, match):
                if is_carried:
                    lines = [ln for ln, reads in bindings(frame, name) if reads and ln <= frame.f_lineno]
                    line = lines[-1] if lines else None
                    if line is not None and not (graph_ids([value], limit=5_000) & freed):
                        line = None
                else:
                    line = binding_line(frame, name)
                if line is not None:
                    path, _ = location(frame)
                    return path, line, name.split("[", 1)[0], is_carried
        return None

    # -- GL501 --------------------------------------------------------------------------------
    def _scan_kept(self) -> None:
        step = self._step
        from gradlint.runtime.mode import describe

        holders = find_holders(list(user_frames()), lambda v: isinstance(v, (Tensor,) + _CONTAINERS), depth=0)
        for frame, name, value in holders:
            marks, example, earlier = _marks(value, step)
            older = {m for m in marks if m[0] == STEP and m[1] < step}
            if not (older or len({m[1] for m in marks}) >= 2 or earlier >= 2):
                # graphs of one step only (a name rebound each step): nothing grows; `earlier`:
                # two graph tensors seen at an earlier scan (a loss made in step n is first seen
                # at step n's own scan, with the one the container took at step n - 1)
                continue
            lines = growth_lines(frame, name)
            if not lines or example is None:
                continue
            n = max(len({m[1] for m in marks}), earlier)
            kind = "a running value" if isinstance(value, Tensor) else "a container"
            what = (f"`{name}`, {kind} added to in every iteration, holds graph tensors ({describe(example)}) "
                    f"{'of back-propagated steps' if older else 'made at different steps'} ({n} so far)")
            path, _ = location(frame)
            self.m._add("GL501", f"{what}: each step's graph stays alive and memory grows every iteration; "
                                 f"keep `.item()` or `.detach()`", path, lines[-1])


def _marks(value: Any, step: int) -> Tuple[Set[Tuple[str, int]], Any, int]:
    """The steps whose graphs ``value`` holds: ``(STEP, n)`` for the root of the n-th
    back-propagated step, ``(SEEN, n)`` for a graph tensor first seen at the n-th step's scan;
    an example tensor; and how many of its graph tensors (distinct nodes) an earlier scan saw."""
    out: Set[Tuple[str, int]] = set()
    example = None
    earlier: Set[int] = set()
    if isinstance(value, Tensor):
        tensors = [value]
    else:
        items = list(value.values()) if isinstance(value, dict) else list(value)
        if len(items) > 256:
            items = items[:128] + items[-128:]
        tensors = []
        for v in items:
            if isinstance(v, _CONTAINERS):
                inner = list(v.values()) if isinstance(v, dict) else list(v)
                tensors.extend(t for t in inner[:64] if isinstance(t, Tensor))
            elif isinstance(v, Tensor):
                tensors.append(v)
    for t in tensors:
        fn = t.grad_fn
        if fn is None:
            continue
        if t is value and STEP in (_meta(fn) or {}):
            continue  # a loss that was back-propagated itself: it holds its own graph, nothing more
        found = _steps_in(t)
        if found:
            out |= {(STEP, n) for n in found}
        else:
            meta = _meta(fn)
            if meta is None:
                continue
            seen = meta.setdefault(SEEN, step)
            out.add((SEEN, seen))
            if seen < step:
                earlier.add(id(fn))
        example = t
    return out, example, len(earlier)


WATCHERS = [Graphs]
