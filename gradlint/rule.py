"""Rules, findings and the registry.

A rule is one self-contained class in ``rules/`` (installed as ``gradlint.rules``): its
metadata, its documentation (the class docstring) and its visit logic. Rules receive nodes from
the single traversal (``gradlint.model.walk``) through methods named ``visit_<NodeType>`` and
``leave_<NodeType>``, and model events through ``on_<event>`` methods (see
``gradlint.model.state.Model``). They ask the model what names hold; they keep no flow state.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import os
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Type

# Where each rule's documentation is published: one setting. No home is published yet, so by
# default findings carry no link (the documentation ships with the package: `gradlint rule GLxxx`);
# GRADLINT_DOCS_URL sets one (a published copy, a fork, an internal mirror): a URL with "{anchor}"
# where the rule's anchor goes (e.g. https://example.org/gradlint/rules.html#{anchor}), or a base
# URL to which "#<anchor>" is appended.
DOCS_URL = ""


def docs_url() -> str:
    value = os.environ.get("GRADLINT_DOCS_URL", "").strip() or DOCS_URL
    if not value:
        return ""
    return value if "{anchor}" in value else value.rstrip("#") + "#{anchor}"


class Severity(str, enum.Enum):
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return 1 if self is Severity.WARNING else 2


@dataclass(frozen=True)
class Edit:
    """Replace ``[start, end)`` (character offsets in the decoded source) with ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Fix:
    edits: Tuple[Edit, ...]
    safe: bool = True
    description: str = ""


@dataclass
class Finding:
    """One diagnostic. Errors are data: reporters, suppressions and caches only see these."""

    path: str
    line: int  # 1-based
    column: int  # 1-based
    end_line: int
    end_column: int
    code: str
    name: str
    severity: Severity
    message: str
    hint: str = ""
    fixable: bool = False
    url: str = ""
    source_line: str = ""
    # first line of the enclosing statement (for noqa on multi-line statements)
    statement_line: int = 0
    fix: Optional[Fix] = field(default=None, compare=False, repr=False)
    # other places that belong to the finding (the symptom, when the finding is at the cause):
    # (line, column, message)
    related: Tuple[Tuple[int, int, str], ...] = ()
    # notebooks: the cell (1-based position among all cells; ``line`` is then the line in the
    # cell) and the line of the .ipynb file that holds that source line
    cell: int = 0
    raw_line: int = 0

    def sort_key(self) -> Tuple[Any, ...]:
        return (self.path, self.cell, self.line, self.column, self.code, self.message)

    @property
    def file_line(self) -> int:
        """The line in the file itself (for formats that point into the file: SARIF, GitHub)."""
        return self.raw_line or self.line

    @property
    def where(self) -> str:
        """``line`` or ``cell N:line`` (notebooks)."""
        return f"cell {self.cell}:{self.line}" if self.cell else str(self.line)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "message": self.message,
            "hint": self.hint,
            "fixable": self.fixable,
            "url": self.url,
            "related": [{"line": ln, "column": col, "message": msg} for ln, col, msg in self.related],
            **({"cell": self.cell} if self.cell else {}),
        }


