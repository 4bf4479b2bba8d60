from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from gradlint.model.lattice import must_deps
from gradlint.model.weights import covers
from gradlint.rule import Rule, Severity


class StepBetweenForwardAndBackward(Rule):
    """
    ## What it does
    Finds a `backward()` through a graph that saved the weight of a `Linear`/`Conv` layer,
    when an `optimizer.step()` over that layer's module ran between the forward that built the
    graph and this `backward()`, after an earlier `backward(retain_graph=True)` through the same
    graph gave the weight its gradient. Typical forms: a GAN whose discriminator is stepped
    between its own loss's `backward(retain_graph=True)` and the generator loss's `backward()`
    through the same discriminator pass; a second loss that reuses an output computed before
    another optimizer's step; a recurrent state carried from one iteration into the next without
    `.detach()` while `backward(retain_graph=True)` keeps its graph (the layer that took the
    state in saved its weight, the iteration's `step()` changed it, and the next iteration's
    `backward()` goes on into that graph: reported at the state's first use in the loop, where
    it should be detached). Recurrent layers (`RNN`, `LSTM`, `GRU` and their cells) save their
    weights when their input or hidden state requires grad.

    A `Linear` layer saves its weight when its input requires grad (the weight is needed for the
    input's gradient); in an `nn.Sequential`, every `Linear` after a layer with trainable
    parameters does. A `Conv1d`/`Conv2d`/`Conv3d` saves its weight whenever its output requires
    grad, also as a first layer applied to data. Not reported: weights that nothing saved (a
    first `Linear` applied to data),
    weights of modules the step does not cover, frozen layers, a `step()` or `backward()` on
    some paths only, and a `zero_grad()` between the earlier `backward()` and the `step()`
    (parameters without a gradient are left as they are).

    Where it is reported: where the later loss takes in the part computed before the step, when
    that happens after the step (recompute it, or detach it there); else at the `step()`, which
    must come after this `backward()`.

    ## Why is this bad
    `optimizer.step()` updates each parameter that has a gradient in place, which bumps its
    version counter. The retained graph still holds the old weight; when `backward()` reaches
    the op that saved it, torch raises `RuntimeError: one of the variables needed for gradient
    computation has been modified by an inplace operation: [...] is at version 1; expected
    version 0 instead.`

    ## Example
    ```python
    fake = generator(z)
    loss_d = bce(disc(real), ones) + bce(disc(fake), zeros)
    loss_g = bce(disc(fake), ones)
    loss_d.backward(retain_graph=True)
    opt_d.step()               # changes disc's weights in place
    loss_g.backward()          # RuntimeError: ... modified by an inplace operation
    ```

    ## Use instead
    ```python
    loss_d = bce(disc(real), ones) + bce(disc(fake.detach()), zeros)
    loss_d.backward()
    opt_d.step()
    loss_g = bce(disc(fake), ones)   # a new pass through the updated discriminator
    loss_g.backward()
    ```
    or call every `backward()` before the first `step()`.

    ## Fix safety
    No automatic fix: the loss must be recomputed after the step, or the steps reordered.

    ## References
    - https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd
    - https://github.com/pytorch/pytorch/issues/39141
    """

    code = "GL503"
    name = "step-between-forward-and-backward"
    severity = Severity.ERROR
    message = ("{what}: torch raises RuntimeError (one of the variables needed for gradient computation has "
               "been modified by an inplace operation)")
    hint = "call backward() on every loss before the step(), or recompute the loss after it"

    def on_backward(self, node: Any, value: Any) -> None:
        model = self.model
        if value.kind != "tensor" or model.expecting_error or model.repeat or not _runs_whole_graph(node):
            return
        events = model.events
        if not events or events[-1].node is not node or events[-1].kind != "backward":
            return
        later = events[-1]
        level = len(model.call_statements)
        freed = model.freed_ids()
        deps = must_deps(value)
        for s in sorted(deps):
            saves = model.weight_saves.get(s)
            if not saves or s in freed:
                continue
            made = model.saver_seq.get(s, len(events))
            for step in events[made:later.seq]:
                if step.kind != "step" or step.module is None or not _together(step, later):
                    continue
                if not any(covers(step.module, keys[level]) for _, keys in saves if level in keys):
                    continue
                if _graded_before(events, made, step, s) is None:
                    continue
                self._report(node, value, s, step, level)
                return

    def on_loop_carried_stepped(self, statement: Any, key: str, step: Any) -> None:
        """A recurrent state carried from one iteration into the next without ``.detach()``,
        kept by ``backward(retain_graph=True)``: the graph of the state saved a weight that the
        iteration's ``step()`` then changes in place, and the next iteration's ``backward()``
        goes on into that graph."""
        if self.model.expecting_error:
            return
        self.report(statement, context=(statement, ()),
                    related=[(step.node, "the step() that changes the saved weights in place")],
                    what=f"`{key}` carries the previous iteration's graph into this one (kept by "
                    "backward(retain_graph=True)), whose saved weights that iteration's step() changed in place; "
                    "this iteration's backward() goes through it")

    def _report(self, node: Any, value: Any, saver: int, step: Any, level: int) -> None:
        model = self.model
        related = [(node, "the backward() that reaches the saved weight: torch raises here")]
        made = model.saver_chain.get(saver, ())
        if len(made) > level:
            related.append((made[level], "the forward that saved the weight, before the step()"))
        taken = None
        for c in sorted(value.deps):
            if c != saver and c in model.savers and model.saver_seq.get(c, -1) > step.seq \
                    and saver in model.saver_deps.get(c, ()):
                chain = model.saver_chain.get(c, ())
                taken = chain[level] if len(chain) > level else None
                break
        if taken is not None and taken is not model.current_statement:
            related.append((step.node, "the step() that changes the weight in place"))
            self.report(taken, context=(taken, ()), related=related,
                        what="this loss takes in a result computed before the optimizer's step(), whose graph saved "
                        "a weight that the step() changed in place; its backward() goes through it")
            return
        self.report(step.node, context=(step.statement, ()), related=related,
                    what=f"`{step.key}.step()` changes in place the weights that a graph saved, and a later "
                    "backward() goes through that graph")


def _runs_whole_graph(node: Any) -> bool:
    """A ``backward()`` that runs down to the leaves (no ``inputs=``, not ``autograd.grad``)."""
    if type(node) is not cst.Call or any(a.keyword is not None and a.keyword.value == "inputs" for a in node.args):
        return False
    return type(node.func) is cst.Attribute and node.func.attr.value == "backward"


def _together(a: Any, b: Any) -> bool:
    """Do two events run on the same paths (same function walk, loops and branches)?"""
    return (a.function is b.function and a.root is b.root and a.loops == b.loops and a.conds == b.conds
            and not a.exits and not b.exits)


def _graded_before(events: List[Any], made: int, step: Any, saver: int) -> Optional[Any]:
    """The backward() between the forward (event count ``made``) and ``step`` that went through
    ``saver`` (so the weight it saved has a gradient when the step runs), with no zero_grad()
    after it; None if there is none."""
    for e in reversed(events[made:step.seq]):
        if e.kind in ("zero_grad", "zero_grad_keep"):
            return None
        if e.kind == "backward" and _together(e, step) and e.value is not None and e.value.kind == "tensor" \
                and saver in must_deps(e.value) and _runs_whole_graph(e.node):
            return e
    return None
