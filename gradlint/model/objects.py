"""Objects and modules: the classes of the file and the project (registered, whether they hold
parameters), modules' parameters and submodules, frozen parts, and the attributes of instances
(calling a module: ``modulecalls.py``)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.classes import ClassInfo, class_chain
from gradlint.model.names import canonical, dotted, node_fact, subtree
from gradlint.model.syntax import const_bool, kwvalue, positional
from gradlint.model.containers import keeps_structure
from gradlint.model.modulecalls import ModuleCallMixin
from gradlint.model.values import (
    CLASS, CONST, INSTANCE, MODULE, OPTIMIZER, TENSOR, TUPLE, UNKNOWN_VALUE, Value, leaf_rg,
)

# the attributes torch.nn's layers hold as parameters
_PARAM_ATTRS = frozenset({"weight", "bias", "in_proj_weight", "in_proj_bias"})


def _covers(frozen: str, key: str) -> bool:
    """Does freezing ``frozen`` reach ``key``, or the other way round (a module and its
    parameters, `enc` and `enc.weight`, `layers` and `layers[0]`)?"""
    return key == frozen or key.startswith((frozen + ".", frozen + "[")) or frozen.startswith((key + ".", key + "["))


def harvest(fn: cst.FunctionDef, env: Dict[str, Value], table: Dict[str, Value]) -> None:
    """After a method is walked: the modules, optimizers and instances it bound on ``self``
    (``def build(self): self.net = Net()``) become attributes known in every method; and, from
    ``__init__``, its ``nn.Parameter`` attributes. A kind two methods disagree on is unknown."""
    if not fn.params.params:
        return
    me = fn.params.params[0].name.value + "."
    init = fn.name.value == "__init__"
    for key, v in env.items():
        if not key.startswith(me) or "[" in key or "." in key[len(me):]:
            continue
        attr = "self." + key[len(me):]
        if v.kind in (MODULE, OPTIMIZER, INSTANCE) or (init and v.kind == TENSOR and (v.is_param or v.made == "conv")) \
                or (init and v.kind == CONST and (type(v.node) is cst.Call or v.alts)):  # a grad-mode context
            old = table.get(attr)
            if old is None:
                table[attr] = v
            elif old is not v and (old.kind != v.kind or old.node != v.node or v.kind == TENSOR):
                table[attr] = UNKNOWN_VALUE
        elif v.kind in (TUPLE, MODULE) and keeps_structure(v):
            # a list or dict of layers or parameters (`self.heads = [nn.Linear(...) ...]`,
            # `self.params = {"w": nn.Parameter(...)}`): its elements in every method, while no
            # other method binds the attribute to another value (containers.py)
            old = table.get(attr)
            if init and (old is None or (old.kind == TUPLE and keeps_structure(old))):
                table[attr] = v  # (__init__ walked again at a construction site: its latest walk)
            elif old is not v:
                table[attr] = UNKNOWN_VALUE
        elif v.kind == TENSOR:
            # a tensor set in a method (`def setup(self): self.w = torch.randn(3, requires_grad=True)`)
            # is a tensor in the others; whether it requires grad is kept only for a leaf that
            # does, and only while no other method binds the attribute to another value
            old = table.get(attr)
            if old is None:
                table[attr] = v if v.leaf_requiring_grad and not v.is_param else Value(TENSOR, rg=None, leaf=None)
            elif old is not v and old.kind == TENSOR and not old.is_param:
                table[attr] = Value(TENSOR, rg=None, leaf=None)
            elif old.kind != TENSOR:
                table[attr] = UNKNOWN_VALUE
        elif table.get(attr) is not None and table[attr].kind == TENSOR and not table[attr].is_param:
            table[attr] = UNKNOWN_VALUE  # a tensor in one method, something else in another


def receiver_state(caller: Dict[str, Value], env: Dict[str, Value], receiver: Optional[Value],
                   receiver_key: Optional[str], fn: cst.FunctionDef) -> None:
    """``trainer.fit()`` walked at its call: what the caller knows of ``trainer.*`` (bound by an
    earlier ``trainer.setup()``, or assigned by the caller) is what ``self.*`` holds in it."""
    if receiver is None or receiver_key is None or not fn.params.params:
        return
    me = fn.params.params[0].name.value
    if env.get(me) is not receiver:
        return  # a staticmethod/classmethod: no self
    prefix = receiver_key + "."
    for k, v in caller.items():
        if k.startswith(prefix):
            env.setdefault(me + k[len(receiver_key):], v)


class ObjectMixin(ModuleCallMixin):
    def register_class(self, stmt: cst.ClassDef, outer: Optional[cst.ClassDef]) -> Optional[ClassInfo]:
        """A class of another module of the project joins the file's classes (its methods, its
        base names; nested classes too). None when the file already knows a class of that name
        (the file's own comes first; the other stays unknown)."""
        name = stmt.name.value
        if name in self.classes:
            return None
        info = self.classes[name] = ClassInfo.of(stmt)
        body = stmt.body.body if type(stmt.body) is cst.IndentedBlock else ()
        for s in body:
            if type(s) is cst.FunctionDef:
                if s.name.value not in info.methods:
                    info.methods[s.name.value] = s
                    self.method_class[id(s)] = stmt
            elif type(s) is cst.ClassDef:
                nested = self.register_class(s, stmt)
                if nested is not None:
                    scope = self.fn_scope.get(id(next(iter(info.methods.values()), None)))
                    for fn in nested.methods.values():
                        if scope is not None:
                            self.fn_scope[id(fn)] = scope
        return info

    def class_params(self, name: str, seen: Optional[set] = None) -> Optional[bool]:
        """Does a class of the file or of the project hold parameters? True when it shows one
        (``nn.Parameter``, ``register_parameter``, a torch.nn layer with parameters, or a module
        of such a class, bound on ``self``; a torch.nn layer as a base); False when its bases
        and every attribute its methods bind on ``self`` are known and none does (an attention
        that only combines its inputs, a loss with buffers); None when it cannot tell (a base, or
        a module bound on ``self``, from elsewhere)."""
        info = self.classes.get(name)
        if info is None:
            return None
        seen = seen if seen is not None else set()
        if name in seen:
            return False
        seen.add(name)
        fn = next(iter(info.methods.values()), None)
        scope = self.scope_for(fn) if fn is not None else self.root_scope
        imports = scope.imports
        verdict: Optional[bool] = False
        for b in info.node.bases:
            if b.keyword is not None:
                continue
            q = canonical(imports.qualname(b.value))
            if q is not None:
                if q in api.MODULE_BASES or q in api.PARAMLESS_MODULES:
                    continue
                if q.startswith("torch.nn."):
                    return True if q in api.PARAM_MODULES else None
                verdict = None
                continue
            base = b.value.value if type(b.value) is cst.Name else None
            if base is not None and base not in self.classes and not scope.root:
                self.module_name(scope, base)  # an imported base joins the classes
            inner = self.class_params(base, seen) if base is not None and base in self.classes else None
            if inner is True:
                return True
            if inner is None:
                verdict = None
        for method in info.methods.values():
            for value in node_fact("param_sites", method, _param_sites):
                if value is None:
                    return True  # nn.Parameter(...)
                if value is _DEPENDS:
                    verdict = None
                    continue
                bound = _bound_params(self, value, imports, seen, method)
                if bound is True:
                    return True
                if bound is None:
                    verdict = None
        return verdict

    def module_attribute(self, base: Value, attr: str, key: Optional[str]) -> Optional[Value]:
        """``m.weight`` of a torch.nn layer (a parameter: a leaf that requires grad, unless the
        code froze it), ``model.fc`` of a module or instance of a class of this file."""
        if isinstance(base.node, str) and base.node in self.classes:
            return self._class_attribute(base.node, "self." + attr)
        if base.kind == MODULE and base.params is False and attr in _PARAM_ATTRS:
            return Value(TENSOR, rg=False, leaf=True, is_param=True)  # a frozen layer's weight
        if (base.kind == MODULE and base.params is True and attr in _PARAM_ATTRS
                and isinstance(base.node, str) and base.node.startswith("torch.nn.")):
            if key is not None and self.frozen(key):
                return Value(TENSOR, rg=None, leaf=True)
            return self.layer_param(base, attr)
        return None

    def layer_param(self, layer: Value, attr: str) -> Value:
        """The parameter ``attr`` of the torch.nn layer ``layer``: one value per layer object."""
        entry = self.layer_params.get(id(layer))
        if entry is None or entry[0] is not layer:
            entry = self.layer_params[id(layer)] = (layer, {})
        p = entry[1].get(attr)
        if p is None:
            p = entry[1][attr] = leaf_rg(is_param=True)
        return p

    def _class_attribute(self, cls: str, attr: str) -> Optional[Value]:
        for c, _info in class_chain(self.classes, cls):
            v = self.class_tables.get(c, {}).get(attr)
            if v is not None:
                return v
        return None

    def later_class(self, name: str, seen: Optional[set] = None) -> Optional[Value]:
        """The value of a class of this file that the walk has not reached yet (a function body
        is walked where it is defined, and may name a class defined further down)."""
        info = self.classes.get(name)
        if info is None:
            return None
        seen = seen if seen is not None else set()
        seen.add(name)
        is_module = False
        for b in info.node.bases:
            q = self.qualname(b.value) or ""
            if q in api.MODULE_BASES or q.startswith("torch.nn."):
                is_module = True
            elif type(b.value) is cst.Name and b.value.value not in seen:
                # a base of this file, or one imported from another module of the project
                base = self.env.get(b.value.value) or self.definitions.get(b.value.value)
                if base is None and b.value.value in self.classes:
                    base = self.later_class(b.value.value, seen)
                is_module = is_module or bool(base is not None and base.kind == CLASS and base.params)
        return Value(CLASS, node=info.node, params=is_module or None)

    def freeze(self, key: str) -> None:
        """The code froze ``key`` (a module, or a parameter of one)."""
        self.frozen_keys.setdefault(key, set()).add(self._freeze_scope())
        self.freezes.append(key)

    def _freeze_scope(self) -> Any:
        """Where a freeze holds: the function being walked (0 at module level), and its class."""
        fn = self.function_stack[-1] if self.function_stack else None
        if fn is None:
            return (0, 0)
        cls = self.method_class.get(id(fn))
        return (id(fn), id(cls) if cls is not None else 0)

    def frozen(self, key: str) -> bool:
        """Did the code freeze ``key`` or a module it belongs to (``requires_grad_(False)``,
        ``p.requires_grad = False`` or ``p.detach_()`` over its ``parameters()``)? A name frozen in
        a function is frozen there (and at module level, everywhere); ``self.x`` in every method of
        the class that froze it."""
        return any(_covers(f, key) for f in self.visible_frozen())

    def _weight_trainable(self, node: Any) -> bool:
        """Is the weight of the layer called at ``node`` free of every freeze the walk saw (the
        layer, its weight, or a module holding it; anywhere in the file)? Its input is saved only
        when the weight needs a gradient: unknown layers (no name) count as frozen."""
        key = dotted(node.func) if type(node) is cst.Call else None
        if key is None:
            return False
        return not any(_covers(f, key) for f in self.frozen_keys)

    def visible_frozen(self) -> List[str]:
        """The frozen keys that hold in the function being walked."""
        here = self._freeze_scope()
        cls = here[1]
        return [f for f, scopes in self.frozen_keys.items()
                if any(s == here or s[0] == 0 or (cls and s[1] == cls and f.startswith("self.")) for s in scopes)]


# what a value bound on ``self`` says of its class's parameters (class_params)
_NO_MODULE_CALLS = frozenset({"list", "dict", "set", "tuple", "int", "float", "str", "bool", "len", "range",
                              "getattr", "super", "isinstance", "max", "min", "sum", "abs", "round", "sorted"})


def _bound_params(model: Any, value: Any, imports: Any, seen: set, method: Any = None) -> Optional[bool]:
    """True: a module with parameters; False: certainly none (a constant, a parameter-free
    torch.nn layer, a plain Python value, a tensor made by torch); None: unknown (a value passed
    in, or made by code from elsewhere)."""
    if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString,
                          cst.FormattedString, cst.List, cst.Dict, cst.Tuple, cst.Set, cst.Comparison,
                          cst.BooleanOperation, cst.UnaryOperation, cst.BinaryOperation)):
        return False
    if type(value) is cst.Name:
        if value.value in ("None", "True", "False"):
            return False
        return False if method is not None and _plain_parameter(method, value.value) else None
    if not type(value) is cst.Call:
        return None
    q = canonical(imports.qualname(value.func))
    if q is not None:
        if q in api.PARAM_MODULES or q in api.PARAMETER:
            return True
        if q in api.PARAMLESS_MODULES or not q.startswith("torch.nn.") or q.startswith("torch.nn.functional"):
            return False  # a torch function's result (a tensor, a device), or a layer without any
        return None  # a container or another torch.nn module: its parts decide
    name = value.func.value if type(value.func) is cst.Name else None
    if name in _NO_MODULE_CALLS:
        return False
    if name is not None and name in model.classes:
        return model.class_params(name, seen)
    return None


