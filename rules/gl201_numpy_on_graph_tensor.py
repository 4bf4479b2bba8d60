from __future__ import annotations

import re
from typing import Any, List

import libcst as cst

from gradlint.model.lattice import tensor_view
from gradlint.rule import CutRule, Severity

# NumPy functions that only look at a tensor's shape: fine on a tensor that requires grad
_INTROSPECTION = frozenset(
    "numpy." + n for n in "shape ndim size isscalar iterable result_type dtype broadcast_shapes".split()
)
# reductions that call the tensor's own method with NumPy keywords
_TYPEERROR = frozenset("numpy." + n for n in "mean sum max min std var amax amin prod cumsum".split())


def _tensor_args(model: Any, node: cst.Call) -> List[Any]:
    out = []
    for a in node.args:
        if a.keyword is not None:
            continue
        v = model.value_of(a.value)
        out.extend(v.items if v.kind == "tuple" else [v])
    return out


# functions whose name says they run for inference (`predict`, `generate_text`, `sample`): their
# callers usually run them with grad off
_INFERENCE = re.compile(r"^_*(predict|generate|infer|inference|sample|evaluate|validate|decode|translate|"
                        r"transcribe|beam_search|greedy_search)(_\w+)?$")


def _inference_function(model: Any) -> Any:
    """The name of the innermost function when grad mode is only assumed on there and that
    function is named for inference; else None."""
    chain = model.assumed_chain()
    if not chain:
        return None
    return chain[-1] if _INFERENCE.match(chain[-1]) else None


class NumpyOnGraphTensor(CutRule):
    """
    ## What it does
    Finds tensors that require grad taken through NumPy, in two forms.

    1. `.numpy()`, `np.asarray(t)`, `np.array(t)`, and any other NumPy function (`np.exp(t)`,
       `np.mean(t)`, `np.float32(t.sum())`, ...; not `np.shape`/`np.ndim`) on a tensor that
       requires grad (also after `.cpu()`): a leaf created with `requires_grad=True`, an `nn.Parameter`, or the result of
       operations on those with grad mode on (or of calling a module, reported as a warning
       because its parameters might be frozen; not when the module is one the linter cannot
       read at all, whose parameters it cannot tell and whose `forward` it cannot follow: such a
       warning was wrong far more often than right on real projects).
    2. The round trip `torch.from_numpy(f(h.detach().numpy()))` / `torch.tensor(ndarray)` whose
       result flows into a value that is back-propagated, while `h` itself does not reach that
       value through the graph.

    ## Why is this bad
    1. torch raises at once: `RuntimeError: Can't call numpy() on Tensor that requires grad.
       Use tensor.detach().numpy() instead.` (NumPy reductions such as `np.mean(t)` call the
       tensor's own method with NumPy keywords and raise `TypeError` instead.)
    2. Silently wrong: the tensor rebuilt from NumPy has no history, so `backward()` stops there
       and everything that produced `h` gets `grad=None` (it is never trained), while the
       layers after the break train normally.

    Inside a function, grad mode is that of its callers: a function or method that every caller
    in the project (in any module, by name, through callers of callers) runs under
    `torch.no_grad()` or `torch.inference_mode()` is not reported. One whose callers are not all
    known to turn grad off is linted with grad on; when its name says it runs for inference
    (`predict`, `generate`, `infer`, `sample`, `evaluate`, `decode`, ...) and no caller shows
    grad on, form 1 is a warning that says so.

    Not reported: `.detach().numpy()` for logging or metrics, `.numpy(force=True)`, tensors
    computed under `torch.no_grad()`, and targets or masks computed in NumPy from a prediction
    that itself reaches the loss (`loss = criterion(pred, torch.from_numpy(f(pred.detach()...)))`:
    the gradient reaches `pred` through its own path).

    After an `if`/`else`, `a if c else b`, `try`/`except` or a loop, form 1 fires only when the
    tensor requires grad on every path where it is a tensor (`total = 0` before a loop,
    `total = total + loss` in it: `0` has no `.numpy()` either); a tensor that requires grad on
    one path only is not reported.

    ## Example
    ```python
    h = layer1(x)
    z = torch.from_numpy(np.tanh(h.detach().numpy()))
    loss = layer2(z).sum()
    loss.backward()            # layer1.weight.grad is None
    ```

    ## Use instead
    ```python
    z = torch.tanh(h)          # stay in torch: the gradient flows back to layer1
    ```
    and `t.detach().cpu().numpy()` only where the value leaves the computation for good.

    ## References
    - https://pytorch.org/docs/stable/generated/torch.Tensor.numpy.html
    - https://pytorch.org/docs/stable/generated/torch.from_numpy.html
    """

    code = "GL201"
    name = "numpy-on-graph-tensor"
    severity = Severity.ERROR
    message = "{what}"
    hint = "stay in torch (use torch ops) while the gradient is needed; call `.detach()` only where the value leaves the graph for good"

    cut_kinds = frozenset({"numpy"})

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        model = self.model
        q = model.qualname(func)
        if q is None and isinstance(func, cst.Attribute) and func.attr.value == "numpy":
            for a in node.args:
                if a.keyword is not None and a.keyword.value == "force":
                    return
            # a number or None on some path fails there anyway: the tensors decide (lattice.py)
            v = tensor_view(model.value_of(func.value))
            call = "`.numpy()`"
        elif q is not None and q.startswith("numpy.") and q not in _INTROSPECTION:
            # every NumPy function converts its tensor arguments (or calls their methods with
            # NumPy keywords): RuntimeError, or TypeError for reductions such as np.mean
            v = next((a for a in _tensor_args(model, node) if a.requires_grad), None)
            if v is None:
                return
            call = f"`{q.replace('numpy.', 'np.')}()`"
        else:
            return
        if not v.requires_grad:
            return
        if v.probable and _assumed_only(model, v):
            return  # its graph is only assumed: the output of a module the model could not read
        raised = "TypeError" if q in _TYPEERROR else "RuntimeError"
        inference = _inference_function(model)
        if inference is not None:
            # grad on is only assumed in a function whose name says it runs for inference, and no
            # caller in the file or the project shows it run with grad off or on: its callers decide
            self.report(
                node,
                what=(f"{call} on a tensor that requires grad if `{inference}` runs with grad on (its callers "
                      f"decide, and not every caller in the project runs it under `torch.no_grad()`): torch raises "
                      f"{raised} here then; use `.detach()` first, or decorate `{inference}` with `@torch.no_grad()`"),
                severity=Severity.WARNING,
            )
            return
        self.report(
            node,
            what=f"{call} on a tensor that requires grad: torch raises {raised} here; use `.detach()` first",
            severity=Severity.WARNING if v.probable else None,
        )

    def report_cut(self, cut: Any, value: Any, **kw: Any) -> None:
        effect = (
            "backward() raises (nothing after this point requires grad)"
            if value.rg is False
            else "the gradient silently stops here (what produced the source gets grad=None)"
        )
        self.report(
            cut.node,
            what="tensor rebuilt from NumPy data of a tensor that requires grad, then back-propagated: " + effect,
            **kw,
        )


def _assumed_only(model: Any, v: Any) -> bool:
    """Does ``v`` require grad only by the model's assumption: computed from nothing but outputs
    of modules whose parameters it cannot tell and whose ``forward`` it could not follow
    (``Model.probable_savers``: a loss or filter of a library the project imports, a module
    whose constructor decides)? A warning on that ground is wrong more often than right."""
    probable = model.probable_savers
    if v.id in probable:
        return True
    deps = v.deps
    return bool(deps) and all(d in probable for d in deps)
