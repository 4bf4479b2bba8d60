"""The abstract values the model assigns to names and expressions.

Values are immutable; identity is meaningful (a join keeps a name's value when every branch
holds the very same object; else lattice.py makes a value of what every branch agrees on). ``None`` in a tri-state field means "the model does not
know", and rules stay quiet on what the model does not know.
"""

from __future__ import annotations

import itertools
from typing import Any, FrozenSet, List, Optional, Tuple

_ids = itertools.count(1)
_last_id = [0]


def next_id() -> int:
    """The id the next Value will get: values with smaller ids were made before now."""
    return _last_id[0] + 1


# kinds
TENSOR = "tensor"
NDARRAY = "ndarray"
SCALAR = "scalar"  # a Python number taken out of a tensor (.item(), float(t), .tolist())
MODULE = "module"  # an nn.Module instance
PARAMS = "params"  # model.parameters() / list(model.parameters())
NAMED_PARAMS = "named_params"
TUPLE = "tuple"  # a tuple/list literal, or a tuple-returning call; ``items`` holds elements
FUNCTION = "function"  # a function defined in this module
CLASS = "class"
OPTIMIZER = "optimizer"  # a torch.optim optimizer; ``node`` holds the key of the module it optimises
INSTANCE = "instance"  # an instance of a (non-module) class of this file; ``node`` holds the class name
NAMESPACE = "namespace"  # a module of the project bound to a name (``import models``); node: its ModuleScope
CONST = "const"  # a literal that is certainly no tensor: a string, None, True, False
UNKNOWN = "unknown"


class Cut:
    """A place where a value was taken out of autograd and brought back as a new tensor:
    ``kind`` is 'numpy' (from_numpy/tensor of an ndarray), 'scalar' (tensor of .item()/.tolist()),
    'detach_rg' (detach then requires_grad), 'copy_rg' (torch.tensor(t, requires_grad=True)),
    'parameter' (nn.Parameter(non_leaf)). ``src`` is the graph value that was cut."""

    __slots__ = ("node", "kind", "src", "statement", "result", "after_backward", "in_loop")

    def __init__(self, node: Any, kind: str, src: "Value", statement: Any) -> None:
        self.node = node
        self.kind = kind
        self.src = src
        self.statement = statement
        self.result: "Optional[Value]" = None  # the new tensor made at the cut
        # the source's inputs were back-propagated before the cut (a new leaf made from an
        # updated value, step after step): nothing upstream waits for a gradient through it
        self.after_backward = False
        self.in_loop = False  # made in a loop body (or a function walked from one)


