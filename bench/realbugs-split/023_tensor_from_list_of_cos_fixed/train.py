# Source: https://discuss.pytorch.org/t/gradient-is-lost-when-use-torch-tensor-t1-t2/23261
# Category: tensor-copy-construct
# Expect: ok
"""Fixed twin: torch.stack keeps the cos() results in the graph, so a and b get gradients."""
import torch

from params import a, b

torch.manual_seed(0)

mat = torch.tensor([[1.0, 2.0],
                    [3.0, 4.0]])
target = torch.tensor([2.0, 1.0])
optimizer = torch.optim.SGD([a, b], lr=0.01)

start = (a.item(), b.item())
for step in range(3):
    optimizer.zero_grad()
    cosa = torch.cos(a)
    cosb = torch.cos(b)
    y2 = torch.stack([cosa, cosb])
    y2 = torch.matmul(y2, mat)
    loss = ((y2 - target) ** 2).sum()
    loss.backward()
    optimizer.step()

assert a.grad is not None and b.grad is not None
assert (a.item(), b.item()) != start
print("a grad", a.grad, "b grad", b.grad)
