"""Containers are values: lists, tuples, dicts (also ``defaultdict``), and the module containers
``nn.Sequential``, ``nn.ModuleList``, ``nn.ModuleDict``.

A container is a ``Value`` of kind TUPLE (a list, tuple or dict) or MODULE (a module container)
whose ``items`` are its elements' values:

- by position, for a literal (``made`` None): ``xs[0]`` is ``items[0]``;
- in no known order, after an append on some path (``made`` 'list' / 'joined') or for a
  comprehension (``made`` 'comp': ``items[0]`` is every element);
- by key, for a dict or ModuleDict: ``keys[i]`` is the constant key of ``items[i]``, None for an
  element stored under a key the model does not know (the summary: it may be under any key).
  ``made`` 'defaultdict' marks a ``defaultdict(list)``: a missing key reads as an empty list.

A read by a key or index the model does not know is the join of every element (lattice.py):
the must view holds only what every element agrees on, so rules stay quiet unless all agree.
Containers are immutable values like the others: a store (``d["k"] = v``, ``xs.append(v)``)
makes a new container and binds it to the container's name. Beyond ``MAX_ITEMS`` elements only
the summary (the join of all) is kept, so that no container grows with the loop iterations.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from gradlint.model.names import string_value
from gradlint.model.values import (
    CONST, CONST_VALUE, INSTANCE, MODULE, SCALAR, TENSOR, TUPLE, UNKNOWN, UNKNOWN_VALUE, Value, union,
)

MAX_ITEMS = 32
DEFAULT_LIST = "defaultdict"  # ``made`` of a dict whose missing keys read as empty lists
_ORDERLESS = ("joined", "comp")  # (an appended list, 'list', keeps its order)
_NO_KEY = object()  # a key the model does not know
BUILDERS = frozenset({"dict", "OrderedDict", "defaultdict", "list", "tuple"})


# ---------------------------------------------------------------------------- construction
def make(items, keys: Optional[Tuple[Any, ...]] = None, made: Optional[str] = None) -> Value:
    """A list/tuple (``keys`` None) or dict of ``items``, capped to ``MAX_ITEMS`` elements."""
    items = tuple(items)
    if len(items) > MAX_ITEMS:
        unique: List[Value] = []
        for i in items:
            if all(i is not u for u in unique):
                unique.append(i)
        summary = join(unique) if len(unique) <= MAX_ITEMS else UNKNOWN_VALUE
        items = (summary,)
        if keys is not None:
            keys = (None,)
        elif made != "comp":
            made = "joined"
    return Value(TUPLE, items=items, keys=keys, made=made, cuts=union(i.cuts for i in items))


def is_dict(v: Value) -> bool:
    return v.kind == TUPLE and v.keys is not None


def const_key(node: cst.BaseExpression) -> Any:
    """The constant a subscript or ``.get`` uses (``"loss"``, ``0``, ``-1``), else ``_NO_KEY``."""
    t = type(node)
    if t is cst.SimpleString:
        text = string_value(node)  # type: ignore[arg-type]
        return text if isinstance(text, str) else _NO_KEY
    if t is cst.Integer:
        return int(node.value, 0)  # type: ignore[attr-defined]
    if t is cst.UnaryOperation and type(node.operator) is cst.Minus:  # type: ignore[attr-defined]
        inner = node.expression  # type: ignore[attr-defined]
        return -int(inner.value, 0) if type(inner) is cst.Integer else _NO_KEY
    return _NO_KEY


def subscript_key(node: cst.Subscript) -> Any:
    if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return _NO_KEY
    return const_key(node.slice[0].slice.value)  # type: ignore[attr-defined]


def known(key: Any) -> bool:
    return key is not _NO_KEY


# ---------------------------------------------------------------------------- joins
def join(values: List[Value]) -> Value:
    """What every element agrees on: modules join here (same class, same activation, same
    ``inplace``), everything else in lattice.py."""
    if not values:
        return UNKNOWN_VALUE
    first = values[0]
    if all(v is first for v in values[1:]):
        return first
    if all(v.kind == MODULE for v in values):
        if all(v.node == first.node and v.params == first.params and v.act == first.act
               and v.inplace == first.inplace and not v.items for v in values):
            return first
        params = first.params if all(v.params == first.params for v in values) else None
        return Value(MODULE, params=params)
    from gradlint.model.lattice import join_values

    return join_values(values)


def join_containers(values: List[Value]) -> Value:
    """Lists, tuples or dicts on every path (none of them an enumerate()/zip() result)."""
    first = values[0]
    if all(v.keys is not None for v in values):
        return join_dicts(values)
    if any(v.keys is not None for v in values):
        return UNKNOWN_VALUE
    if any(v.made == "list" or not v.items for v in values):
        # a list that some path appended to: it may hold any of the elements (by position,
        # nothing is known)
        items: List[Value] = []
        for v in values:
            items.extend(i for i in v.items if all(i is not j for j in items))
        return make(items, made="joined")
    if all(len(v.items) == len(first.items) for v in values):
        made = first.made if all(v.made == first.made for v in values) else (
            None if all(v.made not in _ORDERLESS for v in values) else "joined")
        return make((join([v.items[i] for v in values]) for i in range(len(first.items))), made=made)
    items = []
    for v in values:
        items.extend(i for i in v.items if all(i is not j for j in items))
    return make(items, made="joined")


def join_dicts(values: List[Value]) -> Value:
    """Dicts on every path: a key's value joins the paths that hold it (a read on another path
    raises KeyError, or for a defaultdict gives an empty list: then the key is not known)."""
    made = values[0].made if all(v.made == values[0].made for v in values) else None
    if made is None and any(v.made == DEFAULT_LIST for v in values):
        return Value(TUPLE, items=(UNKNOWN_VALUE,), keys=(None,))
    order: List[Any] = []
    for v in values:
        order.extend(k for k in v.keys if k is not None and k not in order)  # type: ignore[union-attr]
    items: List[Value] = []
    keys: List[Any] = []
    for k in order:
        present = [read(v, k) for v in values if k in v.keys]  # type: ignore[operator]
        if made == DEFAULT_LIST and len(present) < len(values):
            continue  # an empty list on some path: not known
        keys.append(k)
        items.append(join(present))
    rest = [i for v in values for k, i in zip(v.keys, v.items) if k is None]  # type: ignore[arg-type]
    if rest:
        keys.append(None)
        items.append(join(rest))
    return make(items, keys=tuple(keys), made=made)


# ---------------------------------------------------------------------------- reads
def elements(v: Value) -> Value:
    """One element, whichever: the join of all (unknown for an empty or unknown container)."""
    if v.kind == TUPLE and v.params:
        return UNKNOWN_VALUE  # enumerate()/zip() results
    if not v.items or (v.made == DEFAULT_LIST and v.kind == TUPLE):
        return UNKNOWN_VALUE
    return join(list(v.items))


def read(v: Value, key: Any) -> Value:
    """``v[key]`` (``key``: a constant, or ``_NO_KEY``)."""
    if v.keys is not None and v.kind in (TUPLE, MODULE, INSTANCE):
        if not known(key):
            return elements(v)
        same = [i for k, i in zip(v.keys, v.items) if k == key and type(k) is type(key)]
        summary = [i for k, i in zip(v.keys, v.items) if k is None]
        if not same and not summary:
            return make(()) if v.made == DEFAULT_LIST else UNKNOWN_VALUE
        if not same and v.made == DEFAULT_LIST:
            return UNKNOWN_VALUE
        return join(same[-1:] + summary)
    if v.kind == MODULE and not v.items:
        return UNKNOWN_VALUE
    if v.made == "comp":
        return v.items[0] if v.items else UNKNOWN_VALUE  # every element is the element's value
    if isinstance(key, int) and not isinstance(key, bool) and v.made not in _ORDERLESS:
        if -len(v.items) <= key < len(v.items):
            return v.items[key]
        return UNKNOWN_VALUE
    if not known(key) or v.kind == MODULE:
        return elements(v)
    return UNKNOWN_VALUE


def element_of(v: Value) -> Value:
    """The value of one element when iterating over ``v`` (a dict: its keys)."""
    if v.kind == TUPLE and v.params:
        return v  # enumerate()/zip() results
    if v.keys is not None:
        if v.kind == TUPLE and v.items and all(k is not None for k in v.keys):
            return CONST_VALUE  # constant keys: no tensors
        return UNKNOWN_VALUE
    items = v.items
    if not items:
        return UNKNOWN_VALUE
    if all(i is items[0] for i in items):
        return items[0]
    if all(i.kind in (TENSOR, MODULE, TUPLE, CONST, SCALAR) for i in items):
        return elements(v)
    return UNKNOWN_VALUE


def view(v: Value, attr: str) -> Optional[Value]:
    """``d.values()``, ``d.items()``, ``d.keys()`` of a dict (None for other containers)."""
    if not is_dict(v):
        return None
    if attr == "values":
        return make(v.items, made="joined" if None in v.keys else None)  # type: ignore[operator]
    if attr == "keys":
        return make(CONST_VALUE if k is not None else UNKNOWN_VALUE for k in v.keys)  # type: ignore[union-attr]
    return make(Value(TUPLE, items=(CONST_VALUE if k is not None else UNKNOWN_VALUE, i))
                for k, i in zip(v.keys, v.items))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- stores
def store(v: Value, key: Any, value: Value) -> Value:
    """The container after ``v[key] = value``."""
    if v.keys is not None:
        if known(key):
            pairs = [(k, i) for k, i in zip(v.keys, v.items) if not (k == key and type(k) is type(key))]
            pairs.append((key, value))
        else:
            pairs = list(zip(v.keys, v.items)) + [(None, value)]
        return make((i for _, i in pairs), keys=tuple(k for k, _ in pairs), made=v.made)
    if v.made is None and isinstance(key, int) and -len(v.items) <= key < len(v.items):
        items = list(v.items)
        items[key] = value
        return make(items)
    return make(v.items + (value,), made="comp" if v.made == "comp" and value is v.items[0] else "joined")


def added(v: Value, value: Value, attr: str) -> Value:
    """The list after ``v.append(value)`` / ``v.extend(value)`` / ``v.insert(i, value)``."""
    if attr == "extend":
        new = value.items if value.kind == TUPLE and value.keys is None and not value.params else (UNKNOWN_VALUE,)
    else:
        new = (value,)
    made = "list" if v.made in (None, "list") and attr != "insert" else "joined"
    return make(v.items + tuple(new), made=made)


def updated(v: Value, other: Value) -> Value:
    """The dict after ``v.update(other)``."""
    if is_dict(other):
        out = v
        for k, i in zip(other.keys, other.items):  # type: ignore[arg-type]
            out = store(out, k if k is not None else _NO_KEY, i)
        return out
    return make(v.items + (UNKNOWN_VALUE,), keys=v.keys + (None,), made=v.made)  # type: ignore[operator]


def from_call(name: str, node: cst.Call, args: List[Value]) -> Optional[Value]:
    """``dict(...)``, ``defaultdict(list)``, ``list(xs)``, ``tuple(xs)``, ``OrderedDict(...)``:
    a container, or None when the call is not one of these."""
    if name in ("dict", "OrderedDict"):
        out = make((), keys=())
        for a, v in zip(node.args, args):
            if a.keyword is not None:
                out = store(out, a.keyword.value, v)
            elif a.star == "**":
                out = updated(out, v)
            elif not a.star and is_dict(v):
                out = updated(out, v)
            else:
                return make((UNKNOWN_VALUE,), keys=(None,))  # pairs, or an object the model does not know
        return out
    if name == "defaultdict":
        factory = node.args[0].value if node.args else None
        if type(factory) is cst.Name and factory.value == "list" and len(node.args) == 1:
            return make((), keys=(), made=DEFAULT_LIST)
        return make((UNKNOWN_VALUE,), keys=(None,))
    if name in ("list", "tuple") and len(args) == 1 and not node.args[0].star and args[0].kind == TUPLE \
            and not args[0].params:
        a = args[0]
        if a.keys is not None:
            return make(CONST_VALUE if k is not None else UNKNOWN_VALUE for k in a.keys)
        return make(a.items, made=a.made)
    return None


def module_layers(q: str, node: cst.Call, args: List[Value]) -> Optional[Value]:
    """``nn.Sequential(*layers)``, ``nn.ModuleList(layers or a comprehension)``,
    ``nn.ModuleDict({...})``: a module that keeps its layers (None: not one of these)."""
    if len(args) != 1:
        return None
    a = args[0]
    star = node.args[0].star
    if a.kind != TUPLE or a.params or not a.items or not all(i.kind == MODULE for i in a.items):
        return None
    params = True if any(i.params for i in a.items) else None
    if q == "torch.nn.Sequential" and star == "*" and a.keys is None and a.made != "comp":
        last = a.items[-1]
        act = last.act if a.made is None and last.params is False and not last.inplace else None
        return Value(MODULE, params=params, act=act, items=a.items, made="layers" if a.made else None)
    if q == "torch.nn.ModuleList" and not star and a.keys is None:
        return Value(MODULE, params=params, items=a.items, made="comp" if a.made == "comp" else (
            "layers" if a.made else None))
    if q == "torch.nn.ModuleDict" and not star and a.keys is not None:
        return Value(MODULE, params=params, items=a.items, keys=a.keys)
    return None


def empty_modules(q: str) -> Optional[Value]:
    """``nn.ModuleList()`` / ``nn.ModuleDict()`` / ``nn.Sequential()``, filled later."""
    if q == "torch.nn.ModuleDict":
        return Value(MODULE, params=None, keys=())
    return Value(MODULE, params=None, made="layers")


def module_stored(v: Value, key: Any, value: Value, attr: Optional[str] = None) -> Value:
    """A module container after ``append``/``extend`` (``attr``) or ``v[key] = value``; a layer
    the model does not know makes the layers unknown."""
    if attr == "extend":
        new = value.items if value.kind in (TUPLE, MODULE) and value.keys is None and not value.params else ()
        if not new:
            return Value(MODULE, params=None)
    else:
        new = (value,)
    if any(i.kind != MODULE for i in new) or len(v.items) + len(new) > MAX_ITEMS:
        return Value(MODULE, params=None)
    params = True if v.params or any(i.params for i in new) else None
    if v.keys is not None:
        keys = [k for k in v.keys if not (k == key and type(k) is type(key))] if known(key) else list(v.keys)
        items = [i for k, i in zip(v.keys, v.items) if k in keys]
        return Value(MODULE, params=params, items=tuple(items) + new, keys=tuple(keys) + (key if known(key) else None,))
    if attr is None:
        return Value(MODULE, params=None)  # `self.layers[i] = m`
    return Value(MODULE, params=params, items=v.items + new, made="layers" if v.made != "comp" else "comp")


def module_read(v: Value, key: Any) -> Value:
    """``self.layers[i]`` of a module container (UNKNOWN_VALUE when its layers are not known)."""
    if not v.items:
        return UNKNOWN_VALUE
    if v.keys is not None or v.made == "comp":
        return read(v, key)
    if isinstance(key, int) and v.made is None:
        return v.items[key] if -len(v.items) <= key < len(v.items) else UNKNOWN_VALUE
    return elements(v) if not known(key) or v.made is not None else UNKNOWN_VALUE


NAMED_TUPLE = "namedtuple"  # ``made`` of a NamedTuple instance (its fields also by position)
_DATACLASS = frozenset({"dataclass", "dataclasses.dataclass"})


def record_fields(info: Any) -> Optional[Tuple[List[str], bool]]:
    """The fields of a dataclass or ``typing.NamedTuple`` class of the project, in order (the
    annotated names of its body), and whether it is a NamedTuple; None for other classes and for
    a class that defines ``__init__`` (or has bases the model does not see through)."""
    from gradlint.model.names import dotted

    node = info.node
    named = info.bases == ["NamedTuple"]
    dataclass = any(dotted(d.decorator.func if type(d.decorator) is cst.Call else d.decorator) in _DATACLASS
                    for d in node.decorators)
    if not (named or (dataclass and not info.bases)) or "__init__" in info.methods \
            or "__post_init__" in info.methods:
        return None
    fields: List[str] = []
    for stmt in node.body.body:
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) is cst.AnnAssign and type(small.target) is cst.Name:
                    ann = dotted(small.annotation.annotation.value
                                 if type(small.annotation.annotation) is cst.Subscript
                                 else small.annotation.annotation) or ""
                    if ann.rsplit(".", 1)[-1] in ("ClassVar", "InitVar", "KW_ONLY") or (
                            type(small.value) is cst.Call and (dotted(small.value.func) or "").endswith("field")):
                        return None  # not a plain field of __init__'s signature: positions unknown
                    fields.append(small.target.value)
    return fields, named


def record(info: Any, node: cst.Call, args: List[Value]) -> Optional[Value]:
    """An instance of a dataclass or NamedTuple: its fields are its elements (by name; a field
    the call does not give, a default, is unknown)."""
    found = record_fields(info)
    if found is None:
        return None
    fields, named = found
    values = {f: UNKNOWN_VALUE for f in fields}
    positional = [v for a, v in zip(node.args, args) if a.keyword is None]
    if any(a.star for a in node.args) or len(positional) > len(fields):
        return None
    for f, v in zip(fields, positional):
        values[f] = v
    for a, v in zip(node.args, args):
        if a.keyword is not None:
            if a.keyword.value not in values:
                return None
            values[a.keyword.value] = v
    return Value(INSTANCE, node=info.node.name.value, items=tuple(values[f] for f in fields), keys=tuple(fields),
                 made=NAMED_TUPLE if named else None)


_REORDERS = frozenset({"pop", "remove", "reverse", "sort", "clear"})


def shuffled(v: Value) -> Value:
    """A list or dict whose positions (or keys) are no longer known: one summary element, what
    every element agreed on."""
    summary = join(list(v.items)) if v.items else UNKNOWN_VALUE
    if v.keys is not None:
        return make((summary,), keys=(None,))
    return make((summary,), made="comp")


def keeps_structure(v: Value) -> bool:
    """A container of layers or parameters (kept on ``self`` from ``__init__``)."""
    return v.kind == TUPLE and not v.params and bool(v.items) and all(
        i.kind == MODULE or (i.kind == TENSOR and i.is_param) for i in v.items)


class ContainerMixin:
    """The model's side: stores into containers rebind them, methods of lists and dicts."""

    def rebind_element(self, expr: cst.BaseExpression, new: Value) -> None:
        """``expr`` (``d["k"]``, ``xs[0]``, ``h["loss"][i]``, a name) now holds ``new``: bind
        its key, and store it into the container it is an element of (the container's name
        gets the new container)."""
        from gradlint.model.names import dotted

        if type(expr) is cst.Subscript:
            owner = self.value_of(expr.value)  # type: ignore[attr-defined]
            if owner.kind == TUPLE and not owner.params:
                self.rebind_element(expr.value, store(owner, subscript_key(expr), new))
            elif owner.kind == MODULE and (owner.items or owner.keys is not None or owner.made == "layers"):
                self.rebind_element(expr.value, module_stored(owner, subscript_key(expr), new))
        key = dotted(expr)
        if key is not None:
            env = self.env  # type: ignore[attr-defined]
            old = env.get(key)
            if old is not None and old.kind == TUPLE and new.kind == TUPLE and type(expr) is not cst.Subscript:
                # other names of the same list or dict (`ys = xs`) see the change too
                for k, v in list(env.items()):
                    if v is old and k != key:
                        self.bind_key(k, new)  # type: ignore[attr-defined]
            self.bind_key(key, new)  # type: ignore[attr-defined]

    def container_method(self, receiver: Value, attr: str, node: cst.Call, args: List[Value]) -> Optional[Value]:
        """A method of a list or dict (``append``, ``get``, ``update``, ``values``, ...): its
        result, after rebinding the receiver where the method changes it; None for others."""
        func = node.func
        target = func.value  # type: ignore[attr-defined]
        if receiver.kind == MODULE:
            if attr in ("values", "items", "keys") and not args and receiver.keys is not None:
                return view(Value(TUPLE, items=receiver.items, keys=receiver.keys), attr)
            if attr in ("append", "extend") and len(args) == 1 and (receiver.made in ("layers", "comp") or (
                    receiver.items and receiver.keys is None)):
                self.rebind_element(target, module_stored(receiver, _NO_KEY, args[0], attr))
                return receiver
            return None
        if receiver.params:
            return None
        if receiver.keys is not None:
            if attr in ("values", "items", "keys") and not args:
                return view(receiver, attr)
            if attr in ("get", "pop", "setdefault") and node.args and node.args[0].keyword is None:
                key = const_key(node.args[0].value)
                present = known(key) and key in receiver.keys  # type: ignore[operator]
                if attr == "setdefault" and len(args) > 1 and not present:
                    self.rebind_element(target, store(receiver, key, args[1]))
                    return args[1]
                return read(receiver, key) if present or not known(key) and attr != "get" else UNKNOWN_VALUE
            if attr == "update" and len(args) == 1 and node.args[0].keyword is None:
                self.rebind_element(target, updated(receiver, args[0]))
                return CONST_VALUE
            if attr == "copy" and not args:
                return make(receiver.items, keys=receiver.keys, made=receiver.made)
            if attr in ("clear", "popitem", "update", "__setitem__"):
                self.rebind_element(target, make((UNKNOWN_VALUE,), keys=(None,)))
            return None
        if attr in ("append", "extend", "insert") and args:
            self.rebind_element(target, added(receiver, args[-1], attr))
            return CONST_VALUE
        if attr == "copy" and not args:
            return make(receiver.items, made=receiver.made)
        if attr in _REORDERS:
            # `pop`, `remove`, `reverse`, `sort`, `clear`: positions change; what is left is
            # what every element agrees on
            out = read(receiver, -1 if receiver.made in (None, "list") else _NO_KEY) \
                if attr == "pop" and not args and receiver.items else None
            self.rebind_element(target, shuffled(receiver))
            return out
        return None

    def forget_positions(self, expr: cst.BaseExpression) -> None:
        """``del xs[i]`` / ``del d[k]``: the container's positions change."""
        if type(expr) is cst.Subscript:
            owner = self.value_of(expr.value)  # type: ignore[attr-defined]
            if owner.kind == TUPLE and not owner.params:
                self.rebind_element(expr.value, shuffled(owner))

    def unpack(self, elements: Any, value: Value) -> Optional[List[Value]]:
        """The values of ``a, *rest, b = value`` for a tuple or list of known positions (one per
        target; the starred target gets a list), or None."""
        if value.kind != TUPLE or value.keys is not None or value.params or value.made is not None:
            return None
        star = next(n for n, e in enumerate(elements) if type(e) is cst.StarredElement)
        after = len(elements) - star - 1
        if len(value.items) < star + after:
            return None
        items = value.items
        middle = make(items[star:len(items) - after])
        return list(items[:star]) + [middle] + list(items[len(items) - after:])


__all__ = ["MAX_ITEMS", "make", "read", "store", "added", "updated", "view", "element_of", "elements",
           "join", "join_dicts", "from_call", "module_layers", "module_read", "subscript_key", "const_key",
           "known", "keeps_structure", "is_dict", "ContainerMixin", "UNKNOWN"]
