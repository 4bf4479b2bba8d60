# Source: https://discuss.pytorch.org/t/gradient-is-lost-when-use-torch-tensor-t1-t2/23261
# Category: tensor-copy-construct
# Expect: raises RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""Two angles go through cos() and are packed into a vector with torch.tensor([...]) so it can be
multiplied by a matrix; torch.tensor copies the values and the angles lose their gradient."""
import torch

from params import a, b

torch.manual_seed(0)

mat = torch.tensor([[1.0, 2.0],
                    [3.0, 4.0]])
target = torch.tensor([2.0, 1.0])
optimizer = torch.optim.SGD([a, b], lr=0.01)

for step in range(3):
    optimizer.zero_grad()
    cosa = torch.cos(a)
    cosb = torch.cos(b)
    y2 = torch.tensor([cosa, cosb])  # BUG: tensor-copy-construct
    y2 = torch.matmul(y2, mat)
    loss = ((y2 - target) ** 2).sum()
    loss.backward()
    optimizer.step()

print("a grad", a.grad, "b grad", b.grad)
