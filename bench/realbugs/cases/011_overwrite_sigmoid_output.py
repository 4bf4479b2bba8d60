# Source: https://github.com/pytorch/pytorch/issues/9391
# Category: inplace-on-saved
# Expect: raises RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""One entry of a sigmoid output is overwritten in place before the loss; sigmoid saved its output
for backward, so backward fails (the hand-written 1/(exp(-a)+1) version happened to work)."""
import torch

torch.manual_seed(0)

a = torch.tensor([1, 2, 3.], requires_grad=True)
optimizer = torch.optim.SGD([a], lr=0.1)
target = torch.tensor([0.2, 2.0, 0.9])

for step in range(3):
    optimizer.zero_grad()
    b = a.sigmoid()
    b[1] = 2  # BUG: inplace-on-saved
    loss = ((b - target) ** 2).sum()
    loss.backward()
    optimizer.step()
print("a", a)
