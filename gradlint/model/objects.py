"""Objects and modules: calling an ``nn.Module`` (torch.nn classes and subclasses defined in
the file), its parameters and submodules, and the attributes of instances."""

from __future__ import annotations

from typing import Any, List


from gradlint.model.values import (
    TENSOR, TUPLE, UNKNOWN_VALUE, Value, plain_tensor, union,
)


class ObjectMixin:
    def _call_module(self, module: Value, args: List[Value], node: Any) -> Value:
        tensors = [a for a in args if a.kind in (TENSOR, TUPLE)]
        if module.params is False:
            if tensors:
                if module.inplace and tensors[0].kind == TENSOR:
                    self.inplace(node, tensors[0], f"`{module.node}(inplace=True)`")
                return self._derived(tensors[0], tensors[1:], node, op=module.act)
            return UNKNOWN_VALUE
        grad = self.grad_enabled
        cuts = union(a.cuts for a in args)
        if grad is True:
            if module.made == "inference":
                self._emit("inference_module", (module.made_node, module))
            for a in args:
                if a.kind == TENSOR and a.made == "inference":
                    self._emit("inference_saved", (node, a))  # the module saves its input
            deps = union(a.deps for a in args if a.kind == TENSOR and a.rg)
            out = Value(TENSOR, rg=True, leaf=False, probable=True, deps=deps, cuts=cuts)
            self.savers.add(out.id)  # e.g. Linear saves its input to compute the weight's grad
            return out
        if grad is False:
            out = plain_tensor(cuts=cuts)
            out.made = "computed"
            return out
        return Value(TENSOR, rg=None, leaf=None, cuts=cuts)
