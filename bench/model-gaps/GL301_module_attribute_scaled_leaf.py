"""GL301 recall gap: a module attribute made as `torch.ones(1, requires_grad=True) * 0.5` in
__init__ of an nn.Module subclass, then given to an optimizer via `model.scale`.
torch: ValueError: can't optimize a non-leaf Tensor. gradlint: nothing reported
(also not for `SGD([model.scale])` alone, for reading `model.scale.grad`, or for a chained
`torch.ones(1, requires_grad=True).double()` in __init__; only found when the attribute is set in
the same function that uses it)."""

import torch
import torch.nn as nn


class _ScaledHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)
        self.scale = torch.ones(1, requires_grad=True) * 0.5  # expected: error: GL301

    def forward(self, x):
        return self.fc(x) * self.scale


def bad_module_attribute_scaled_leaf():
    torch.manual_seed(0)
    model = _ScaledHead()
    opt = torch.optim.SGD(list(model.parameters()) + [model.scale], lr=0.1)
    opt.zero_grad()
    model(torch.ones(4, 3)).sum().backward()
    opt.step()


if __name__ == "__main__":
    try:
        bad_module_attribute_scaled_leaf()
    except ValueError as e:
        print("ValueError:", e)
