from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.names import node_children
from gradlint.rule import Rule, Severity

# kinds of receivers that may be an nn.Module: a module the model knows, or a value it does not
# know (a parameter, `model.modules()` elements, attributes of other objects). A tensor has no
# `register_backward_hook` method (its hook is `register_hook`), nor has anything else torch
# makes; other kinds (numbers, strings, tuples, optimizers) certainly are no module.
_MAYBE_MODULE = ("module", "unknown", "instance")


class ModuleBackwardHook(Rule):
    """
    ## What it does
    Finds `module.register_backward_hook(hook)`, the deprecated non-full module backward hook.

    The receiver must be an `nn.Module` as far as the model knows, or a value it does not know
    (a function's parameter, an element of `model.modules()`, an attribute of another object):
    no tensor, optimizer or other torch object has a method of that name (a tensor's hook is
    `register_hook`, which is not reported), so in a file that imports torch the call is the
    Module method. Not reported: `register_full_backward_hook`; an instance of a class of the
    file that does not derive from a class outside it (it is no module); in a file that defines
    its own `register_backward_hook` method (a hook manager, a Module-like base class), calls
    on values the model does not know (they may be that method) and calls inside that method;
    the fallback branch of a feature check for the full hook (`if hasattr(m,
    "register_full_backward_hook"): ... else: m.register_backward_hook(h)`, or the handler of a
    `try` that calls the full hook), which only runs on torch < 1.8.

    ## Why is this bad
    The non-full hook is attached to the autograd node of the *last* operation of the module's
    forward, not to the module: its `grad_input` holds the gradients of that op's inputs, not of
    the module's inputs. For a module whose forward is more than one op (`x + y + z`, a Linear
    layer with a bias, an activation after a conv) `grad_input` has the wrong number of entries
    or the wrong tensors, and code that reads it computes silently wrong values. torch emits
    `FutureWarning: Using a non-full backward hook when the forward contains multiple autograd
    Nodes is deprecated ... This hook will be missing some grad_input` at the module call.

    ## Example
    ```python
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            layer.register_backward_hook(save_grad)
    ```

    ## Use instead
    ```python
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            layer.register_full_backward_hook(save_grad)
    ```
    The full hook receives one `grad_input` entry per module input (`None` for inputs that do
    not require grad) and `grad_output` per output. It cannot be combined with in-place changes
    of the module's inputs or outputs, and a hook that indexed the old op-specific `grad_input`
    (for `nn.Linear`: bias, input, weight) must be adapted.

    ## References
    - https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_backward_hook
    - https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook
    """

    code = "GL705"
    name = "module-backward-hook"
    severity = Severity.WARNING
    message = ("`register_backward_hook` is the deprecated non-full module hook: its grad_input holds the gradients "
               "of the inputs of the module's last autograd op, not of the module's inputs (for a forward of more "
               "than one op, entries are missing or wrong, silently)")
    hint = "use `register_full_backward_hook`"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        # id(call) -> (call, context, receiver kinds seen on each walk)
        self._calls: Dict[int, Tuple[cst.Call, Any, List[str]]] = {}
        self._order: List[int] = []
        self._own_method = False
        # ids of calls in the fallback branch of a feature check for the full hook
        # (`if hasattr(m, "register_full_backward_hook"): ... else: <here>`, or the handler
        # of `try: m.register_full_backward_hook(h) except AttributeError: <here>`): code for
        # torch < 1.8 that never runs on a torch that has the full hook
        self._fallback: set = set()

    def visit_Module(self, node: cst.Module) -> None:
        # a class of this file that defines its own register_backward_hook: calls on values the
        # model does not know may be that method
        for info in self.model.classes.values():
            if "register_backward_hook" in info.methods:
                self._own_method = True

    def visit_If(self, node: cst.If) -> None:
        if node.orelse is not None and _mentions_full_hook(node.test):
            self._fallback.update(_calls_in(node.orelse))

    def visit_Try(self, node: cst.Try) -> None:
        if node.handlers and _mentions_full_hook(node.body):
            for h in node.handlers:
                self._fallback.update(_calls_in(h))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "register_backward_hook":
            return
        model = self.model
        if any(f.name.value == "register_backward_hook" for f in model.function_stack):
            return  # an override that forwards to the base method: its callers are the place
        if id(node) in self._fallback:
            return
        receiver = model.value_of(func.value)
        kind = receiver.kind
        if kind == "instance" and not self._may_be_module(receiver.node):
            kind = "not-a-module"
        if kind == "unknown" and self._own_method:
            kind = "own"  # may be the file's own method
        entry = self._calls.get(id(node))
        if entry is None:
            entry = self._calls[id(node)] = (node, model.here(), [])
            self._order.append(id(node))
        entry[2].append(kind)

    def _may_be_module(self, name: Any) -> bool:
        """Can an instance of the file's class ``name`` be an nn.Module? Only when a base
        class outside the file (other than ``object``) may make it one; the model already
        knows the classes that derive from torch.nn."""
        seen = set()
        todo = [name]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            info = self.model.classes.get(n) if isinstance(n, str) else None
            if info is None:
                return False  # not a class the rule can read: stay quiet
            if "register_backward_hook" in info.methods:
                return False  # its own method
            for b in info.bases:
                if b in self.model.classes:
                    todo.append(b)
                elif b not in ("object", "ABC", "Generic", "Protocol"):
                    return not self._own_method
        return False

    def on_finish(self) -> None:
        if not self.model.imports_torch():
            return  # another framework's Cell/Layer.register_backward_hook
        for cid in self._order:
            node, context, kinds = self._calls[cid]
            if not kinds or any(k not in _MAYBE_MODULE for k in kinds):
                continue
            related = []
            hook = _hook_definition(self.model, node)
            if hook is not None:
                related.append((hook, "this hook's grad_input covers the module's last op only"))
            self.report(node.func.attr, context=(context[0], (), context[2]), related=related)


def _hook_definition(model: Any, call: cst.Call) -> Optional[Any]:
    args = [a for a in call.args if a.keyword is None and not a.star]
    if not args or not isinstance(args[0].value, cst.Name):
        return None
    return model.functions.get(args[0].value.value)


def _mentions_full_hook(node: Any) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.SimpleString) and "register_full_backward_hook" in n.value:
            return True
        if isinstance(n, cst.Attribute) and n.attr.value == "register_full_backward_hook":
            return True
        if isinstance(n, cst.CSTNode):
            stack.extend(node_children(n))
    return False


def _calls_in(node: Any) -> List[int]:
    out: List[int] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call):
            out.append(id(n))
        stack.extend(node_children(n))
    return out
