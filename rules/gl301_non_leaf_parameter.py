from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.edits import count_comments, insert_after, replace_span
from gradlint.rule import Fix, Rule, Severity

_CODE = cst.Module([])

# Factories whose `dtype=` and `device=` are keyword arguments that say where and how the
# tensor is created (the same tensor as converting it afterwards).
_FACTORIES = frozenset(
    "torch." + n
    for n in """tensor ones zeros empty full rand randn arange range linspace logspace eye
    ones_like zeros_like empty_like full_like rand_like randn_like randint randint_like
    randperm empty_strided scalar_tensor""".split()
)
# conversion method without arguments -> (keyword, value; "{torch}" is the file's torch alias)
_METHODS: Dict[str, Tuple[str, str]] = {
    "cuda": ("device", '"cuda"'),
    "double": ("dtype", "{torch}.float64"),
    "half": ("dtype", "{torch}.float16"),
    "bfloat16": ("dtype", "{torch}.bfloat16"),
}
# device strings that `.to(...)` may name
_DEVICE = re.compile(r"(cpu|cuda|mps|xpu|meta|hpu|xla|mtia)(:[0-9]+)?")
# floating dtypes that `.to(...)` may name
_DTYPES = frozenset(
    "torch." + n for n in "float64 double float16 half bfloat16 float32 float".split()
)


