"""Path conditions inside a loop iteration, for rules that ask whether some path through one
iteration runs one call and skips others (a GradScaler's ``step()`` without ``update()``): the
names a loop binds, what a condition reads, conditions in a canonical form (``not x`` is ``x``
negated), and a small search over the conditions' truth values where conditions that do not
change in the loop are fixed for all of it."""

from __future__ import annotations

import itertools
from typing import Any, Dict, List, Optional, Set, Tuple

import libcst as cst

from gradlint.model.names import dotted, subtree

_NEGATED = {"NotEqual": "Equal", "GreaterThanEqual": "LessThan", "LessThanEqual": "GreaterThan",
            "IsNot": "Is", "NotIn": "In"}
MAX_ATOMS = 12

# a literal: (the condition's atom, its polarity, whether it may change from one iteration to the next)
Literal = Tuple[str, bool, bool]


def path_skipping(required: List[Literal], avoided: List[List[Literal]]) -> bool:
    """Is there a path that satisfies every literal of ``required`` and fails each conjunction of
    ``avoided``? The atoms that do not change in the loop are fixed for the whole loop: the path
    must exist whichever way they go (as long as ``required`` holds); the others may go either
    way on some iteration. False when there are too many atoms to try."""
    if any(not lits for lits in avoided):
        return False  # a conjunction that always holds
    atoms: Dict[str, bool] = {}
    for atom, _, varying in required + [lit for lits in avoided for lit in lits]:
        atoms[atom] = atoms.get(atom, False) or varying
    if len(atoms) > MAX_ATOMS:
        return False
    fixed = [k for k, v in atoms.items() if not v]
    free = [k for k, v in atoms.items() if v]
    consistent = False
    for values in itertools.product((True, False), repeat=len(fixed)):
        env = dict(zip(fixed, values))
        if not all(env.get(atom, pol) == pol for atom, pol, varying in required if not varying):
            continue
        consistent = True
        if not any(_skips(dict(env, **dict(zip(free, more))), required, avoided)
                   for more in itertools.product((True, False), repeat=len(free))):
            return False
    return consistent


def key_at_call_site(key: Optional[str], e: Any, index: int, fn: Any) -> Optional[str]:
    """What ``key`` (a name in the function of event ``e``) is called in the loop's own function:
    itself when ``e`` is there; through the arguments of the call in the loop when ``e`` is in a
    helper the loop calls directly (``def amp_step(scaler, opt)`` called as
    ``amp_step(self.scaler, optimizer)``); else None."""
    if key is None:
        return None
    if e.function is fn:
        return key
    outside = e.levels[index] if index < len(e.levels) else None
    helper = e.function
    if outside is None or helper is None or len(e.chain) != outside + 2:
        return None
    statement = e.chain[outside]
    name = helper.name.value
    calls = [n for n in subtree(statement, nested=False) if type(n) is cst.Call
             and (dotted(n.func) or "").rsplit(".", 1)[-1] == name]
    if len(calls) != 1:
        return None
    call = calls[0]
    params = [p.name.value for p in helper.params.params]
    args = {}
    if type(call.func) is cst.Attribute and params and params[0] in ("self", "cls"):
        args[params[0]] = call.func.value
        params = params[1:]
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            args[arg.keyword.value] = arg.value
        elif i < len(params):
            args[params[i]] = arg.value
    root, _, rest = key.partition(".")
    given = args.get(root)
    outer = dotted(given) if given is not None else None
    if outer is None:
        return None
    return f"{outer}.{rest}" if rest else outer


def last_small_statement(body: Any) -> Optional[Any]:
    """The last simple statement of a block (None when it ends in a compound statement)."""
    stmts = list(body.body) if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else []
    if not stmts:
        return None
    last = stmts[-1]
    if isinstance(last, cst.SimpleStatementSuite) or isinstance(last, cst.SimpleStatementLine):
        return last.body[-1] if last.body else None
    return last if isinstance(last, cst.BaseSmallStatement) else None


def _skips(env: Dict[str, bool], a_lits: List[Literal], u_lits: List[List[Literal]]) -> bool:
    if not all(env[atom] == pol for atom, pol, _ in a_lits):
        return False
    return all(any(env[atom] != pol for atom, pol, _ in lits) for lits in u_lits)


def bound_keys(node: Any) -> Set[str]:
    """The names and attributes bound under ``node`` (assigned, loop targets, ``with ... as``)."""
    out: Set[str] = set()

    def add(target: Any) -> None:
        if type(target) in (cst.Tuple, cst.List):
            for el in target.elements:
                add(el.value)
        elif type(target) is cst.StarredElement:
            add(target.value)
        else:
            key = dotted(target)
            if key is not None:
                out.add(key)

    for n in subtree(node, nested=False):
        t = type(n)
        if t is cst.AssignTarget:
            add(n.target)
        elif t in (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor):
            add(n.target)
        elif t is cst.AsName:
            add(n.name)
        elif t is cst.NamedExpr:
            add(n.target)
    return out


def overlaps(key: Optional[str], bound: Set[str]) -> bool:
    if key is None:
        return False
    return any(b == key or key.startswith(b + ".") or b.startswith(key + ".") for b in bound)


def reads_bound(key: str, bound: Set[str]) -> bool:
    """Does reading ``key`` read something bound in the loop (``a.b`` when ``a`` or ``a.b`` is)?"""
    return any(b == key or key.startswith(b + ".") for b in bound)


def reads(expr: Any) -> List[str]:
    """The names and attribute chains an expression reads, whole (``self.step``, not ``self``)."""
    out: List[str] = []
    stack = [expr]
    while stack:
        n = stack.pop()
        if type(n) in (cst.Name, cst.Attribute):
            key = dotted(n)
            if key is not None:
                out.append(key)
                continue
        if type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        stack.extend(n.children)
    return out


def canonical_test(test: Any) -> Tuple[Any, bool]:
    """``not x`` is ``x`` negated; ``a != b`` is ``a == b`` negated (and ``>=``/``<``, ...)."""
    pol = True
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test, pol = test.expression, not pol
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        op = type(test.comparisons[0].operator).__name__
        if op in _NEGATED:
            positive = getattr(cst, _NEGATED[op])()
            target = test.comparisons[0].with_changes(operator=positive)
            return test.with_changes(comparisons=[target], lpar=[], rpar=[]), not pol
        return test.with_changes(lpar=[], rpar=[]), pol
    return test, pol
