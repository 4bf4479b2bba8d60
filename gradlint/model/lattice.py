"""Joins: one value for what several paths leave in a name (``if``/``else``, ``a if c else b``,
``try``/``except``, a loop's zero-or-more iterations, the ``return``s of a function).

A joined value keeps two views of each fact:

- **must** (what holds on every path): the value's own fields. A tri-state field (``rg``,
  ``leaf``, ``dtype``, ``src``, ``alias_of``, ``made``) keeps its value where every path agrees
  and is ``None`` (unknown) otherwise; a flag that claims something (``view_of_leaf``,
  ``fresh``, ``is_param``, ``inference``, ``certain``) holds only if it holds on every path; a
  flag that weakens a claim (``probable``: the parameters may be frozen) holds if it holds on
  any. ``must_deps(v)``: the requires-grad values ``v`` depends on on every path.
- **may** (what holds on some path): ``alternatives(v)``, the values the paths left (``alts``),
  and the unions kept in the value itself: ``deps`` (so that "x does not depend on w" is claimed
  only when no path depends on it) and ``cuts``.

Unknown absorbs only what it must: a tensor joined with a value the model does not know is
unknown in the must view, and still that tensor in the may view (``Value(UNKNOWN, items=...)``,
whose reads read each alternative). A number or a constant joined with tensors (``total = 0``
before a loop, ``total = total + loss`` in it) is no tensor on the path where the loop did not
run, so the name is unknown, but arithmetic on it (``total / n``) is arithmetic on the tensors
(see ``tensor_view``): ``0 + t`` is ``t``'s graph.

Rules decide error-level findings from the must view only (a finding must be a real bug on every
path); may-facts only keep rules quiet (a value that may have been read, escaped, or may depend
on a parameter) or weaken claims. No rule reports from the may view today.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Optional, Tuple

from gradlint.model.values import (
    CONST, INSTANCE, MODULE, OPTIMIZER, SCALAR, TENSOR, TUPLE, UNKNOWN, UNKNOWN_VALUE, Value, union,
)

FREED = "<freed>"  # env key: the graphs freed on this path (a Value whose items are ids)
_OBJECTS = (MODULE, INSTANCE, OPTIMIZER, SCALAR, CONST)


# ---------------------------------------------------------------------------- the two views
def alternatives(v: Value) -> Tuple[Value, ...]:
    """The values ``v`` may be (may view): the paths' values for a join, else ``v`` itself."""
    return v.alts or (v,)


def must_deps(v: Value) -> FrozenSet[int]:
    """Ids of the requires-grad values ``v`` depends on differentiably on every path (``deps``
    holds those it may depend on)."""
    return v.deps if v.mdeps is None else v.mdeps


def deps_of(values) -> Dict[str, Optional[FrozenSet[int]]]:
    """``deps`` and ``mdeps`` (keyword arguments of Value) of a value computed from ``values``:
    it may depend on what any of them may, and must on what any of them must."""
    values = list(values)
    deps = union(v.deps for v in values)
    if all(v.mdeps is None for v in values):
        return {"deps": deps, "mdeps": None}
    return {"deps": deps, "mdeps": union(must_deps(v) for v in values)}


def all_alternatives(v: Value, pred) -> bool:
    """``pred`` holds for every value ``v`` may be (a must-fact over the paths)."""
    return all(pred(a) for a in alternatives(v))


def any_alternative(v: Value, pred) -> bool:
    """``pred`` holds for some value ``v`` may be (a may-fact)."""
    return any(pred(a) for a in alternatives(v))


def ids_of(v: Value) -> FrozenSet[int]:
    """The ids of ``v`` and of every value it may be: marks (read, escaped, back-propagated)
    made through a joined value hold for each path's value too."""
    if not v.alts:
        return frozenset((v.id,))
    return frozenset((v.id,)).union(*(ids_of(a) for a in v.alts))


def tensor_view(v: Value) -> Value:
    """For arithmetic: an unknown that may only be numbers, constants or tensors (``total = 0``
    then ``total = total + loss``) computes as the join of its tensors; anything else is ``v``."""
    if v.kind == UNKNOWN and v.items and all(i.kind == TENSOR for i in v.items):
        return join_values(list(v.items))
    return v


