from __future__ import annotations

from typing import Any, Dict, List, Tuple

import libcst as cst

from gradlint.rule import Rule, Severity


class BaselineNotDetached(Rule):
    """
    ## What it does
    Finds a policy-gradient term whose weight is a difference with a graph: a log-probability
    (what a distribution's `.log_prob(...)` returned, or a function of such log-probabilities
    alone: `.sum(-1)`, `-log_p`, `torch.stack(log_ps)`) multiplied by `a - b` where the
    subtracted `b` requires grad (a critic's value, a learned baseline, computed with grad on
    and not detached), where one `backward()` runs through that product and through the
    baseline's own loss (a term made from the same `b` outside the product: the critic's
    regression in `loss = actor_loss + critic_loss`), so the optimizer that steps after it
    trains the critic with both.

    Silent where the baseline is detached (`(returns - values).detach()`, `values.detach()`),
    computed under `torch.no_grad()`, taken from a rollout buffer, or where the model does
    not know whether it requires grad; silent where the weight is no subtraction (a product of
    probabilities and Q-values, an entropy term) or a function of the same log-probability (a
    focal weight `1 - log_p.exp()`), for `torch.log(p)` and `log_softmax` factors (only a
    distribution's `log_prob` says "score function"), and where the policy term's backward is
    separate from the critic's (a `zero_grad()` of the critic's optimizer in between may clear
    what it left there).

    ## Why is this bad
    Nothing raises; the critic's gradient is wrong. In the score-function estimator
    `grad E[R] = E[(R - b) * grad log pi(a)]` the baseline `b` is a constant: it lowers the
    variance and does not change the expectation. Differentiated as written, the loss also
    sends `-log pi(a) * d b` into the critic (and into a trunk it shares with the actor), a
    gradient that drives the value estimate up or down with the action's log-probability.
    Added to the critic's own regression loss (`loss = actor_loss + critic_loss`, one
    `backward()`, one optimizer), the critic no longer fits the returns; with a separate
    critic optimizer its gradients still carry the actor's term unless zeroed in between.

    ## Example
    ```python
    dist = torch.distributions.Categorical(logits=actor(states))
    values = critic(states).squeeze(-1)
    advantage = returns - values
    actor_loss = -(dist.log_prob(actions) * advantage).mean()   # the critic gets this gradient
    critic_loss = advantage.pow(2).mean()
    (actor_loss + critic_loss).backward()
    ```

    ## Use instead
    ```python
    advantage = returns - values
    actor_loss = -(dist.log_prob(actions) * advantage.detach()).mean()
    critic_loss = advantage.pow(2).mean()      # the critic learns from its own loss only
    (actor_loss + critic_loss).backward()
    ```

    ## Fix safety
    Not fixable automatically: the `.detach()` goes on the weight of the policy term only; the
    critic's own loss must keep its graph.

    ## References
    - https://pytorch.org/docs/stable/distributions.html#score-function
    - https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html
    - Sutton & Barto, Reinforcement Learning: An Introduction, 13.4 (REINFORCE with baseline)
    """

    code = "GL309"
    name = "baseline-not-detached"
    severity = Severity.ERROR
    message = ("a log-probability multiplied by {what}: backward() sends this policy-gradient term into the "
               "baseline (the critic) too, a wrong gradient for it")
    hint = "detach the weight of the policy term (`(returns - values).detach()`); train the critic with its own loss"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        # product value id -> (the product's node, the context there, message arguments)
        self._terms: Dict[int, Tuple[Any, Any, Dict[str, str]]] = {}
        self._done: set = set()

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if type(node.operator) is not cst.Multiply:
            return
        model = self.model
        out = model.value_of(node)  # (evaluates both operands: a `.log_prob(...)` among them)
        if out.kind != "tensor" or out.rg is not True or not model.log_probs or not model.differences:
            return
        left, right = model.value_of(node.left), model.value_of(node.right)
        for score, weight, weight_node in ((left, right, node.right), (right, left, node.left)):
            if score.kind != "tensor" or score.id not in model.log_probs:
                continue
            parts = model.differences.get(weight.id) if weight.kind == "tensor" else None
            if parts is None:
                continue
            minuend, baseline = parts
            if baseline.kind != "tensor" or baseline.rg is not True or baseline.id in model.log_probs:
                continue
            self._terms[out.id] = (node, model.here(), {"what": _weight(weight_node)}, out, baseline)
            return

    def on_backward(self, node: Any, value: Any) -> None:
        if value.kind != "tensor" or not self._terms:
            return
        for vid, (term, context, args, product, baseline) in self._terms.items():
            if vid not in value.deps or id(term) in self._done:
                continue
            own = self._critic_term(value, product, baseline)
            if own is None:
                continue
            self._done.add(id(term))
            self.report(term, context=context, related=[(node, "the backward() that runs through it, and through "
                                                               "the baseline's own loss")], **args)

    def _critic_term(self, loss: Any, product: Any, baseline: Any) -> Any:
        """A part of ``loss`` made from ``baseline`` other than through the policy term
        ``product`` (the critic's own regression): the same backward() trains the critic, so
        the optimizer that steps after it applies the policy term's gradient to the critic."""
        values = self.model.score_values
        for uid in loss.deps:
            u = values.get(uid)
            if u is not None and baseline.id in u.deps and product.id not in u.deps and uid not in product.deps:
                return u
        return None


def _text(node: cst.BaseExpression) -> str:
    code = cst.Module(body=[]).code_for_node(node)
    code = " ".join(code.split())
    return code if len(code) <= 40 else code[:37] + "..."


def _weight(node: cst.BaseExpression) -> str:
    """The weight, and the subtracted operand where the subtraction is written here."""
    inner = node
    while type(inner) is cst.Call and type(inner.func) is cst.Attribute and not inner.args:
        inner = inner.func.value  # `(r - v).squeeze()`
    if type(inner) is cst.BinaryOperation and type(inner.operator) is cst.Subtract:
        return f"`{_text(node)}`, whose subtracted `{_text(inner.right)}` requires grad"
    return f"`{_text(node)}`, a difference whose subtracted value requires grad"
