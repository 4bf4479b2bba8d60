"""Element counts, as far as ``backward()`` needs them: torch creates the implicit gradient of
``backward()`` / ``autograd.grad(out, inputs)`` only for an output of exactly one element
(``numel() == 1``); anything else raises "grad can be implicitly created only for scalar
outputs" (torch/autograd/__init__.py, ``_make_grads``).

The model tracks autograd state, not shapes. One fact is kept, ``Value.numel`` (a ``Numel`` or
None: unknown), set only by the operations that certainly make it and kept only through the
operations that certainly keep it; anything else leaves it unknown:

- ``MANY``: certainly not one element: a factory with literal sizes whose product is not 1
  (``torch.randn(8, 12)``), a ``torch.stack`` of two or more tensors given in place.
- ``ROWS``: one loss (or more) per sample, the samples along dim 0: the output of a criterion
  built with ``reduction="none"`` (``nn.CrossEntropyLoss(reduction="none")``,
  ``F.mse_loss(..., reduction="none")``). Not one element unless the batch holds one sample
  (and its other dims are 1): likely, not certain.
- ``BATCH``: as ``ROWS``, with the samples along some dim (after a reshape, a transpose or a
  broadcast with a tensor of unknown shape).

Kept by element-wise operations (broadcasting never makes one element out of several: a
dimension of size n > 1 stays n, and a zero-size one stays 0; zero elements raise too), by
operations along a dim that keep the shape (``softmax``, ``cumsum``), by views and reshapes
(same number of elements), and, for ``ROWS``, by a reduction over a literal dim >= 1 (dim 0, the
batch, stays). A full reduction (``.sum()``, ``.mean()``, ``reduction="mean"/"sum"``) gives one
element, which is what an unknown count allows too, so it is not recorded.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import string_value
from gradlint.model.syntax import kwarg, kwvalue, positional
from gradlint.model.values import MODULE, SCALAR, TENSOR, Value, next_id

MANY = "many"
ROWS = "rows"
BATCH = "batch"


class Numel(NamedTuple):
    kind: str  # MANY, ROWS or BATCH
    node: Any  # where it was made: the factory, the stack, the criterion (its construction)
    what: str  # how, for the message ("built with reduction='none'")


# element-wise operations of several tensors: the output has the operands' broadcast shape
BROADCASTING = frozenset(
    """add addcdiv addcmul atan2 clamp clip div divide float_power fmod hypot lerp logaddexp
    masked_fill maximum minimum mul multiply pow remainder sub subtract true_divide where
    xlogy""".split()
)
# operations whose output has the shape of their input (element-wise, or along a dim)
SHAPE_KEEPING = frozenset(
    """abs absolute acos acosh angle asin asinh atan atanh clamp_min clamp_max cos cosh deg2rad
    digamma erf erfc erfinv exp exp2 expm1 floor ceil frac lgamma log log10 log1p log2 logit
    nan_to_num neg negative rad2deg reciprocal relu round rsqrt sigmoid sign sin sinc sinh sqrt
    square tan tanh trunc softmax log_softmax cumsum cumprod logcumsumexp flip fliplr flipud roll
    index_fill scatter scatter_add masked_scatter clone contiguous""".split()
) | api.CONVERSION_METHODS
# F.* functions that act element-wise (or along a dim, keeping the shape)
ELEMENTWISE_FUNCS = frozenset(
    "relu relu6 elu selu celu gelu silu mish softplus softsign leaky_relu hardtanh hardswish "
    "hardsigmoid logsigmoid sigmoid tanh softmax log_softmax softmin dropout".split()
)
# numel-preserving reshapes: the samples may move off dim 0
RESHAPES = frozenset(
    "view view_as reshape reshape_as flatten permute transpose t swapaxes swapdims movedim moveaxis "
    "squeeze unsqueeze unflatten".split()
)
# reductions: with no dim, one element; over a literal dim >= 1, dim 0 stays
REDUCTIONS = frozenset("sum mean prod amax amin max min median nansum nanmean norm std var logsumexp".split())
# F.* losses and how many tensors they take positionally (a further positional argument is a
# legacy size_average/reduce flag: not followed)
LOSS_FUNCS = {
    n: 2 for n in """cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss
    binary_cross_entropy binary_cross_entropy_with_logits kl_div soft_margin_loss
    multilabel_soft_margin_loss poisson_nll_loss hinge_embedding_loss multilabel_margin_loss
    multi_margin_loss""".split()
}
LOSS_FUNCS.update({"margin_ranking_loss": 3, "triplet_margin_loss": 3, "gaussian_nll_loss": 3,
                   "cosine_embedding_loss": 3})
LOSS_MODULES = frozenset(
    """CrossEntropyLoss NLLLoss MSELoss L1Loss SmoothL1Loss HuberLoss BCELoss BCEWithLogitsLoss
    KLDivLoss CosineEmbeddingLoss MarginRankingLoss HingeEmbeddingLoss SoftMarginLoss
    MultiLabelSoftMarginLoss MultiLabelMarginLoss MultiMarginLoss TripletMarginLoss
    PoissonNLLLoss GaussianNLLLoss""".split()
)
_SIZED_FACTORIES = frozenset("torch." + n for n in "ones zeros empty rand randn".split())
_LIKE = frozenset("torch." + n for n in "ones_like zeros_like empty_like rand_like randn_like full_like".split())


def per_sample(numel: Optional[Numel]) -> Optional[Numel]:
    """The same per-sample fact with the samples no longer known to be along dim 0."""
    if numel is not None and numel.kind == ROWS:
        return Numel(BATCH, numel.node, numel.what)
    return numel


def broadcast(values: List[Value]) -> Optional[Numel]:
    """The fact for an element-wise result of ``values`` (tensors and numbers): several elements
    stay several. A per-sample operand keeps dim 0 only beside numbers."""
    facts = [v.numel for v in values if v.kind == TENSOR and v.numel is not None]
    if not facts:
        return None
    many = next((f for f in facts if f.kind == MANY), None)
    if many is not None:
        return many
    others = [v for v in values if not (v.kind == TENSOR and v.numel is not None)]
    if all(o.kind == SCALAR for o in others) and len(facts) == 1:
        return facts[0]
    return per_sample(facts[0])


def _int(node: Optional[cst.BaseExpression]) -> Optional[int]:
    if type(node) is cst.Integer:
        return int(node.value, 0)
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus and type(node.expression) is cst.Integer:
        return -int(node.expression.value, 0)
    return None


def _dim_arg(call: cst.Call, after_p: bool = False) -> Optional[cst.BaseExpression]:
    """The ``dim`` of a method call (``norm(p, dim)``: its second positional argument)."""
    pos = positional(call)
    dim = kwvalue(call, "dim")
    at = 1 if after_p else 0
    return dim if dim is not None else (pos[at] if len(pos) > at else None)


def _reduction(call: cst.Call) -> Optional[str]:
    """The literal ``reduction=`` of a criterion (``"mean"`` when absent); None when it is not a
    literal or a legacy ``size_average``/``reduce`` flag is given."""
    if kwarg(call, "size_average") is not None or kwarg(call, "reduce") is not None:
        return None
    arg = kwarg(call, "reduction")
    if arg is None:
        return "mean"
    if type(arg.value) is cst.SimpleString:
        return str(string_value(arg.value))
    return None


class ShapeMixin:
    """The model's part that keeps ``Value.numel`` (see the module docstring)."""

    def shaped_call(self, node: cst.Call) -> Value:
        first = next_id()
        out = self._eval_call(node)  # type: ignore[attr-defined]
        if out.id >= first and out.numel is None and out.kind in (TENSOR, MODULE):
            out.numel = self._numel_of_call(node, out)
        return out

    def shaped_binop(self, node: Any, operands: List[Value], out: Value) -> Value:
        if out.kind == TENSOR and out.numel is None and not (
                type(node) is cst.BinaryOperation and type(node.operator) is cst.MatrixMultiply):
            out.numel = broadcast(operands)
        return out

    def _numel_of_call(self, node: cst.Call, out: Value) -> Optional[Numel]:
        func = node.func
        q = self.qualname(func)  # type: ignore[attr-defined]
        if q is not None:
            return self._numel_of_function(q, node, out)
        if out.kind != TENSOR:
            return None
        if type(func) is not cst.Attribute:
            # `criterion(out, y)`: a criterion bound to a name (its value, as the call read it)
            module = self._memo.get(id(func))  # type: ignore[attr-defined]
            return module.numel if module is not None and module.kind == MODULE else None
        base = self._memo.get(id(func.value))  # type: ignore[attr-defined]
        if base is not None and base.kind == MODULE and func.attr.value == "forward":
            return base.numel
        if base is None or base.kind != TENSOR:
            # `self.criterion(out, y)`: a criterion kept on the object
            attr = self._memo.get(id(func))  # type: ignore[attr-defined]
            return attr.numel if attr is not None and attr.kind == MODULE else None
        return self._numel_of_method(func.attr.value, node, base, out)

    def _numel_of_method(self, attr: str, node: cst.Call, base: Value, out: Value) -> Optional[Numel]:
        fact = base.numel
        if fact is None:
            return None
        if attr in SHAPE_KEEPING:
            return fact  # the same shape (another dtype or device, a function of each element)
        if attr in BROADCASTING:
            return broadcast([base] + self._positional_values(node))
        if attr in RESHAPES:
            if fact.kind == ROWS and attr in ("unsqueeze", "squeeze", "flatten"):
                d = _int(_dim_arg(node)) if attr != "flatten" else _int(kwvalue(node, "start_dim") or (
                    positional(node)[0] if positional(node) else None))
                if d is not None and (d >= 1 or (d == -1 and attr == "unsqueeze")):
                    return fact  # dim 0 stays where it was
            return per_sample(fact)
        if attr in REDUCTIONS and fact.kind == ROWS:
            d = _int(_dim_arg(node, attr == "norm"))
            if d is not None and d >= 1:
                return fact
        return None

    def _positional_values(self, node: cst.Call) -> List[Value]:
        """The values of a call's positional arguments (evaluated by the call already)."""
        return [self.value_of(a.value) for a in node.args if a.keyword is None and not a.star]  # type: ignore[attr-defined]

    def _numel_of_function(self, q: str, node: cst.Call, out: Value) -> Optional[Numel]:
        last = q.rsplit(".", 1)[-1]
        if q.startswith("torch.nn.") and last in LOSS_MODULES and out.kind == MODULE:
            # the criterion object: what its output holds
            if not positional(node) and _reduction(node) == "none":
                return Numel(ROWS, node, f"`{last}(reduction='none')` gives one loss per sample")
            return None
        if out.kind != TENSOR:
            return None
        if q.startswith("torch.nn.functional.") and last in LOSS_FUNCS:
            if len(positional(node)) <= LOSS_FUNCS[last] and _reduction(node) == "none":
                return Numel(ROWS, node, f"`{last}(..., reduction='none')` gives one loss per sample")
            return None
        if q == "torch.stack":
            # k >= 2 tensors of n elements each: k * n elements, never one
            pos = positional(node)
            items = pos[0] if pos else None
            elements = items.elements if type(items) in (cst.List, cst.Tuple) else ()  # type: ignore[union-attr]
            tensors = [type(e) is cst.Element and self.value_of(e.value).kind == TENSOR  # type: ignore[attr-defined]
                       for e in elements]
            if len(elements) >= 2 and all(tensors):
                return Numel(MANY, node, f"`torch.stack` of {len(elements)} tensors has more than one element")
            return None
        if q in _SIZED_FACTORIES:
            sizes = positional(node)
            if len(sizes) == 1 and type(sizes[0]) in (cst.Tuple, cst.List):
                sizes = [e.value for e in sizes[0].elements]  # type: ignore[union-attr]
            ints = [_int(s) for s in sizes]
            if ints and all(i is not None for i in ints):
                n = 1
                for i in ints:
                    n *= i  # type: ignore[operator]
                if n != 1:
                    shape = ", ".join(str(i) for i in ints)
                    return Numel(MANY, node, f"`{q}({shape})` has {n} elements")
            return None
        if q in _LIKE:
            src = self.value_of(node.args[0].value) if node.args else None  # type: ignore[attr-defined]
            return src.numel if src is not None and src.kind == TENSOR else None
        args = self._positional_values(node)
        torch_fn = q.startswith("torch.") and q.count(".") == 1
        if (q.startswith("torch.nn.functional.") and last in ELEMENTWISE_FUNCS) or (
                torch_fn and last in SHAPE_KEEPING):
            return args[0].numel if args and args[0].kind == TENSOR else None
        if torch_fn and last in BROADCASTING:
            return broadcast(args)
        if torch_fn and last in REDUCTIONS and args and args[0].kind == TENSOR:
            fact = args[0].numel
            if fact is None or fact.kind != ROWS:
                return None
            pos = positional(node)
            at = 2 if last == "norm" else 1  # torch.norm(x, p, dim)
            d = _int(kwvalue(node, "dim") or (pos[at] if len(pos) > at else None))
            return fact if d is not None and d >= 1 else None
        return None

    def note_return(self, stmt: Any, value: Value) -> None:
        """A ``return`` of a value with a known element count: where it left its function."""
        if value.kind == TENSOR and value.numel is not None and self.function_stack:  # type: ignore[attr-defined]
            where = (stmt, self.function_stack[-1], self.here())  # type: ignore[attr-defined]
            self.numel_returns.setdefault(value.id, where)  # type: ignore[attr-defined]
