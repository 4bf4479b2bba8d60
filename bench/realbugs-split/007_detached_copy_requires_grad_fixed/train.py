# Source: https://github.com/pytorch/pytorch/issues/92586
# Category: detach-new-leaf
# Expect: ok
"""The helper copies its input with `clone()`, which keeps the copy in the graph, so the gradient
flows back to t and the optimizer moves it towards the target."""
import torch

import utils

torch.manual_seed(0)

t = torch.randn(5, requires_grad=True)
target = torch.linspace(-1.0, 1.0, 5)

optimizer = torch.optim.SGD([t], lr=0.25)
first = None
for step in range(5):
    optimizer.zero_grad()
    loss = ((utils.func(t) - target) ** 2).sum()
    if first is None:
        first = loss.item()
    loss.backward()
    optimizer.step()

assert t.grad is not None
assert loss.item() < 0.1 * first
print("t learned the target; loss", round(first, 4), "->", round(loss.item(), 6))