# ---------------------------------------------------------------------------- joins
def _flat(values: List[Value]) -> Tuple[Value, ...]:
    out: List[Value] = []
    for v in values:
        for a in alternatives(v):
            if all(a is not o for o in out):
                out.append(a)
    return tuple(out)


def _agree(values: List[Value], field: str):
    first = getattr(values[0], field)
    return first if all(getattr(v, field) is first or getattr(v, field) == first for v in values[1:]) else None


def _same(values: List[Value], field: str):
    first = getattr(values[0], field)
    return first if all(getattr(v, field) is first for v in values[1:]) else None


def _common(sets) -> FrozenSet[int]:
    out: Optional[FrozenSet[int]] = None
    for s in sets:
        out = s if out is None else out & s
    return out or frozenset()


def join_tensors(values: List[Value]) -> Value:
    """Tensors on every path: the must view in the fields, the paths' values in ``alts``."""
    rg = _agree(values, "rg")
    made = _agree(values, "made")
    made_node = _same(values, "made_node") if made is not None else None
    if made is not None and made_node is None and made in ("conv", "rewrap"):
        made = None  # made at different places: no one place to report
    alias_of = _same(values, "alias_of")
    out = Value(
        TENSOR, rg=rg, leaf=_agree(values, "leaf"),
        probable=any(v.probable for v in values),
        view_of_leaf=all(v.view_of_leaf for v in values),
        deps=union(v.deps for v in values) if rg is not False else frozenset(),
        mdeps=_common(must_deps(v) for v in values) if rg is not False else None,
        cuts=union(v.cuts for v in values),
        src=_same(values, "src"),
        is_param=all(v.is_param for v in values),
        alias_of=alias_of, alias_kind=_agree(values, "alias_kind") if alias_of is not None else None,
        fresh=all(v.fresh for v in values),
        made=made, made_node=made_node,
        certain=all(v.certain for v in values),
        dtype=_agree(values, "dtype"),
        inference=all(v.inference for v in values),
        numel=_agree(values, "numel"),
    )
    out.alts = _flat(values)
    return out


def join_values(values: List[Value]) -> Value:
    """One value for what several paths produce: the value itself when all are the same object;
    a tensor when all are tensors (see ``join_tensors``); element-wise for tuples of one length;
    the object for modules, optimizers, ... that agree; otherwise unknown."""
    first = values[0]
    if all(v is first for v in values[1:]):
        return first
    if all(v.kind == TENSOR for v in values):
        return join_tensors(values)
    if all(v.kind == TUPLE and not v.params for v in values):
        from gradlint.model.containers import join_containers  # (containers.py)

        return join_containers(values)
    if first.kind == INSTANCE and any(v.keys is not None for v in values):
        # dataclass / NamedTuple instances (containers.py): field by field
        if all(v.kind == INSTANCE and v.node == first.node and v.keys == first.keys for v in values):
            from gradlint.model.containers import join

            return Value(INSTANCE, node=first.node, keys=first.keys, made=first.made,
                         items=tuple(join([v.items[i] for v in values]) for i in range(len(first.items))))
        if all(v.kind == INSTANCE and v.node == first.node and v.made is None for v in values):
            # instances of one class carrying different attributes (objects.instance_record): the
            # attributes all carry; the others are the class's
            from gradlint.model.containers import join

            common = [k for k in (first.keys or ()) if all(v.keys is not None and k in v.keys for v in values)]
            if not common:
                return Value(INSTANCE, node=first.node)
            return Value(INSTANCE, node=first.node, keys=tuple(common),
                         items=tuple(join([v.items[v.keys.index(k)] for v in values]) for k in common))
        return UNKNOWN_VALUE
    if all(v.kind == first.kind for v in values) and first.kind in _OBJECTS:
        same = all(v.node == first.node and v.params == first.params and v.numel == first.numel for v in values)
        return first if same else Value(first.kind)
    return UNKNOWN_VALUE


