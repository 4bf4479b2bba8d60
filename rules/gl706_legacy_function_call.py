from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.names import dotted
from gradlint.rule import Rule, Severity

# torch.autograd.Function and its aliases (qualified names after the module's imports)
_FUNCTION_QUALNAMES = frozenset({
    "torch.autograd.Function",
    "torch.autograd.function.Function",
    "torch.autograd.function.InplaceFunction",
})


class _Class:
    __slots__ = ("node", "forward", "static")

    def __init__(self, node: cst.ClassDef, forward: Optional[cst.FunctionDef], static: bool) -> None:
        self.node, self.forward, self.static = node, forward, static


def _is_static(fn: cst.FunctionDef) -> bool:
    return any((dotted(d.decorator) or "").rsplit(".", 1)[-1] == "staticmethod" for d in fn.decorators)


class LegacyFunctionCall(Rule):
    """
    ## What it does
    Finds a custom `torch.autograd.Function` that is called as an instance,
    `CorrelationFunction(pad, k)(x1, x2)` or `self.fn = Crop(h, w)` then `self.fn(x)`, instead of
    through `Function.apply`.

    When the Function's `forward` is an instance method (the legacy style: `def forward(self,
    ...)`, state kept on `self`, `self.save_for_backward`), the finding is at that `forward`, the
    code to rewrite, with the call as a related location; when `forward` is already a
    `@staticmethod`, at the call.

    ## Why is this bad
    torch removed legacy autograd Functions (instances with their own `forward`) in 1.5: calling
    an instance of any `Function` subclass raises at once, `RuntimeError: Legacy autograd function
    with non-static forward method is deprecated`. Code written for older torch, CUDA-extension
    wrappers in particular, stops at its first forward pass.

    Not reported: a Function used through `.apply` (also when its `forward` is not marked
    `@staticmethod`: `apply` calls it with the context as first argument, which works), and
    classes whose base the model cannot tell to be `torch.autograd.Function`.

    ## Example
    ```python
    class Crop(torch.autograd.Function):
        def __init__(self, size):
            super().__init__()
            self.size = size

        def forward(self, image):
            return image[..., : self.size, : self.size].clone()

        def backward(self, grad):
            ...

    out = Crop(8)(image)   # RuntimeError: Legacy autograd function ...
    ```

    ## Use instead
    ```python
    class Crop(torch.autograd.Function):
        @staticmethod
        def forward(ctx, image, size):
            ctx.shape = image.shape
            return image[..., :size, :size].clone()

        @staticmethod
        def backward(ctx, grad):
            ...
            return grad_image, None

    out = Crop.apply(image, 8)
    ```

    ## References
    - https://pytorch.org/docs/stable/notes/extending.html#extending-torch-autograd
    - https://github.com/pytorch/pytorch/pull/33956
    """

    code = "GL706"
    name = "legacy-function-call"
    severity = Severity.ERROR
    message = "{what}"
    hint = "make `forward`/`backward` `@staticmethod`s taking `ctx` (state passed as arguments, kept on `ctx`) and call `Function.apply(...)`"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._classes: Dict[str, _Class] = {}
        self._instances: Dict[str, str] = {}  # dotted name bound to an instance -> class name
        self._calls: List[Tuple[str, cst.Call, Any]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        bases = [b for b in node.bases if b.keyword is None]
        if len(bases) != 1:
            return
        base = bases[0].value
        parent = self._classes.get(dotted(base) or "")
        if parent is None and self.model.qualname(base) not in _FUNCTION_QUALNAMES:
            return
        forward, static = (parent.forward, parent.static) if parent is not None else (None, True)
        body = node.body.body if type(node.body) is cst.IndentedBlock else ()
        for stmt in body:
            if type(stmt) is cst.FunctionDef and stmt.name.value == "forward":
                forward, static = stmt, _is_static(stmt)
        self._classes[node.name.value] = _Class(node, forward, static)

    def visit_Assign(self, node: cst.Assign) -> None:
        # `fn = Crop(8)`, `self.crop = Crop(8)`: an instance, called later
        value = node.value
        if type(value) is cst.Call and len(node.targets) == 1:
            name = (dotted(value.func) or "").rsplit(".", 1)[-1]
            key = dotted(node.targets[0].target)
            if key is not None and name:
                self._instances[key] = name

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Call:  # `Crop(8)(image)`
            name = (dotted(func.func) or "").rsplit(".", 1)[-1]
        else:
            name = self._instances.get(dotted(func) or "", "")
        if name:
            self._calls.append((name, node, self.model.here()))

    def on_finish(self) -> None:
        done = set()
        for name, call, context in self._calls:
            info = self._classes.get(name)
            if info is None:
                continue
            if info.forward is not None and not info.static:
                if id(info.forward) in done:
                    continue
                done.add(id(info.forward))
                what = (f"custom autograd Function `{name}` has a legacy instance `forward` and is called as an "
                        f"instance: torch raises RuntimeError (\"Legacy autograd function with non-static forward "
                        f"method is deprecated\") at the call")
                self.report(info.forward.name, context=(info.forward, ()), what=what,
                            related=[(call, "the call of an instance, which raises")])
            elif id(call) not in done:
                done.add(id(call))
                what = (f"custom autograd Function `{name}` called as an instance: torch raises RuntimeError "
                        f"(\"Legacy autograd function with non-static forward method is deprecated\"); call "
                        f"`{name}.apply(...)`")
                self.report(call, context=context, what=what)
