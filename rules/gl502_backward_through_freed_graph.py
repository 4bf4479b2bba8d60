from __future__ import annotations

from typing import Any

from gradlint.model.lattice import must_deps
from gradlint.rule import Rule, Severity


class BackwardThroughFreedGraph(Rule):
    """
    ## What it does
    Finds a `backward()` (or `torch.autograd.grad`) through part of a graph that an earlier
    `backward()` without `retain_graph=True` already went through, and a `backward()` inside a
    loop through a graph built before the loop.
    Typical forms: `y.backward(); y.backward()`, two losses sharing a trunk each back-propagated
    in turn, a GAN whose generator output reaches the discriminator's loss without `.detach()`
    and then the generator's loss, and a recurrent hidden state carried from one iteration to the
    next without `.detach()` (truncated backpropagation through time).

    Where it is reported: at the line to change, with the symptom as a related location. For
    two graphs sharing a part, at the `backward()` that frees it (detach the shared value where
    this loss uses it, or pass `retain_graph=True` here), with the later `backward()` that
    raises and the statement that computed the shared part; for a graph built before a loop, at
    the statement that builds it (compute it under `no_grad`, detach it, or compute it inside
    the loop), with the `backward()` in the loop; for a recurrent state, at its first use in the
    loop (detach it there).

    After an `if`/`else`, `a if c else b`, `try`/`except` or a loop, only what a loss depends
    on on every path counts: a part of the graph that one path only computes is not reported.

    ## Why is this bad
    `backward()` frees the tensors the graph saved. Going through that part again raises
    `RuntimeError: Trying to backward through the graph a second time (or directly access saved
    tensors after they have already been freed).` In a loop the error comes on the second
    iteration.

    ## Example
    ```python
    fake = generator(z)
    loss_d = criterion(discriminator(fake), zeros)
    loss_d.backward()
    loss_g = criterion(discriminator(fake), ones)
    loss_g.backward()          # RuntimeError: the generator's graph was freed
    ```

    ## Use instead
    ```python
    loss_d = criterion(discriminator(fake.detach()), zeros)   # D's step does not need G's graph
    ```
    or `(loss_1 + loss_2).backward()`, or `retain_graph=True` on the first call when both
    really must go through the shared part; for a recurrent state, `hidden = hidden.detach()` at
    the start of each iteration.

    ## References
    - https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html
    - https://pytorch.org/tutorials/beginner/dcgan_faces_tutorial.html
    """

    code = "GL502"
    name = "backward-through-freed-graph"
    severity = Severity.ERROR
    message = "{what}: torch raises RuntimeError (Trying to backward through the graph a second time)"
    hint = "detach what the second loss should not go through, sum the losses, or pass retain_graph=True to the first backward()"

    def on_backward(self, node: Any, value: Any) -> None:
        model = self.model
        if value.kind != "tensor" or model.expecting_error or model.repeat:
            return  # (the error is expected in `with pytest.raises(...)`; a loop's second pass)
        freed_ids = model.freed_ids()
        # what the value depends on on every path (a join's must view): an error on every path
        freed = sorted(d for d in must_deps(value) if d in freed_ids)
        if freed:
            by = model.freed_by.get(freed[0])
            related = [(node, "the later backward() that goes through the freed part again: torch raises here")]
            made = model.saver_stmt.get(freed[0])
            if made is not None:
                related.append((made, "the part both graphs share is computed here"))
            if by is None:
                self.report(node, what="backward() through a part of the graph that an earlier backward() already freed")
                return
            self.report(by[0], context=(by[1], ()), related=related,
                        what="this backward() frees a part of the graph that a later backward() goes through again")
            return

    def on_graph_before_loop(self, node: Any, value: Any) -> None:
        """A backward() in a loop (without retain_graph) of a value that depends on a graph built
        before the loop, still the value the next iteration back-propagates."""
        model = self.model
        start = None
        for d in sorted(must_deps(value)):
            if d in model.savers:
                start = d
                break
        made = model.saver_stmt.get(start) if start is not None else None
        chain = model.saver_chain.get(start, ()) if start is not None else ()
        level = len(model.inline_stack)  # the loop's frame (the loop ends in it)
        inner = made
        if len(chain) > level + 1 and list(chain[:level]) == model.call_statements[:level]:
            # made in a function called before the loop: the line to change is that call, in
            # the loop's own function (`feats, _ = encoder(x)`), not a line of the function
            made = chain[level]
        what = ("computed before the loop with a graph that the backward() in the loop frees on the first "
                "iteration; the second iteration goes through it again")
        if made is not None:
            related = [(node, "the backward() in the loop: torch raises here on the second iteration")]
            if inner is not made:
                related.append((inner, "the graph is built here, in the function that call runs"))
            self.report(made, context=(made, ()), what=what, related=related)
        else:
            self.report(node, what="backward() in a loop through a graph built before the loop: the second "
                        "iteration finds it freed")

    def on_loop_carried_graph(self, statement: Any, key: str) -> None:
        if self.model.repeat:
            return
        self.report(
            statement, context=(statement, ()),
            what=f"`{key}` carries the previous iteration's graph into this one (a backward() in the loop freed it); "
            f"the second iteration back-propagates into it",
        )


def _retains(node: Any) -> bool:
    from gradlint.model.syntax import retains

    return hasattr(node, "args") and retains(node)