def join_branch_values(vals: List[Optional[Value]]) -> Optional[Value]:
    """What a name holds after paths that left ``vals`` in it (None: unbound on that path, or
    not known). None when nothing is known at all (the name is dropped)."""
    v = vals[0]
    if v is not None and all(e is v for e in vals[1:]):
        return v
    kept = [x for x in vals if x is not None and x.kind != CONST]
    if kept and all(x is kept[0] for x in kept) and kept[0].kind in (UNKNOWN, MODULE, OPTIMIZER, INSTANCE):
        # `best = None` before the loop, `best = model.state_dict()` in it: after the loop
        # the name holds that object or None (for what is no tensor, the object is kept)
        return kept[0]
    if kept and all(x.kind == UNKNOWN for x in kept):
        # one of several opaque objects (a snapshot on one path, a copy on another): still
        # unknown, but a read of it reads each of them
        return Value(UNKNOWN, items=tuple(kept))
    if all(x is not None and x.kind == TUPLE and not x.params for x in vals):
        # a container on every path (containers.py): what the paths agree on, element-wise
        joined = join_values(vals)  # type: ignore[arg-type]
        return joined if joined is not UNKNOWN_VALUE else None
    if all(x is not None and x.kind == TENSOR for x in vals):
        # a tensor on every path (`x = torch.zeros(3, requires_grad=True)` in the `if`,
        # `x = torch.ones(3, requires_grad=True)` in the `else`): what every path agrees on
        return join_tensors(vals)  # type: ignore[arg-type]
    if all(x is not None and x.kind in (TENSOR, SCALAR, CONST) for x in vals) and any(
            x.kind == TENSOR for x in vals):
        # `total = 0.0` before a loop, `total = total + loss` in it: a number when the
        # loop ran zero times, else one of these tensors (unknown, but a read reads them, and
        # arithmetic on it is arithmetic on them: see tensor_view)
        tensors = tuple(x for x in kept if x.kind == TENSOR)
        out = Value(UNKNOWN, items=tensors)
        out.alts = _flat(list(kept))
        return out
    if all(x is not None for x in vals) and any(x.kind == TENSOR for x in kept):
        # a tensor on some path, an object the model does not know on another: nothing must
        # hold; the tensors are what it may be (reads read them; nothing computes from them)
        tensors = tuple(x for x in kept if x.kind == TENSOR)
        out = Value(UNKNOWN, items=(UNKNOWN_VALUE,) + tensors)
        out.alts = _flat(list(kept))
        return out
    return None


def join_envs(envs: List[Dict[str, Value]]) -> Dict[str, Value]:
    """The environment after paths that end in ``envs`` (each: key -> value)."""
    if not envs:
        return {}
    if len(envs) == 1:
        return envs[0]
    first, rest = envs[0], envs[1:]
    out: Dict[str, Value] = {}
    keys = list(first)
    for e in rest:
        keys.extend(k for k in e if k not in first)
    for k in keys:
        if k == FREED:
            continue
        v = first.get(k)
        joined = join_branch_values([v] + [e.get(k) for e in rest])
        if joined is not None:
            out[k] = joined
        if v is not None and v.kind == TUPLE and v.keys is None and (v.made == "list" or v.items == ()):
            # a list that some path appended to: it may hold any of the elements (by position,
            # nothing is known)
            others = [e.get(k) for e in rest]
            if all(o is not None and o.kind == TUPLE and o.keys is None and not o.params for o in others):
                items: list = []
                for o in [v] + others:
                    items.extend(i for i in o.items if all(i is not j for j in items))  # type: ignore[union-attr]
                out[k] = Value(TUPLE, items=tuple(items), made="joined")
    # graphs freed by backward() on every path stay freed
    freed = [e.get(FREED) for e in envs]
    if all(f is not None for f in freed):
        common = set(freed[0].items)  # type: ignore[union-attr]
        for f in freed[1:]:
            common &= set(f.items)  # type: ignore[union-attr]
        out[FREED] = Value(TUPLE, items=tuple(sorted(common)))  # type: ignore[arg-type]
    return out