class NonLeafParameter(Rule):
    """
    ## What it does
    Finds a tensor created with `requires_grad=True` and then converted in the same expression
    or the next rebinding (`.cuda()`, `.to("cuda")`, `.to(torch.float64)`, `.double()`,
    `.half()`, `.view(...)`, `* 0.01`), and then used as a parameter: given to an optimizer,
    or its `.grad` read.

    ## Why is this bad
    The conversion is an operation recorded by autograd: the name now holds a *non-leaf*
    computed from the real leaf, which nothing else references. Its `.grad` stays `None` after
    `backward()` (torch only warns when `.grad` is read), so an update that reads it fails or
    does nothing; `torch.optim.SGD([w])` raises `ValueError: can't optimize a non-leaf Tensor`.
    This is common in real code as `torch.randn(n, requires_grad=True).cuda()`.

    `.float()` / `.to("cpu")` on a CPU float32 tensor return the tensor itself and are fine.
    `.to(device)` with a device known only at run time is reported as a warning: it is a bug
    whenever the device is not the CPU.

    ## Example
    ```python
    w = torch.randn(3, requires_grad=True).cuda()
    opt = torch.optim.SGD([w], lr=0.1)     # ValueError: can't optimize a non-leaf Tensor
    ```

    ## Use instead
    ```python
    w = torch.randn(3, device="cuda", requires_grad=True)
    w = torch.randn(3, dtype=torch.float64, requires_grad=True)
    w = nn.Parameter(torch.randn(3) * 0.01)   # scale first, then make the leaf
    ```

    ## Fix safety
    Offered when the conversion is chained directly on a factory call written with
    `requires_grad=True` and names its target literally: `.cuda()`, `.to("cuda:1")`,
    `.to("meta")`, `.double()`, `.half()`, `.bfloat16()`, `.to(torch.float64)` (also
    `.to(device=...)`, `.to(dtype=...)`, and a device string with a dtype). The conversion is
    removed and its target moves into the factory:
    `torch.randn(3, requires_grad=True).cuda()` becomes
    `torch.randn(3, requires_grad=True, device="cuda")` (`.double()` becomes
    `dtype=torch.float64`, spelled with the name the factory is called through). Safe: the
    result is a tensor of the same shape on the same device with the same dtype, now a leaf, so
    the optimizer accepts it and its `.grad` is filled; the converted non-leaf had no use that
    works (an optimizer refuses it, its `.grad` stays None). The values are created directly in
    the target dtype or on the target device: for random factories, the same seed draws
    different numbers (from the same distribution) than the converted ones did, and computed
    values (`torch.tensor([0.1])`, `arange`, `linspace`) are exact in float64 instead of
    float32 values widened.

    No fix for `* 0.01`, `.view(...)`, `.to(device)` with a device or dtype known only at run
    time, `.cuda(1)`, other arguments (`non_blocking=`, `copy=`), a conversion of a name
    (`w = w.cuda()`), a factory that already says `device=`/`dtype=` for what the conversion
    changes, one with `**kwargs`, `out=`, `pin_memory=` or `layout=`, a `generator=` with a
    device change (the generator belongs to a device), or a comment that the rewrite would drop.

    ## References
    - https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation
    - https://pytorch.org/docs/stable/generated/torch.Tensor.is_leaf.html
    """

    code = "GL301"
    name = "non-leaf-parameter"
    severity = Severity.ERROR
    message = "{use} a tensor that is not a leaf: it was made with requires_grad=True and then converted here, so {effect}"
    hint = "create the leaf where it will live: `torch.randn(..., device=..., dtype=..., requires_grad=True)`, or scale before `requires_grad_()`"
    fixable = True

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._seen: set = set()

    def _flag(self, value: Any, use: str, effect: str) -> None:
        if value.kind != "tensor" or value.made != "conv" or value.made_node is None:
            return
        if id(value.made_node) in self._seen:
            return
        self._seen.add(id(value.made_node))
        self.report(
            value.made_node, use=use, effect=effect,
            severity=None if value.certain else Severity.WARNING,
            fix=self._fix(value.made_node),
        )

    def on_optimizer(self, node: Any, params: List[Any]) -> None:
        for v in params:
            self._flag(v, "an optimizer is given", "its constructor raises ValueError (can't optimize a non-leaf Tensor)")

    def on_grad_read(self, node: cst.Attribute, value: Any) -> None:
        self._flag(value, "`.grad` is read on", "its `.grad` stays None after backward()")

    # ------------------------------------------------------------------------ the fix
    def _fix(self, node: Any) -> Optional[Fix]:
        """`torch.randn(3, requires_grad=True).cuda()` -> `torch.randn(3, requires_grad=True,
        device="cuda")`: the conversion's literal target moves into the factory call."""
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                and isinstance(node.func.value, cst.Call)):
            return None  # `* 0.01`, or a conversion of a name (`w = w.cuda()`)
        factory = node.func.value
        if factory.lpar or not factory.args:
            return None  # `(torch.randn(...)).cuda()`: the span to drop would cut the parentheses
        q = self.model.qualname
        if q(factory.func) not in _FACTORIES:
            return None
        keywords = {}
        for a in factory.args:
            if a.star == "**":
                return None
            if a.keyword is not None:
                keywords[a.keyword.value] = a.value
        rg = keywords.get("requires_grad")
        if not (isinstance(rg, cst.Name) and rg.value == "True"):
            return None
        wanted = self._targets(node, factory)
        if not wanted:
            return None
        if any(k in keywords for k in wanted) or {"out", "pin_memory", "layout"} & set(keywords):
            return None
        if "device" in wanted and "generator" in keywords:
            return None
        if count_comments(node) != count_comments(factory):
            return None  # a comment between the factory and the conversion would be lost
        added = "".join(f", {k}={v}" for k, v in wanted.items())
        edits = (
            insert_after(factory.args[-1], added),  # before a trailing comma and its comment
            replace_span(factory, node, "", after_start=True),  # drop `.cuda()`
        )
        shown = ", ".join(f"{k}={v}" for k, v in wanted.items())
        return Fix(edits, safe=True, description=f"create the leaf with `{shown}` instead of converting it")

    def _targets(self, node: cst.Call, factory: cst.Call) -> Optional[Dict[str, str]]:
        """keyword -> source text, for a conversion whose targets are all literal."""
        attr = node.func.attr.value  # type: ignore[attr-defined]
        if attr in _METHODS:
            if node.args:
                return None  # `.cuda(1)`, `.double(memory_format=...)`
            key, value = _METHODS[attr]
            if "{torch}" in value:
                alias = self._torch_alias(factory)
                if alias is None:
                    return None
                value = value.format(torch=alias)
            return {key: value}
        if attr != "to" or not node.args or len(node.args) > 2:
            return None
        out: Dict[str, str] = {}
        for a in node.args:
            if a.star:
                return None
            v = a.value
            kw = a.keyword.value if a.keyword is not None else None
            if (isinstance(v, cst.SimpleString) and isinstance(v.evaluated_value, str)
                    and _DEVICE.fullmatch(v.evaluated_value) and kw in (None, "device")):
                key = "device"
            elif self.model.qualname(v) in _DTYPES and kw in (None, "dtype"):
                key = "dtype"
            else:
                return None  # a variable, another tensor, non_blocking=, copy=, ...
            if key in out:
                return None
            out[key] = _CODE.code_for_node(v)
        return out

    def _torch_alias(self, factory: cst.Call) -> Optional[str]:
        func = factory.func
        if isinstance(func, cst.Attribute) and self.model.qualname(func.value) == "torch":
            return _CODE.code_for_node(func.value)
        return self.model.imports.spelling("torch")
