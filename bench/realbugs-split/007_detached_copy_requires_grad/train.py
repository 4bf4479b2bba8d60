# Source: https://github.com/pytorch/pytorch/issues/92586
# Category: detach-new-leaf
# Expect: silent: func() returns a fresh leaf, so backward "succeeds" but t never receives a gradient and never changes
"""A helper detaches its input and then sets `requires_grad = True` on the copy to make the
"element 0 of tensors does not require grad" error go away; backward now runs, but stops there."""
import torch

import utils

torch.manual_seed(0)

t = torch.randn(5, requires_grad=True)
target = torch.linspace(-1.0, 1.0, 5)

optimizer = torch.optim.SGD([t], lr=0.5)
before = t.detach().clone()
for step in range(5):
    optimizer.zero_grad()
    loss = ((utils.func(t) - target) ** 2).sum()
    loss.backward()
    optimizer.step()

assert t.grad is None
assert torch.equal(before, t.detach())
print("EVIDENCE: backward ran but t.grad is None and t is unchanged after 5 steps; loss", round(loss.item(), 4))
