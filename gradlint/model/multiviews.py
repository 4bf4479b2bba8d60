"""Multi-output views: the tensors that ``chunk``, ``split`` and ``unbind`` return.

Each part is a view of the input, made by one autograd node that returns several views. When
the input requires grad and grad mode is on, torch marks these views so that an in-place write
to any of them (or to a view of one of them) with grad mode on raises at once: "Output 0 of
Split is a view and is being modified inplace. This view is the output of a function that
returns multiple views." (torch 2.13; ``tensor_split``, ``hsplit``, ``unsafe_chunk``, a
``.detach()``, ``.data`` or a copy of a part are not marked; an in-place write under
``no_grad`` is allowed.)

The model keeps, by value id, the op that made each such part (or the sequence of parts, before
it is unpacked or indexed): ``multi_view_op`` answers GL105's question. A part made where the
model does not know that the input requires grad, or that grad mode is on, is not marked."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

from gradlint.model.values import TENSOR, Value

# the methods / torch functions (torch names the node Split, SplitWithSizes or Unbind in its message)
MULTI_VIEW_OPS = frozenset({"chunk", "split", "split_with_sizes", "unbind"})


class MultiViewMixin:
    multi_views: Dict[int, str]  # id of a marked part (or sequence of parts) -> the op that made it
    part_seqs: Set[int]  # ids of the sequences of parts (marked or not)

    def multi_output_views(self, receiver: Value, op: str, args: List[Value], node: Any) -> Value:
        """``h.chunk(3)`` / ``torch.split(h, 2)``: the sequence of parts, a view of ``h`` (one value
        for all of them; unpacking or indexing it gives each part)."""
        out = self._derived(receiver, [], node, view=True)  # type: ignore[attr-defined]
        self.part_seqs.add(out.id)
        if receiver.kind == TENSOR and receiver.rg is True and self.grad_enabled is True:  # type: ignore[attr-defined]
            self.multi_views[out.id] = op
        return out

    def multi_view_op(self, value: Value) -> Optional[str]:
        """The op (``chunk``, ``split``, ``unbind``) when ``value`` is one of the parts of a
        multi-output view op of a tensor that requires grad, or a view of one; else None."""
        if value.kind != TENSOR:
            return None
        return self.multi_views.get(value.id)

    def view_part(self, base: Value, out: Value) -> None:
        """``out`` is a view of ``base``: a part (or a view of a part) stays one."""
        op = self.multi_views.get(base.id)
        if op is not None:
            self.multi_views[out.id] = op

    def row_of(self, value: Value, node: Any) -> Optional[Value]:
        """One element when iterating over ``value`` (``for row in h``, ``[r for r in h]``): a
        tensor iterates as ``h.unbind(0)`` (torch's ``Tensor.__iter__``), so each element is a
        part of that multi-output view; a sequence of parts (``h.chunk(3)``) gives its parts.
        None when ``value`` is no tensor."""
        if value.kind != TENSOR:
            return None
        if value.id not in self.part_seqs:
            value = self.multi_output_views(value, "unbind", [], node)
        return self.part_of(value)

    def part_of(self, value: Value) -> Optional[Value]:
        """``for part in h.chunk(3)``: one part (None when ``value`` is no sequence of parts)."""
        parts = self.unpack_parts(value, 1)
        return parts[0] if parts else None

    def unpack_parts(self, value: Value, n: int) -> Optional[List[Value]]:
        """``q, k, v = h.chunk(3)``: ``n`` parts, each a view of the input (None when ``value``
        is no sequence of parts)."""
        if value.kind != TENSOR or value.id not in self.part_seqs:
            return None
        return [self._derived(value, [], self.current_statement, view=True)  # type: ignore[attr-defined]
                for _ in range(n)]
