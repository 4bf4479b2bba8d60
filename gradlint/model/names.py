"""Resolution of torch / numpy names from the module's own imports.

libcst's QualifiedNameProvider costs several times the parse; this does the part gradlint needs
(``import torch as T``, ``from torch import nn, tensor``, ``import torch.nn.functional as F``,
``from torch.nn import Parameter``, ``import numpy as np``) with one dict lookup per name.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst

# Top-level packages whose names the model understands.
KNOWN_ROOTS = frozenset({"torch", "numpy", "copy", "types"})


def dotted(node: cst.BaseExpression) -> Optional[str]:
    """``a.b.c`` for a chain of Names and Attributes, also through constant subscripts
    (``d["x"]``, ``self.cache[0]``), else None."""
    parts = []
    while True:
        if type(node) is cst.Attribute:
            parts.append("." + node.attr.value)
            node = node.value
        elif type(node) is cst.Subscript:
            index = _constant_index(node)
            if index is None:
                return None
            parts.append(index)
            node = node.value
        else:
            break
    if type(node) is cst.Name:
        parts.append(node.value)
        return "".join(reversed(parts))
    return None


_SAFE_KEY = re.compile(r"^[A-Za-z0-9_]*$")
_STRINGS: Dict[str, Any] = {}


def string_value(node: cst.SimpleString) -> Any:
    """``node.evaluated_value``, remembered by the literal's source text: libcst evaluates it with
    ``ast.literal_eval`` at every read, and the model reads the same keys (``d["x"]``) very often."""
    raw = node.value
    v = _STRINGS.get(raw, _STRINGS)
    if v is _STRINGS:
        if len(_STRINGS) > 50_000:
            _STRINGS.clear()
        v = _STRINGS[raw] = node.evaluated_value
    return v


def _constant_index(node: cst.Subscript) -> Optional[str]:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    v = node.slice[0].slice.value
    if type(v) is cst.Integer:
        return f"[{v.value}]"
    if type(v) is cst.SimpleString:
        text = string_value(v)
        if isinstance(text, str) and _SAFE_KEY.match(text):
            return f"[{text!r}]"
    return None


def _module_name(node: cst.BaseExpression) -> str:
    return dotted(node) or ""


class ImportMap:
    """local name -> fully qualified name, for imports of the known packages."""

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: Dict[str, str] = {}

    def add_import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = _module_name(alias.name)
            root = full.split(".", 1)[0]
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                local = alias.asname.name.value
                if root in KNOWN_ROOTS:
                    self.names[local] = full
                else:
                    self.names.pop(local, None)
            else:
                # ``import torch.nn`` binds ``torch``
                if root in KNOWN_ROOTS:
                    self.names[root] = root
                else:
                    self.names.pop(root, None)

    def add_import_from(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            names = node.names
            if not type(names) is cst.ImportStar:
                for alias in names:
                    local = alias.evaluated_alias or alias.evaluated_name
                    self.names.pop(local, None)
            return
        mod = _module_name(node.module)
        root = mod.split(".", 1)[0]
        if type(node.names) is cst.ImportStar:
            return
        for alias in node.names:
            name = alias.evaluated_name
            local = alias.evaluated_alias or name
            if root in KNOWN_ROOTS:
                self.names[local] = f"{mod}.{name}"
            else:
                self.names.pop(local, None)

    def forget(self, local: str) -> None:
        """A plain assignment rebinds the name: it no longer refers to the import."""
        self.names.pop(local, None)

    def spelling(self, full: str, module_first: bool = False) -> Optional[str]:
        """How this module can write ``full`` (a qualified name such as ``torch.no_grad``):
        a local name imported as it, or ``<local>.<rest>`` through an imported parent module
        (``T.no_grad`` after ``import torch as T``); ``module_first`` prefers the latter."""
        direct = via_module = None
        for local, q in self.names.items():
            if direct is None and canonical(q) == full:
                direct = local
            elif via_module is None and full.startswith(q + "."):
                via_module = local + full[len(q):]
        if self.names.get(full.split(".", 1)[0]) == full.split(".", 1)[0] and "." in full:
            via_module = full  # the package imported under its own name
        return (via_module or direct) if module_first else (direct or via_module)

    def qualname(self, node: cst.BaseExpression) -> Optional[str]:
        """The fully qualified name of ``node`` if it refers to a known package, else None."""
        parts = []
        while type(node) is cst.Attribute:
            parts.append(node.attr.value)
            node = node.value
        if not type(node) is cst.Name:
            return None
        base = self.names.get(node.value)
        if base is None:
            return None
        if parts:
            return base + "." + ".".join(reversed(parts))
        return base


# Aliases that torch exposes under more than one path; normalised so tables list one spelling.
CANONICAL_PREFIXES = (
    ("torch.nn.modules.", None),  # torch.nn.modules.linear.Linear -> torch.nn.Linear
    ("torch.autograd.grad_mode.", "torch."),
    ("torch.nn.parameter.", "torch.nn."),
    ("torch.autograd.no_grad", "torch.no_grad"),
    ("torch.autograd.enable_grad", "torch.enable_grad"),
    ("torch.autograd.set_grad_enabled", "torch.set_grad_enabled"),
    ("torch.autograd.inference_mode", "torch.inference_mode"),
    ("torch._C._set_grad_enabled", "torch.set_grad_enabled"),
    ("np.", "numpy."),
)


def canonical(q: Optional[str]) -> Optional[str]:
    if q is None:
        return None
    for prefix, repl in CANONICAL_PREFIXES:
        if q.startswith(prefix):
            if repl is None:
                # drop the submodule: torch.nn.modules.linear.Linear -> torch.nn.Linear
                return "torch.nn." + q.rsplit(".", 1)[-1]
            return repl + q[len(prefix):]
    return q


_SKIP_FIELD_PARTS = ("whitespace", "lpar", "rpar", "comma", "semicolon", "colon", "lbracket",
                     "rbracket", "lbrace", "rbrace", "leading_lines", "lines_after_decorators",
                     "header", "footer", "newline", "equal", "dot", "arrow", "operator",
                     "asynchronous", "star", "asname", "trailing_whitespace")
_FIELDS: Dict[type, Tuple[str, ...]] = {}
_IS_NODE: Dict[type, bool] = {}


def is_node(t: type) -> bool:
    """``issubclass(t, cst.CSTNode)``, cached: isinstance() on libcst's ABC is slow."""
    v = _IS_NODE.get(t)
    if v is None:
        v = _IS_NODE[t] = issubclass(t, cst.CSTNode)
    return v


