from __future__ import annotations

from typing import Optional

import libcst as cst

from gradlint.model.names import dotted, subtree
from gradlint.rule import Rule, Severity

# the spellings of `__init__` with an underscore too few or too many, or two letters swapped:
# near misses that a reader's eye takes for the constructor (not `init`, which projects use as a
# second-phase initialiser they call themselves)
_STEMS = frozenset(("init", "inti", "innit", "intit", "initt"))


def _near_init(name: str) -> bool:
    # (`_init` and `__init`, without a trailing underscore, are common names of private
    # initialisers that the class's users call: not near misses)
    if name == "__init__" or not name.startswith("_") or not name.endswith("_"):
        return False
    stem = name.strip("_")
    if stem == "int":
        return False  # `__int__` is a real special method (int(obj))
    return stem in _STEMS


class MisnamedInit(Rule):
    """
    ## What it does
    Finds an `nn.Module` subclass whose constructor is misspelled (`_init_`, `__init_`,
    `_init__`, `__inti__`, ...) while the class defines no `__init__`: the method builds the
    layers or parameters (it assigns to `self` or calls `super().__init__()`), nothing in the
    file calls it by its name, and the class's bases are torch's own (`nn.Module`,
    `nn.Sequential`, ...): a base class of a project or library might call the method from its
    own `__init__`, and is not reported.

    ## Why is this bad
    Python runs only `__init__` when an object is made. The class inherits `nn.Module.__init__`,
    so the misspelled method never runs: the model has no layers and no parameters.
    `torch.optim.SGD(model.parameters(), ...)` raises `ValueError: optimizer got an empty
    parameter list`, or the first forward pass raises `AttributeError` for the missing layer;
    with a parameter-free forward, the model trains nothing at all.

    ## Example
    ```python
    class Net(nn.Module):
        def _init_(self):                # one underscore each side
            super()._init_()
            self.fc = nn.Linear(10, 2)
    ```

    ## Use instead
    ```python
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(10, 2)
    ```

    ## Fix safety
    No automatic fix: renaming a method is a change the author should see (a subclass or a
    caller elsewhere may use the misspelled name).

    ## References
    - https://docs.python.org/3/reference/datamodel.html#object.__init__
    - https://pytorch.org/docs/stable/generated/torch.nn.Module.html
    """

    code = "GL608"
    name = "misnamed-init"
    severity = Severity.ERROR
    message = ("`{name}` is not `__init__`: Python never runs it, so `{cls}` is made without its layers "
               "and parameters")
    hint = "name the constructor `__init__` (two underscores each side) and call `super().__init__()`"

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        model = self.model
        if model.class_tables.get(node.name.value, {}).get("__module__") is None:
            return  # not an nn.Module subclass (as far as the model knows)
        bases = [b for b in node.bases if b.keyword is None]
        if not bases or not all((model.qualname(b.value) or "").startswith("torch.nn.") for b in bases):
            return  # a base of the project or a library may call the method itself from its __init__
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        methods = [s for s in body if isinstance(s, cst.FunctionDef)]
        if any(m.name.value == "__init__" for m in methods):
            return
        for m in methods:
            name = m.name.value
            if _near_init(name) and not m.decorators and _builds(m) and not self._called(name):
                self.report(m.name, name=name, cls=node.name.value)

    def _called(self, name: str) -> bool:
        """Is ``name`` called anywhere in the file other than through ``super()`` (a second-phase
        initialiser that the class or its users run themselves)?"""
        root: Optional[cst.Module] = self.model.root_module
        if root is None:
            return True
        defined = set()
        # `super()._init_()` inside a method of that very name is the misspelled constructor
        # calling its base's (as `super().__init__()` would); elsewhere it is a call
        for d in subtree(root):
            if type(d) is cst.FunctionDef and d.name.value == name:
                for n in subtree(d.body):
                    if type(n) is cst.Attribute and n.attr.value == name:
                        defined.add(id(n.attr))
        for n in subtree(root):
            if type(n) is cst.FunctionDef:
                defined.add(id(n.name))
            elif type(n) is cst.Attribute:
                if n.attr.value == name and id(n.attr) not in defined:
                    return True  # `self._init_()`, `obj._init_`, `Net._init_(self)`, a subclass's `super()._init_()`
                defined.add(id(n.attr))
            elif type(n) is cst.Name and n.value == name and id(n) not in defined:
                return True  # passed or stored by name
        return False


def _builds(fn: cst.FunctionDef) -> bool:
    """Does the method look like a constructor: it calls ``super(...).<anything>()`` or assigns
    to an attribute of ``self``?"""
    for n in subtree(fn.body, nested=False):
        if type(n) is cst.Call and type(n.func) is cst.Attribute and type(n.func.value) is cst.Call \
                and dotted(n.func.value.func) == "super":
            return True
        if type(n) in (cst.Assign, cst.AnnAssign):
            targets = [t.target for t in n.targets] if type(n) is cst.Assign else [n.target]
            if any(type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == "self"
                   for t in targets):
                return True
    return False