class Value:
    __slots__ = (
        "kind", "rg", "leaf", "probable", "view_of_leaf", "id", "deps", "cuts", "src", "items",
        "params", "node", "is_param", "alias_of", "alias_kind", "act", "inplace", "fresh", "made",
        "made_node", "certain", "dtype", "inference", "alts", "mdeps", "numel", "keys", "owner",
    )

    def __init__(
        self,
        kind: str,
        *,
        rg: Optional[bool] = None,
        leaf: Optional[bool] = None,
        probable: bool = False,
        view_of_leaf: bool = False,
        deps: FrozenSet[int] = frozenset(),
        cuts: FrozenSet[Cut] = frozenset(),
        src: "Optional[Value]" = None,
        items: "Tuple[Value, ...]" = (),
        params: Optional[bool] = None,
        node: Any = None,
        is_param: bool = False,
        alias_of: "Optional[Value]" = None,
        alias_kind: Optional[str] = None,
        act: Optional[str] = None,
        inplace: bool = False,
        fresh: bool = False,
        made: Optional[str] = None,
        made_node: Any = None,
        certain: bool = True,
        dtype: Optional[str] = None,
        inference: bool = False,
        mdeps: Optional[FrozenSet[int]] = None,
        numel: Any = None,
        keys: "Optional[Tuple[Any, ...]]" = None,
    ) -> None:
        self.kind = kind
        self.rg = rg  # tensor: requires grad (True/False/None)
        self.leaf = leaf  # tensor: is a graph leaf (True/False/None)
        self.probable = probable  # rg inferred from a module call: parameters may be frozen
        self.view_of_leaf = view_of_leaf  # a view of a leaf that requires grad
        self.id = _last_id[0] = next(_ids)
        # ids of the requires-grad values this value depends on differentiably (itself included)
        self.deps = deps | {self.id} if rg else deps
        # the part of ``deps`` that holds on every path, where a join made them differ (None: all
        # of ``deps``); see lattice.must_deps
        self.mdeps = None if mdeps is None else (mdeps | {self.id} if rg else mdeps)
        self.cuts = cuts
        self.src = src  # detached / ndarray / scalar: the graph value it was taken from
        self.items = items
        # a dict (kind TUPLE) or a ModuleDict (kind MODULE): the constant key of each element of
        # ``items`` (None: stored under a key the model does not know); see containers.py
        self.keys = keys
        self.params = params  # module: has trainable parameters (True/False/None)
        self.node = node  # function/class definitions
        self.is_param = is_param  # a module parameter (loop variable of .parameters())
        # shares storage with ``alias_of``: 'data' (t.data), 'detach' (t.detach()), 'numpy'
        self.alias_of = alias_of
        self.alias_kind = alias_kind
        self.act = act  # module: the op its forward applies (e.g. 'sigmoid'), if known
        self.inplace = inplace  # module: constructed with inplace=True
        self.fresh = fresh  # a leaf straight from a factory with requires_grad=True
        # how a tensor was made, when a rule cares: 'conv' (a fresh leaf converted: .cuda(),
        # .double(), * 0.01, ...), 'rewrap' (a graph-less value made to require grad),
        # 'computed' (the result of a computation that did not record a graph)
        self.made = made
        self.made_node = made_node
        self.certain = certain  # for made='conv': the conversion certainly copies
        # tensor: its floating dtype when certain ('float32', 'float64', 'float16', 'bfloat16'),
        # where a conversion's effect depends on it (`.float()` of float32 returns the tensor)
        self.dtype = dtype
        # tensor: certainly an inference tensor (made under torch.inference_mode(), or a view
        # of one): autograd cannot save it for backward
        self.inference = inference
        # tensor: what is certain or likely about its number of elements (shapes.Numel: several,
        # one per sample), None when unknown; a criterion module: that of its output
        self.numel = numel
        # a join of several paths' values (see lattice.py): what it may be; the fields above
        # hold what it must be
        self.alts: "Tuple[Value, ...]" = ()
        # a parameter taken out of ``m.parameters()``/``m.named_parameters()`` (a loop variable,
        # a comprehension's element): the module ``m`` (None when unknown)
        self.owner: "Optional[Value]" = None

    # convenience predicates --------------------------------------------------------------
    @property
    def is_tensor(self) -> bool:
        return self.kind == TENSOR

    @property
    def leaf_requiring_grad(self) -> bool:
        return self.kind == TENSOR and self.rg is True and self.leaf is True

    @property
    def requires_grad(self) -> bool:
        return self.kind == TENSOR and self.rg is True

    def __repr__(self) -> str:  # for debugging and test failure messages
        bits = [self.kind]
        if self.kind == TENSOR:
            bits.append(f"rg={self.rg} leaf={self.leaf}")
            if self.probable:
                bits.append("probable")
            if self.view_of_leaf:
                bits.append("view_of_leaf")
        if self.src is not None:
            bits.append(f"src={self.src.id}")
        if self.cuts:
            bits.append(f"cuts={sorted(c.kind for c in self.cuts)}")
        return f"<Value#{self.id} {' '.join(bits)}>"


UNKNOWN_VALUE = Value(UNKNOWN)
CONST_VALUE = Value(CONST)
NONE_VALUE = Value(CONST)  # the literal None (a name bound to it holds None on every path)


def tensor(**kw: Any) -> Value:
    return Value(TENSOR, **kw)


def plain_tensor(cuts: FrozenSet[Cut] = frozenset(), src: Optional[Value] = None,
                 alias_of: Optional[Value] = None, alias_kind: Optional[str] = None) -> Value:
    """A tensor that is not part of any graph (a leaf that does not require grad)."""
    return Value(TENSOR, rg=False, leaf=True, cuts=cuts, src=src, alias_of=alias_of, alias_kind=alias_kind)


def leaf_rg(cuts: FrozenSet[Cut] = frozenset(), is_param: bool = False, fresh: bool = False,
            made: Optional[str] = None, made_node: Any = None) -> Value:
    return Value(TENSOR, rg=True, leaf=True, cuts=cuts, is_param=is_param, fresh=fresh, made=made,
                 made_node=made_node)


def union(sets) -> frozenset:
    out: frozenset = frozenset()
    for s in sets:
        if s:
            out = out | s if out else s
    return out


def flatten(v: Value) -> List[Value]:
    if v.kind == TUPLE:
        out: List[Value] = []
        for i in v.items:
            out.extend(flatten(i))
        return out
    return [v]


def src_of(v: Value) -> Optional[Value]:
    if v.kind == TUPLE:
        for i in v.items:
            s = src_of(i)
            if s is not None:
                return s
        return None
    if v.kind == TENSOR:
        return v if v.rg else v.src
    return v.src


def element_of(v: Value) -> Value:
    """The value of one element when iterating over ``v``."""
    if v.kind in (PARAMS, NAMED_PARAMS):
        # the parameters of a module the code froze (requires_grad_(False)) do not require grad
        p = leaf_rg(is_param=True) if v.params is not False else Value(TENSOR, rg=False, leaf=True, is_param=True)
        p.owner = v.alias_of if v.alias_of is not None and v.alias_of.kind == MODULE else None
        return p if v.kind == PARAMS else Value(TUPLE, items=(Value(SCALAR), p))
    if v.kind in (TUPLE, MODULE):
        from gradlint.model.containers import element_of as container_element  # (containers.py)

        return container_element(v)
    return UNKNOWN_VALUE


def join_values(values: "List[Value]") -> Value:
    from gradlint.model.lattice import join_values as join  # the joins live in lattice.py

    return join(values)
