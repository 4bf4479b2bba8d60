# Source: https://github.com/pytorch/pytorch/issues/8287
# Category: detach-new-leaf
# Expect: ok
"""Backprop split in two stages at a `detach().requires_grad_()` boundary: the second stage's
backward fills h2.grad, which is then pushed through the first stage with h1.backward(h2.grad).
With x created directly on the device (the maintainer's fix) x is a leaf and receives its gradient."""
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cpu")

x = torch.randn(2, 2, requires_grad=True, device=device)
t = torch.randn(2, 2, device=device)
loss_func = nn.MSELoss().to(device)
l1 = nn.Sequential(*[nn.Linear(2, 2) for _ in range(3)]).to(device)
l2 = nn.Sequential(*[nn.Linear(2, 2) for _ in range(3)]).to(device)

h1 = l1(x)
h2 = h1.detach().requires_grad_()
h3 = l2(h2)
l = loss_func(h3, t)
l.backward()
h1.backward(gradient=h2.grad)

# reference: the same network differentiated end to end
x_ref = x.detach().clone().requires_grad_()
loss_func(l2(l1(x_ref)), t).backward()
assert x.grad is not None
assert torch.allclose(x.grad, x_ref.grad)
print("x.grad from the two-stage backward matches end-to-end backprop:", x.grad.tolist())
