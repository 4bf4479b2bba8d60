# Source: https://github.com/pytorch/pytorch/issues/9391
# Category: inplace-on-saved
# Expect: ok
"""The sigmoid output is cloned before one entry is overwritten, so the tensor sigmoid saved for
backward stays intact and the gradient of the overwritten entry is simply zero."""
import torch

torch.manual_seed(0)

a = torch.tensor([1, 2, 3.], requires_grad=True)
optimizer = torch.optim.SGD([a], lr=0.1)
target = torch.tensor([0.2, 2.0, 0.9])

for step in range(3):
    optimizer.zero_grad()
    b = a.sigmoid().clone()
    b[1] = 2
    loss = ((b - target) ** 2).sum()
    loss.backward()
    s = a.detach().sigmoid()
    expected = 2 * (s - target) * s * (1 - s)
    expected[1] = 0.0
    assert torch.allclose(a.grad, expected)
    optimizer.step()
print("a", a)