def child_fields(t: type) -> Tuple[str, ...]:
    """The fields of node type ``t`` that hold child nodes (whitespace and punctuation skipped)."""
    f = _FIELDS.get(t)
    if f is None:
        names = []
        for fl in dataclasses.fields(t):
            n = fl.name
            if any(p in n for p in _SKIP_FIELD_PARTS) and n not in ("operator_",):
                continue
            names.append(n)
        f = _FIELDS[t] = tuple(names)
    return f


def node_children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The child nodes of ``node`` (no whitespace or punctuation), read from its fields: libcst's
    ``children`` property rebuilds the node through its visitor machinery and is far slower."""
    out: List[cst.CSTNode] = []
    for f in child_fields(type(node)):
        c = getattr(node, f)
        if c is None:
            continue
        t = type(c)
        if t is tuple or t is list:
            out.extend(c)  # (libcst's sequence fields hold nodes only)
        elif is_node(t):
            out.append(c)
    return out


_FACTS: Dict[Tuple[Any, int], Tuple[Any, Any]] = {}


def node_fact(tag: Any, node: Any, compute: Any) -> Any:
    """``compute(node)``, remembered per (``tag``, node) for the process: for facts that depend on
    a syntax node alone (a scan of a function's body), which the walk asks again at every call of
    the function. The entry holds the node, so its id cannot be reused while it is remembered."""
    key = (tag, id(node))
    hit = _FACTS.get(key)
    if hit is not None and hit[0] is node:
        return hit[1]
    if len(_FACTS) > 200_000:
        _FACTS.clear()
    value = compute(node)
    _FACTS[key] = (node, value)
    return value


def subtree(node: cst.CSTNode, nested: bool = True) -> Iterator[cst.CSTNode]:
    """``node`` and every node below it; with ``nested=False``, not into the functions, classes
    and lambdas defined below it."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if nested:
            stack.extend(node_children(n))
        else:
            stack.extend(c for c in node_children(n) if type(c) not in DEFINITION_TYPES)


def called_names(node: cst.CSTNode) -> Set[str]:
    """The names of the functions and methods called anywhere inside ``node`` (``f(...)`` and
    ``x.f(...)`` give ``f``). For rare checks only, never per node."""
    return call_facts(node)[0]


_CALL, _NAME, _ATTRIBUTE, _ASSIGN = cst.Call, cst.Name, cst.Attribute, cst.Assign
DEFINITION_TYPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})


def call_facts(node: cst.CSTNode) -> Tuple[Set[str], bool]:
    """``(called_names(node), clears_grad(node))`` in one pass over ``node`` (a function's body:
    computed once per function, over every function a file can call; exact types compared,
    since ``isinstance`` on libcst's abstract classes is slow)."""
    names: Set[str] = set()
    clears = False
    stack: List[Tuple[Any, bool]] = [(node, False)]
    pop, push = stack.pop, stack.append
    while stack:
        n, nested = pop()
        t = type(n)
        if t is _CALL:
            f = n.func
            ft = type(f)
            if ft is _NAME:
                names.add(f.value)
            elif ft is _ATTRIBUTE:
                attr = f.attr.value
                names.add(attr)
                if attr == "zero_" and not nested and not clears and grad_attribute(f.value):
                    clears = True
        elif t is _ASSIGN and not nested and not clears and _drops_grad(n):
            clears = True
        inner = nested or (t in DEFINITION_TYPES and n is not node)
        for c in node_children(n):
            push((c, inner))
    return names, clears


