from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from gradlint.model.lattice import must_deps
from gradlint.model.names import dotted, node_children
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
    raises and the statement that computed the shared part; when that `backward()` runs in a
    function called once per loss (`scaler.backward(loss)`), at the first call. When the
    optimizers stepped after the two `backward()` calls tell which loss needs the shared part
    (the module that made it is updated by one of them only, as a GAN's generator), at the
    statement where the other loss takes the shared value in (detach it there), whichever
    `backward()` comes first. For a graph built before a loop, at
    the statement that builds it (compute it under `no_grad`, detach it, or compute it inside
    the loop), with the `backward()` in the loop; for a recurrent state, at its first use in the
    loop (detach it there). A call that asks the graph for the gradient of another input on each
    iteration (`for x in inputs: torch.autograd.grad(out, x)`) is meant to share it: at that call
    (pass `retain_graph=True` on all iterations but the last). Iterating over a tensor (`for row
    in out`, `[r for r in out]`) gives its rows, views that carry its graph (`out.unbind(0)`); the
    outputs given to one call (`autograd.grad([a, b], x)`) are back-propagated together.

    After an `if`/`else`, `a if c else b`, `try`/`except` or a loop, only what a loss depends
    on on every path counts: a part of the graph that one path only computes is not reported.
    A graph made in a loop body and freed there stays freed after the loop (it does not exist
    where the loop did not run), unless the body has a `break` or `continue`.
    A `retain_graph=flag` whose `flag` is a parameter the call leaves at its literal default
    (`def backward(self, loss, retain_graph=False)`) or passes a literal is that literal.
    A graph built before a loop counts only where the model knows it is there: not the output
    of a module whose parameters it cannot tell (one passed in; a class whose parameters each
    construction makes, `nn.Parameter(t, requires_grad=requires_grad)`) and whose `forward` it
    could not follow.

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

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        # findings whose line to change depends on the optimizer step() after the later
        # backward() (see _place): judged at the end of the file
        self._pending: List[Tuple[Any, ...]] = []

    def on_backward(self, node: Any, value: Any) -> None:
        model = self.model
        if value.kind != "tensor" or model.expecting_error or model.repeat:
            return  # (the error is expected in `with pytest.raises(...)`; a loop's second pass)
        freed_ids = model.freed_ids()
        # what the value depends on on every path (a join's must view): an error on every path
        freed = sorted(d for d in must_deps(value) if d in freed_ids)
        if not freed:
            return
        by = model.freed_by.get(freed[0])
        if by is None:
            self.report(node, what="backward() through a part of the graph that an earlier backward() already freed")
            return
        later = (*model.call_statements, model.current_statement)
        first = model.freed_chain.get(freed[0], (by[1],))
        if first[:-1] == later[:-1]:
            # both backward() calls in one frame: which loss should leave the shared part
            # depends on the optimizers stepped after each (known at the end of the file)
            self._pending.append((node, value, freed[0], by, len(later) - 1, len(model.events) - 1, model.here()))
            return
        self._report(node, freed[0], by, first, later)

    def on_finish(self) -> None:
        for node, value, shared, by, level, seq, here in self._pending:
            self._place(node, value, shared, by, level, seq, here)

    def _report(self, node: Any, shared: int, by: Tuple[Any, Any], first: Tuple[Any, ...],
                later: Tuple[Any, ...], here: Optional[Tuple[Any, ...]] = None) -> None:
        """At the backward() that frees the shared part; when it runs in a function called from
        the frame of the later backward() (a helper that back-propagates the loss it is given),
        at that call, where retain_graph can be passed."""
        related = [(node, "the later backward() that goes through the freed part again: torch raises here")]
        made = self.model.saver_stmt.get(shared)
        if made is not None:
            related.append((made, "the part both graphs share is computed here"))
        common = 0
        while common < min(len(first), len(later)) - 1 and first[common] is later[common]:
            common += 1
        at, stmt = by
        if len(first) > common + 1:
            stmt = at = first[common]
            related.append((by[0], "the backward() in the called function"))
        # (judged at the end of the file: where the later backward() was, as the walk knew it then)
        context = (stmt, ()) if here is None else (stmt, (), False, here[3], here[4])
        self.report(at, context=context, related=related,
                    what="this backward() frees a part of the graph that a later backward() goes through again")

    def _place(self, node: Any, value: Any, shared: int, by: Tuple[Any, Any], level: int, seq: int,
               here: Tuple[Any, ...]) -> None:
        """Two losses share a part made by a module (a GAN's generated batch): when the optimizer
        stepped after one of the backward() calls updates that module and the one stepped after
        the other does not, the other loss needs none of the shared graph: the line to change is
        where that loss takes the shared value in (detach it there)."""
        model = self.model
        events = model.events
        first_seq = next((e.seq for e in events if e.kind == "backward" and e.node is by[0]), None)
        chain = model.saver_chain.get(shared, ())
        made = chain[level] if len(chain) > level else None
        owners = [_stepped_after(events, first_seq), _stepped_after(events, seq)]
        makes = [None if o is None or made is None else _calls_module(made, o) for o in owners]
        loss = None
        if makes[0] is True and makes[1] is False:
            loss, other = value, (events[first_seq].value if first_seq is not None else None)
        elif makes[1] is True and makes[0] is False and first_seq is not None:
            loss, other = events[first_seq].value, value
        at = _consumer(model, loss, other, shared, level) if loss is not None and other is not None else None
        if at is None:
            self._report(node, shared, by, (by[1],), (here[0],), here)
            return
        related = [(node, "the later backward() that goes through the freed part again: torch raises here"),
                   (by[0], "the earlier backward() that frees it")]
        if made is not None:
            related.append((made, "the shared part is computed here, by a module only the other loss's optimizer updates"))
        self.report(at, context=(at, (), False, here[3], here[4]), related=related,
                    what="this loss takes in a part of the graph that another loss's backward() also goes through, "
                    "made by a module that only the other loss's optimizer updates (the first of the two backward() "
                    "calls frees it): detach it here")

    def on_graph_before_loop(self, node: Any, value: Any, loop: Any = None) -> None:
        """A backward() in a loop (without retain_graph) of a value that depends on a graph built
        before the loop, still the value the next iteration back-propagates."""
        model = self.model
        if _inputs_per_iteration(node, loop):
            # `for x in inputs: autograd.grad(out, x)`: one graph, the gradient of another input
            # on each iteration: it is meant to be shared, and this call is what frees it
            self.report(node, what="this call frees a graph built before the loop, and the next iteration asks it "
                        "for the gradient of another input (pass retain_graph=True on every iteration but the last)")
            return
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


def _inputs_per_iteration(node: Any, loop: Any) -> bool:
    """Is ``node`` ``torch.autograd.grad(out, inputs)`` (or ``backward(inputs=...)``) whose
    inputs read a name that ``loop`` (a ``for``) binds: each iteration asks for other gradients?"""
    if type(loop) is not cst.For or type(node) is not cst.Call:
        return False
    bound, stack = set(), [loop.target]
    while stack:
        n = stack.pop()
        if type(n) is cst.Name:
            bound.add(n.value)
        stack.extend(node_children(n))
    name = dotted(node.func) or ""
    if name.endswith("autograd.grad") or name == "grad":
        given = [a.value for a in node.args if a.keyword is None][1:2]
    else:
        given = []
    given += [a.value for a in node.args if a.keyword is not None and a.keyword.value == "inputs"]
    stack = list(given)
    while stack:
        n = stack.pop()
        if type(n) is cst.Name and n.value in bound:
            return True
        stack.extend(node_children(n))
    return False


def _stepped_after(events: List[Any], seq: Any) -> Optional[str]:
    """The module (key) of the optimizer whose step() follows the backward() event ``seq``
    before any other backward() (None: none, or one over parameters the model cannot name)."""
    if seq is None:
        return None
    for e in events[seq + 1:]:
        if e.kind == "backward":
            return None
        if e.kind == "step":
            return e.module
    return None


def _calls_module(stmt: Any, key: str) -> bool:
    """Does ``stmt`` call the module ``key`` or one of its parts (``netG(z)``, ``model.enc(x)``)?"""
    stack = [stmt]
    while stack:
        n = stack.pop()
        if type(n) is cst.Call:
            name = dotted(n.func)
            if name is not None and (name == key or name.startswith(key + ".")):
                return True
        stack.extend(node_children(n))
    return False


def _consumer(model: Any, loss: Any, other: Any, shared: int, level: int) -> Any:
    """The statement (in the frame ``level``) where ``loss`` first takes in the shared part: the
    earliest op of its graph, not of ``other``'s, computed from it."""
    if getattr(loss, "kind", None) != "tensor" or getattr(other, "kind", None) != "tensor":
        return None
    for s in sorted(loss.deps - other.deps):
        if s != shared and s in model.savers and shared in model.saver_deps.get(s, ()):
            chain = model.saver_chain.get(s, ())
            return chain[level] if len(chain) > level else None
    return None
