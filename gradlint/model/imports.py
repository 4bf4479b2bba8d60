"""Imports of the project's own modules: what another file of the project defines, as the model
sees it.

The model asks the project index (``gradlint.index.ProjectView``, given by the engine; None for
text with no file, and then every import stays unknown) for the module an import names, and keeps
one ``ModuleScope`` per module it met: that module's imports of torch (its ``ImportMap``) and its
top-level functions and classes, and the names its own imports bind, resolved on first read
(``from .layers import Block``, re-exports through ``__init__.py``, ``from .m import *`` with or
without ``__all__``). A function or method of another module is walked at its call with the
caller's arguments, exactly as one of this file (``calls.py``), inside its own module's scope:
its names and its imports of torch are its module's. Its classes join the file's classes (methods,
bases, attributes bound in ``__init__`` and other methods, ``forward``).

A module's top-level assignments (``W = torch.randn(3, requires_grad=True)``, ``model = Net()``,
``opt = SGD(model.parameters(), ...)``) are evaluated once, when a name they bind is first read,
in order and with the rules muted (their findings are that module's own lint's): what they bind
is known where the name is imported and in that module's functions.

Not followed (unknown stays unknown): other top-level statements of an imported module (loops,
``if`` blocks, calls made for their effect), names a module gets through
``globals()`` or ``sys.modules``, and modules outside the project (third-party, the standard
library). Import cycles end in an unknown name, never a loop: a name being resolved reads as
unknown inside its own resolution.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import ImportMap, dotted, string_value
from gradlint.model.values import CLASS, FUNCTION, NAMESPACE, UNKNOWN_VALUE, Value


# what an import statement of a module binds, unresolved: local name -> (module, level, attribute
# or None for the module itself, or "*" for a star import's source)
Pending = Tuple[str, int, Optional[str]]


class ModuleScope:
    """One module's global names as the model knows them."""

    __slots__ = ("src", "path", "imports", "definitions", "pending", "stars", "classes", "resolving", "root",
                 "assigned", "values", "top")

    def __init__(self, src: Any, root: bool = False) -> None:
        self.src = src  # gradlint.index.ModuleSource, or None for the linted file itself
        self.path = src.path if src is not None else ""
        self.imports = ImportMap()
        self.definitions: Dict[str, Value] = {}
        self.pending: Dict[str, Pending] = {}
        self.stars: List[Tuple[str, int]] = []
        self.classes: Dict[str, Any] = {}  # name -> ClassInfo of the classes it defines
        self.resolving: set = set()
        self.root = root
        # names its top-level assignments bind (``W = torch.randn(3, requires_grad=True)``,
        # ``model = Net()``), and what they hold once those statements were evaluated (``top``:
        # None, "running" or "done"; see Walker._module_values)
        self.assigned: set = set()
        self.values: Dict[str, Value] = {}
        self.top: Optional[str] = None