def _drops_grad(n: cst.Assign) -> bool:
    """``x.grad = None``."""
    return type(n.value) is _NAME and n.value.value == "None" \
        and any(type(t.target) is _ATTRIBUTE and t.target.attr.value == "grad" for t in n.targets)


def grad_attribute(node: Any) -> bool:
    """Is ``node`` the ``.grad`` of something, or its ``.data`` (``p.grad``, ``p.grad.data``)?"""
    if type(node) is cst.Attribute and node.attr.value == "data":
        node = node.value
    return type(node) is cst.Attribute and node.attr.value == "grad"


def clears_grad(node: cst.CSTNode) -> bool:
    """Does the code under ``node`` (not a nested function's or class's) clear a ``.grad`` in
    place or drop it (``p.grad.zero_()``, ``p.grad.data.zero_()``, ``p.grad = None``)? For rare
    checks only (once per function), never per node."""
    return call_facts(node)[1]


def read_names(expr: Any) -> Set[str]:
    """The plain names an expression or statement reads as variables (not attribute names, not
    keywords): ``train(model, opt=optimizer)`` reads train, model, optimizer."""
    out: Set[str] = set()
    stack = [expr]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.Name:
            out.add(n.value)
        elif t is cst.Attribute:
            stack.append(n.value)
        elif t is cst.Arg:
            stack.append(n.value)
        else:
            stack.extend(node_children(n))
    return out


def rebound_names(node: cst.CSTNode) -> Set[str]:
    """The plain names assigned anywhere inside ``node`` (``x = ...``, ``x += ...``, ``for x in``,
    ``with ... as x``, tuple targets). It walks libcst's ``children``: for rare checks only."""
    names: Set[str] = set()
    stack: List[cst.CSTNode] = [node]
    while stack:
        n = stack.pop()
        targets: list = []
        if type(n) is cst.Assign:
            targets = [t.target for t in n.targets]
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For)):
            targets = [n.target]
        elif type(n) is cst.AsName:
            targets = [n.name]
        while targets:
            t = targets.pop()
            if type(t) is cst.Name:
                names.add(t.value)
            elif isinstance(t, (cst.Tuple, cst.List)):
                targets.extend(e.value for e in t.elements)
            elif type(t) is cst.StarredElement:
                targets.append(t.value)
        stack.extend(node_children(n))
    return names


def reads_key(node: cst.CSTNode, key: str) -> bool:
    """Does ``node`` read the name or attribute chain ``key`` anywhere inside?"""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.Name, cst.Attribute)) and dotted(n) == key:
            return True
        stack.extend(node_children(n))
    return False


def reads_grad_of(expr: cst.CSTNode, key: str) -> bool:
    """Does ``expr`` contain ``<key>.grad`` (a manual update: ``w - lr * w.grad``)?"""
    stack = [expr]
    while stack:
        n = stack.pop()
        if type(n) is cst.Attribute and n.attr.value == "grad" and dotted(n.value) == key:
            return True
        stack.extend(node_children(n))
    return False


def grad_names(scope: cst.CSTNode, key: str) -> Set[str]:
    """The plain names of ``scope`` (a function, or a module's top level; not its nested
    functions or classes) that hold something computed from ``<key>.grad`` wherever they are
    bound (``g = w.grad``, ``step = w.grad.sign() * lr``, ``g2 = g.detach()``): every binding of
    such a name is an assignment that reads ``<key>.grad`` or another such name. A name bound
    any other way (a loop target, a tuple target, ``with ... as``) is none of them. For rare
    checks only (a write to a leaf that requires grad), never per node."""
    values: Dict[str, List[cst.CSTNode]] = {}
    other: Set[str] = set()
    for n in subtree(scope, nested=False):
        if type(n) is cst.Assign:
            for t in n.targets:
                if type(t.target) is cst.Name:
                    values.setdefault(t.target.value, []).append(n.value)
                else:
                    other |= rebound_names(t.target)
        elif type(n) is cst.AnnAssign and type(n.target) is cst.Name and n.value is not None:
            values.setdefault(n.target.value, []).append(n.value)
        # (an augmented assignment, `g *= lr`, keeps what g was computed from)
        elif isinstance(n, (cst.For, cst.AsName, cst.NamedExpr, cst.CompFor)):
            other |= rebound_names(n.target if not isinstance(n, cst.AsName) else n.name)
    found: Set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, exprs in values.items():
            if name in found or name in other:
                continue
            if all(reads_grad_of(e, key) or _reads_names(e, found) for e in exprs):
                found.add(name)
                changed = True
    return found


def _reads_names(expr: cst.CSTNode, names: Set[str]) -> bool:
    return bool(names) and any(type(n) is cst.Name and n.value in names for n in subtree(expr, nested=False))


def reads_grad_through(expr: cst.CSTNode, key: str, scope: Optional[cst.CSTNode]) -> bool:
    """Does ``expr`` read ``<key>.grad``, directly or through a name of ``scope`` computed from it
    (``grad_names``)?"""
    if reads_grad_of(expr, key):
        return True
    if scope is None or not any(type(n) is cst.Name for n in subtree(expr, nested=False)):
        return False
    return _reads_names(expr, grad_names(scope, key))