_PLAIN_TYPES = frozenset({"bool", "int", "float", "str", "bytes"})


def _plain_parameter(method: Any, name: str) -> bool:
    """Is ``name`` a parameter of ``method`` that holds a plain value (annotated ``bool``,
    ``int``, ``float``, ``str``, or defaulting to a constant): no module with parameters?"""
    params = method.params
    for p in list(getattr(params, "posonly_params", ())) + list(params.params) + list(params.kwonly_params):
        if p.name.value != name:
            continue
        ann = p.annotation.annotation if p.annotation is not None else None
        if type(ann) is cst.Name and ann.value in _PLAIN_TYPES:
            return True
        d = p.default
        return isinstance(d, (cst.Integer, cst.Float, cst.SimpleString)) or (
            type(d) is cst.Name and d.value in ("True", "False"))
    return False


# a parameter site whose requires_grad the class alone does not tell (_param_sites)
_DEPENDS = object()


def _param_sites(method: Any) -> List[Any]:
    """In the order ``class_params`` reads them: None for a call of ``Parameter`` that requires
    grad, ``_DEPENDS`` for one whose ``requires_grad`` is a name (an argument) and for
    ``register_parameter`` (of a parameter made elsewhere), nothing for ``Parameter(...,
    requires_grad=False)``, else the value of an assignment to an attribute of ``self``."""
    out: List[Any] = []
    for n in subtree(method.body):
        if type(n) is cst.Call:
            last = (dotted(n.func) or "").rsplit(".", 1)[-1]
            if last == "Parameter":
                flag = kwvalue(n, "requires_grad")
                pos = positional(n)
                flag = flag if flag is not None else (pos[1] if len(pos) > 1 else None)
                if flag is None or const_bool(flag) is True:
                    out.append(None)
                elif const_bool(flag) is None:
                    out.append(_DEPENDS)  # `requires_grad=requires_grad`: each construction decides
            elif last == "register_parameter":
                # a parameter made elsewhere: one made in the class is counted where it is made
                out.append(_DEPENDS)
        elif isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None:
            targets = [t.target for t in n.targets] if type(n) is cst.Assign else [n.target]
            if any(type(t) is cst.Attribute and type(t.value) is cst.Name
                   and t.value.value == "self" for t in targets):
                out.append(n.value)
    return out