class Rule:
    """Base class of every rule.

    Subclasses set ``code``, ``name`` (kebab-case), ``severity``, ``message`` (a ``str.format``
    template), ``hint`` (one line: what to do instead) and write their documentation as the class
    docstring with the sections What it does / Why is this bad / Example / Use instead /
    References (and Fix safety when they fix).
    """

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    severity: ClassVar[Severity] = Severity.ERROR
    message: ClassVar[str] = ""
    hint: ClassVar[str] = ""
    fixable: ClassVar[bool] = False
    # rules in the opinionated band are off unless selected explicitly
    default_enabled: ClassVar[bool] = True

    def __init__(self, model: Any, sink: "List[Tuple[Rule, Any, Dict[str, Any]]]") -> None:
        self.model = model
        self._sink = sink

    def report(
        self,
        node: Any,
        *,
        severity: Optional[Severity] = None,
        fix: Optional[Fix] = None,
        context: Optional[Tuple[Any, Tuple[str, ...]]] = None,
        related: Sequence[Tuple[Any, str]] = (),
        note: str = "",
        **message_args: Any,
    ) -> None:
        """Record a finding at ``node`` (a libcst node). Positions are computed later, and only
        for files that have findings. A rule that reports after the fact (at a later
        ``backward()``) passes the ``context`` it took with ``self.model.here()`` at ``node``.
        ``related``: ``(node, message)`` pairs for other places of the finding (the symptom, when
        ``node`` is the line to change)."""
        where = context if context is not None else self.model.here()
        statement, assumed = where[0], where[1]
        if len(where) > 2 and where[2]:
            return  # inside `with pytest.raises(...)`: the code expects the error
        self._sink.append(
            (
                self,
                node,
                {
                    "args": message_args,
                    "severity": severity,
                    "fix": fix,
                    "statement": statement,
                    "assumed": assumed,
                    "related": tuple(related),
                    "note": note,
                    # in another module's code reached from this file: the call in this file
                    "via": where[3] if len(where) > 3 else (self.model.root_call_site() if self.model is not None else None),
                    # the parsed module the node is in (None: the linted file), as far as the walk knows
                    "src": where[4] if len(where) > 4 else (self.model.scope.src if self.model is not None else None),
                },
            )
        )

    def report_value(self, node: Any, value: Any, **kw: Any) -> None:
        """``report`` for a finding about ``value``: when the value comes over a loop's back edge
        (the second iteration sees what the end of the first bound), the line to change is that
        binding; the finding goes there, with ``node`` (the symptom) as a related location."""
        cause = self.model.carried_cause(value)
        if cause is None:
            self.report(node, **kw)
        else:
            self.report(cause, context=(cause, ()), related=[(node, "where the next iteration fails")],
                        note=" (on the next iteration, at the related location: the value bound here arrives there)", **kw)

    # -- metadata helpers -------------------------------------------------------------------
    @classmethod
    def docs(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        doc = cls.docs()
        m = re.search(r"## What it does\s*\n(.+?)(?:\n\s*\n|\Z)", doc, re.S)
        text = " ".join((m.group(1) if m else doc.split("\n\n", 1)[0]).split())
        # the first sentence
        cut = re.search(r"[.:](\s|$)", text)
        return text[: cut.start() + 1].rstrip(":") + ("" if text[cut.start()] == "." else ".") if cut else text

    @classmethod
    def url(cls) -> str:
        """The rule's documentation on the web ("" while no docs URL is set)."""
        base = docs_url()
        return base.format(anchor=f"{cls.code}-{cls.name}".lower()) if base else ""


class BackwardRule(Rule):
    """A rule whose findings are confirmed by a later ``backward()``: an in-place write to a
    saved tensor is only an error when a backward pass through the op that saved it follows.
    ``defer()`` records a candidate with the ids of the values whose backward needs the tensor;
    ``confirmed()`` is called (once) when a ``backward()`` on a value that depends on one of them
    follows; ``unconfirmed()`` at the end of the file for the rest."""

    def __init__(self, model: Any, sink: "List[Tuple[Rule, Any, Dict[str, Any]]]") -> None:
        super().__init__(model, sink)
        self._deferred: List[Tuple[Any, Any, Tuple[int, ...], Dict[str, Any]]] = []

    def defer(self, node: Any, savers: Tuple[int, ...], **payload: Any) -> None:
        self._deferred.append((node, self.model.here(), savers, payload))

    def on_backward(self, node: Any, value: Any) -> None:
        from gradlint.model.lattice import must_deps

        keep = []
        for item in self._deferred:
            if any(s in must_deps(value) for s in item[2]):  # (on every path: lattice.py)
                self.confirmed(item[0], item[1], item[3])
            else:
                keep.append(item)
        self._deferred = keep

    def on_finish(self) -> None:
        for node, context, _, payload in self._deferred:
            self.unconfirmed(node, context, payload)

    def confirmed(self, node: Any, context: Any, payload: Dict[str, Any]) -> None:
        raise NotImplementedError

    def unconfirmed(self, node: Any, context: Any, payload: Dict[str, Any]) -> None:
        pass


class CutRule(Rule):
    """A rule about a graph cut (a value taken out of autograd and brought back as a new
    tensor, see ``gradlint.model.values.Cut``) whose tensor is then back-propagated while the
    cut's source reaches the loss by no other path. Subclasses set ``cut_kinds`` and implement
    ``report_cut``; ``skip_cut`` may drop deliberate cases. A cut is judged at the end of the
    file, once every ``backward()`` is known: backpropagating the source itself (``y.backward(
    z.grad)``, a split backward) is deliberate."""

    cut_kinds: ClassVar[frozenset] = frozenset()

    def __init__(self, model: Any, sink: "List[Tuple[Rule, Any, Dict[str, Any]]]") -> None:
        super().__init__(model, sink)
        self._cuts: List[Tuple[Any, Any]] = []

    def on_backward(self, node: Any, value: Any) -> None:
        if value.made == "rewrap" and value.leaf_requiring_grad:
            return  # GL205: backward() on a re-wrapped loss itself
        for cut in self.model.lost_cuts(value, self.cut_kinds):
            self._cuts.append((cut, value))

    def on_finish(self) -> None:
        seen = set()
        for cut, value in self._cuts:
            if id(cut) in seen or cut.src.id in self.model.backwarded or self.skip_cut(cut):
                continue
            seen.add(id(cut))
            self.report_cut(cut, value, context=(cut.statement, ()),
                            severity=Severity.WARNING if cut.src.probable else None)

    def skip_cut(self, cut: Any) -> bool:
        return False

    def report_cut(self, cut: Any, value: Any, **kw: Any) -> None:
        raise NotImplementedError


class _BuiltinRule(Rule):
    """Findings the engine itself produces (not visit-based)."""


class SyntaxErrorRule(_BuiltinRule):
    """
    ## What it does
    Reports a file that cannot be decoded or parsed.

    ## Why is this bad
    gradlint cannot check a file it cannot parse; neither can Python run it. The message is the
    parser's (or the decoder's), with its position.

    ## Example
    ```python
    def f(:
        pass
    ```

    ## Use instead
    Fix the syntax error, or exclude the file (`exclude` in `[tool.gradlint]`).

    ## References
    - https://docs.python.org/3/reference/grammar.html
    """

    code = "GL000"
    name = "syntax-error"
    severity = Severity.ERROR
    message = "{detail}"
    hint = "fix the syntax or encoding error, or exclude the file"


class InternalErrorRule(_BuiltinRule):
    """
    ## What it does
    Reports that gradlint itself failed on a file (a rule or the model crashed).

    ## Why is this bad
    A crash in one rule must not hide the findings of the others or stop the run; the file's
    other findings are still reported. Please report the message to the gradlint maintainers.

    ## Example
    (none: this is a bug in gradlint, not in your code)

    ## Use instead
    Exclude the file or ignore `GL001` until the bug is fixed.

    ## References
    - the project's issue tracker
    """

    code = "GL001"
    name = "internal-error"
    severity = Severity.ERROR
    message = "internal error in {where}: {detail}"
    hint = "this is a gradlint bug; please report it"


_REGISTRY: Optional[Dict[str, Type[Rule]]] = None


def registry() -> Dict[str, Type[Rule]]:
    """code -> rule class, for the built-in pseudo-rules and every rule module in
    ``gradlint.rules``. Imported once per process."""
    global _REGISTRY
    if _REGISTRY is None:
        pkg = _rules_package()

        found: Dict[str, Type[Rule]] = {
            SyntaxErrorRule.code: SyntaxErrorRule,
            InternalErrorRule.code: InternalErrorRule,
        }
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
            for obj in vars(mod).values():
                if (
                    isinstance(obj, type)
                    and issubclass(obj, Rule)
                    and obj.__module__ == mod.__name__
                    and obj.code
                ):
                    if obj.code in found:
                        raise RuntimeError(f"duplicate rule code {obj.code}")
                    found[obj.code] = obj
        _REGISTRY = dict(sorted(found.items()))
    return _REGISTRY


def _rules_package() -> Any:
    try:
        import gradlint.rules as pkg

        return pkg
    except ModuleNotFoundError:
        # a source checkout that shadows the installed package: rules/ sits beside gradlint/
        import importlib.util
        import sys
        from pathlib import Path

        src = Path(__file__).resolve().parent.parent / "rules"
        spec = importlib.util.spec_from_file_location(
            "gradlint.rules", src / "__init__.py", submodule_search_locations=[str(src)]
        )
        if spec is None or spec.loader is None:
            raise
        pkg = importlib.util.module_from_spec(spec)
        sys.modules["gradlint.rules"] = pkg
        spec.loader.exec_module(pkg)
        return pkg


def visit_rules() -> Dict[str, Type[Rule]]:
    """The rules that take part in the traversal (everything but the engine's own codes)."""
    return {c: r for c, r in registry().items() if not issubclass(r, _BuiltinRule)}


CODE_RE = re.compile(r"^GL\d{0,3}$|^ALL$")


# ---------------------------------------------------------------------------- the light code list
# Choosing the codes to check (defaults, prefixes, ALL, validation of the configuration) needs only
# each rule's code and whether it is on by default. Importing every rule module for that (and
# libcst with them) is most of a fully cached run's time, so the first run writes the list into
# the results cache, keyed by the fingerprint of gradlint's code; later runs read it from there and
# import the rules only when a file must really be linted.
_CODE_TABLE: Optional[Dict[str, bool]] = None  # code -> on by default
# where the list is kept between runs: (load, store) given by the results cache
# (``gradlint.cache.keep_code_table``); the registry itself knows nothing of the cache
_CODE_TABLE_STORE: Optional[Tuple[Callable[[], Optional[Dict[str, bool]]], Callable[[Dict[str, bool]], None]]] = None


def use_code_table_store(store: Optional[Tuple[Callable[[], Optional[Dict[str, bool]]],
                                               Callable[[Dict[str, bool]], None]]]) -> None:
    """``(load, store)`` for the light code list, or None: not kept."""
    global _CODE_TABLE_STORE
    _CODE_TABLE_STORE = store


def code_table() -> Dict[str, bool]:
    """code -> on by default, for every rule: from the loaded registry, else from the list an
    earlier run with the same code kept, else from the registry (then kept)."""
    global _CODE_TABLE
    if _CODE_TABLE is not None:
        return _CODE_TABLE
    if _REGISTRY is None and _CODE_TABLE_STORE is not None:
        table = _CODE_TABLE_STORE[0]()
        if table is not None:
            _CODE_TABLE = table
            return table
    _CODE_TABLE = {c: bool(r.default_enabled) for c, r in registry().items()}
    if _CODE_TABLE_STORE is not None:
        _CODE_TABLE_STORE[1](_CODE_TABLE)
    return _CODE_TABLE


def expand_selector(selector: str) -> List[str]:
    """``GL101`` -> [GL101]; ``GL1`` -> every GL1xx; ``ALL`` -> everything. Raises ValueError
    for something that selects nothing."""
    sel = selector.strip().upper()
    codes = list(code_table())
    if sel == "ALL":
        return codes
    if not CODE_RE.match(sel):
        raise ValueError(f"invalid rule selector {selector!r} (expected a code like GL101, a prefix like GL1, or ALL)")
    matched = [c for c in codes if c.startswith(sel)]
    if not matched:
        raise ValueError(f"unknown rule code {selector!r}")
    return matched