class ImportMixin:
    # set by the engine through the walker: the index as the linted file sees it
    project: Any = None
    # set by the walker: evaluates a module's top-level assignments (rules see nothing of it)
    module_values: Any = None
    root_module: Any = None  # the linted file's libcst module (set by the walker)
    walk_statement: Any = None  # set by the walker: walks one statement (rules see it)

    # ------------------------------------------------------------------ import statements
    def project_import(self, node: Any) -> None:
        """``import a.b [as c]`` / ``from a.b import x [as y]`` met by the walk (at module level
        or in a function): bind what a module of the project defines under the local names."""
        if self.project is None:
            return
        scope = self.scope
        if type(node) is cst.Import:
            for alias in node.names:
                full = dotted(alias.name) or ""
                self._import_time(full, 0, node)
                if alias.asname is not None and type(alias.asname.name) is cst.Name:
                    v = self._namespace(scope, full, 0)
                    if v is not None:
                        self._bind_imported(alias.asname.name.value, v)
                else:
                    top = full.split(".", 1)[0]
                    v = self._namespace(scope, top, 0)
                    if v is not None:
                        self._bind_imported(top, v)
            return
        level = len(node.relative)
        module = dotted(node.module) if node.module is not None else ""
        self._import_time(module or "", level, node)
        if type(node.names) is cst.ImportStar:
            src = self._module_source(scope, module or "", level)
            if src is not None:
                for name, v in self._star_names(src).items():
                    self._bind_imported(name, v)
            return
        for alias in node.names:
            name = alias.evaluated_name
            v = self._from_import(scope, module or "", level, name)
            if v is not None:
                self._bind_imported(alias.evaluated_alias or name, v)

    def _import_time(self, module: str, level: int, node: Any) -> None:
        """Importing a module runs its top level (and its packages', and what they import):
        a top-level ``torch.set_grad_enabled(False)`` there switches grad mode off in the
        importer from the import on. Those statements are walked here, at the import, in their
        module's scope (rules see them: GL306 reports such a switch in its module's file)."""
        if not self.scope.root or self.function_stack or self.walk_statement is None:
            return
        for src in self.project.import_time_switches(self.project.path, module, level, self.imported):
            scope = self.scope_of(src)
            for stmt in src.module.body:
                if type(stmt) is cst.SimpleStatementLine and len(stmt.body) == 1 \
                        and type(stmt.body[0]) is cst.Expr and isinstance(stmt.body[0].value, cst.Call):
                    saved = self.enter_scope(scope)
                    self.call_sites.append(node)  # findings there name the import
                    try:
                        if self.qualname(stmt.body[0].value.func) in api.SET_GRAD:
                            self.walk_statement(stmt)
                    finally:
                        self.call_sites.pop()
                        self.leave_scope(saved)

    def _bind_imported(self, local: str, v: Value) -> None:
        """An imported name: also known in the file's function bodies (as its functions and
        classes are), whatever it holds (a module-level tensor, model or optimizer of the other
        module)."""
        self.bind_key(local, v)
        if self.scope_kind == "module":
            self.definitions[local] = v

    # ------------------------------------------------------------------ scopes
    def _module_source(self, scope: ModuleScope, module: str, level: int) -> Any:
        importer = scope.path or self.project.path
        return self.project.module(importer, module, level)

    def scope_of(self, src: Any) -> ModuleScope:
        """The scope of a module the index handed out (built once per file linted)."""
        found = self.scopes.get(src.path)
        if found is not None:
            return found
        scope = self.scopes[src.path] = ModuleScope(src)
        if src.module is not None:
            self._collect(scope, src.module.body)
        return scope

    def _collect(self, scope: ModuleScope, body: Any) -> None:
        """A module's top-level definitions and imports (also in ``if``/``try`` blocks at top
        level), without walking it."""
        for stmt in body:
            t = type(stmt)
            if t is cst.FunctionDef:
                scope.definitions.setdefault(stmt.name.value, Value(FUNCTION, node=stmt))
                self.fn_scope[id(stmt)] = scope
                self.foreign_functions.append(stmt)
            elif t is cst.ClassDef:
                info = self.register_class(stmt, None)
                if info is not None:
                    scope.classes[stmt.name.value] = info
                    for fn in info.methods.values():
                        self.fn_scope[id(fn)] = scope
            elif t is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Import:
                        scope.imports.add_import(small)
                        for alias in small.names:
                            full = dotted(alias.name) or ""
                            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                                scope.pending.setdefault(alias.asname.name.value, (full, 0, None))
                            else:
                                top = full.split(".", 1)[0]
                                scope.pending.setdefault(top, (top, 0, None))
                    elif type(small) is cst.ImportFrom:
                        scope.imports.add_import_from(small)
                        level = len(small.relative)
                        module = dotted(small.module) if small.module is not None else ""
                        if type(small.names) is cst.ImportStar:
                            scope.stars.append((module or "", level))
                        else:
                            for alias in small.names:
                                local = alias.evaluated_alias or alias.evaluated_name
                                scope.pending.setdefault(local, (module or "", level, alias.evaluated_name))
                    elif type(small) is cst.Assign:
                        for t in small.targets:
                            if type(t.target) is cst.Name:
                                scope.assigned.add(t.target.value)
                    elif isinstance(small, (cst.AnnAssign, cst.AugAssign)) and type(small.target) is cst.Name:
                        scope.assigned.add(small.target.value)
            elif t is cst.If:
                self._collect(scope, stmt.body.body)
                orelse = stmt.orelse
                while orelse is not None:
                    self._collect(scope, orelse.body.body)
                    orelse = orelse.orelse if type(orelse) is cst.If else None
            elif t in (cst.Try, cst.With):
                self._collect(scope, stmt.body.body)

    def module_name(self, scope: ModuleScope, name: str) -> Optional[Value]:
        """What ``name`` is at the top level of a module of the project, or None."""
        if scope.root:
            return None
        v = scope.definitions.get(name)
        if v is not None:
            if v.kind == CLASS and v.node is None:
                return None
            return v
        info = scope.classes.get(name)
        if info is not None:
            v = self._foreign_class(scope, name)
            scope.definitions[name] = v
            return v
        if name in scope.assigned and name not in scope.pending:
            if scope.top is None and self.module_values is not None:
                scope.top = "running"  # (a name read while they run is unknown)
                try:
                    scope.values.update(self.module_values(scope))
                finally:
                    scope.top = "done"
            return scope.values.get(name)
        if name in scope.resolving:
            return None  # an import cycle
        scope.resolving.add(name)
        try:
            pending = scope.pending.get(name)
            if pending is not None:
                module, level, attr = pending
                v = (self._namespace(scope, module, level) if attr is None
                     else self._from_import(scope, module, level, attr))
            else:
                v = None
                for module, level in scope.stars:
                    src = self._module_source(scope, module, level)
                    if src is not None:
                        v = self._star_names(src, only=name).get(name)
                        if v is not None:
                            break
        finally:
            scope.resolving.discard(name)
        if v is not None:
            scope.definitions[name] = v
        return v

    def _foreign_class(self, scope: ModuleScope, name: str) -> Value:
        """A class of another module: its value (a module class or not, from its bases) is
        worked out in its own module's scope."""
        saved = self.enter_scope(scope)
        try:
            for b in scope.classes[name].node.bases:
                if type(b.value) is cst.Name and b.value.value != name:
                    self.module_name(scope, b.value.value)  # registers an imported base
            v = self.later_class(name)
        finally:
            self.leave_scope(saved)
        return v if v is not None else Value(CLASS)

    def _from_import(self, scope: ModuleScope, module: str, level: int, name: str) -> Optional[Value]:
        src = self._module_source(scope, module, level)
        if src is None:
            return None
        v = self.module_name(self.scope_of(src), name)
        if v is None and src.is_package:
            sub = self.project.submodule(src, name)  # `from pkg import models`
            if sub is not None:
                return Value(NAMESPACE, node=self.scope_of(sub))
        return v

    def _namespace(self, scope: ModuleScope, module: str, level: int) -> Optional[Value]:
        src = self._module_source(scope, module, level)
        return Value(NAMESPACE, node=self.scope_of(src)) if src is not None else None

    def _star_names(self, src: Any, only: Optional[str] = None) -> Dict[str, Value]:
        """What ``from module import *`` binds: the names of ``__all__`` when the module sets
        one (a literal list or tuple), else its public top-level definitions and imports."""
        scope = self.scope_of(src)
        public = None
        if src.module is not None:
            public = src.memo.get("__all__", False)
            if public is False:
                public = src.memo["__all__"] = _all_names(src.module)
        if public is None:
            public = [n for n in list(scope.definitions) + list(scope.classes) + list(scope.pending)
                      if not n.startswith("_")]
        out: Dict[str, Value] = {}
        for name in public:
            if only is not None and name != only:
                continue
            v = self.module_name(scope, name)
            if v is not None:
                out[name] = v
        return out

    def namespace_attribute(self, ns: Value, attr: str) -> Value:
        """``models.Net``, ``pkg.models`` on a module of the project bound to a name."""
        scope = ns.node
        v = self.module_name(scope, attr)
        if v is None and scope.src is not None and scope.src.is_package:
            sub = self.project.submodule(scope.src, attr)
            if sub is not None:
                v = Value(NAMESPACE, node=self.scope_of(sub))
                scope.definitions[attr] = v
        return v if v is not None else UNKNOWN_VALUE

    # ------------------------------------------------------------------ walking another module's code
    def enter_scope(self, scope: ModuleScope) -> Any:
        """Make ``scope`` the module whose globals and imports names are read in."""
        saved = (self.scope, self.imports, self.definitions)
        self.scope = scope
        self.imports = scope.imports
        self.definitions = scope.definitions if scope.root else _Globals(self, scope)
        return saved

    def leave_scope(self, saved: Any) -> None:
        self.scope, self.imports, self.definitions = saved

    def current_module(self) -> Any:
        """The libcst module whose code the walk is in now: the linted file's, or another
        module's of the project (a rule that scans "the file" around a node scans this one)."""
        src = self.scope.src
        return src.module if src is not None else self.root_module

    def scope_for(self, fn: Any) -> ModuleScope:
        return self.fn_scope.get(id(fn), self.root_scope)

    def root_call_site(self) -> Any:
        """The call in the linted file through which the walk reached another module's code
        (None while the walk is in the linted file's own code)."""
        return self.call_sites[0] if self.call_sites else None


class _Globals(dict):
    """Another module's globals read from a function of it (``definitions.get``)."""

    def __init__(self, model: Any, scope: ModuleScope) -> None:
        super().__init__()
        self.model = model
        self.scope = scope

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        v = self.model.module_name(self.scope, key)
        return v if v is not None else default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __setitem__(self, key: str, value: Any) -> None:
        self.scope.definitions[key] = value

    def pop(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return self.scope.definitions.pop(key, default)


def _all_names(module: Any) -> Optional[List[str]]:
    for stmt in module.body:
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) is cst.Assign and len(small.targets) == 1 \
                        and isinstance(small.targets[0].target, cst.Name) \
                        and small.targets[0].target.value == "__all__" \
                        and isinstance(small.value, (cst.List, cst.Tuple)):
                    names = []
                    for el in small.value.elements:
                        if type(el.value) is cst.SimpleString and isinstance(string_value(el.value), str):
                            names.append(string_value(el.value))
                    return names
    return None
