# Source: https://www.codeprj.com/zh/blog/e6aa8d1.html
# Category: backward-twice
# Expect: ok
"""Correct code (the post's first "right way"): D's loss uses a detached fake, D's backward
keeps the graph with retain_graph=True, D is frozen while the generator loss backpropagates
through it, and both optimizers step only after both backward calls."""
import torch
from torch import nn


def set_requires_grad(net: nn.Module, mode=True):
    for p in net.parameters():
        p.requires_grad_(mode)


X = torch.ones(size=[1, 1, 1, 1]).requires_grad_(False)

G = nn.Conv2d(1, 1, kernel_size=1, stride=1, padding=0, bias=False)
G.weight.data.fill_(0.5)
G_optim = torch.optim.SGD(G.parameters(), lr=1.0)

D = nn.Conv2d(1, 1, kernel_size=1, stride=1, padding=0, bias=False)
D.weight.data.fill_(0.7)
D_optim = torch.optim.SGD(D.parameters(), lr=1.0)

G_optim.zero_grad()
D_optim.zero_grad()

Y = G(X)
D_loss = D(Y.detach()) ** 2
G_loss = D(Y) ** 2

D_loss.backward(retain_graph=True)

set_requires_grad(D, False)
G_loss.backward()
set_requires_grad(D, True)

# dD_loss/dD = 2 * wD * wG**2 = 0.35; dG_loss/dG = 2 * wD**2 * wG = 0.49
assert torch.allclose(D.weight.grad, torch.full_like(D.weight, 0.35))
assert torch.allclose(G.weight.grad, torch.full_like(G.weight, 0.49))

G_optim.step()
D_optim.step()
assert torch.allclose(G.weight.detach(), torch.full_like(G.weight, 0.5 - 0.49))
assert torch.allclose(D.weight.detach(), torch.full_like(D.weight, 0.7 - 0.35))
print("G", G.weight.item(), "D", D.weight.item())
