# Source: https://discuss.pytorch.org/t/simple-understanding-of-backprop-gradient-descent/73588
# Category: inplace-on-leaf
# Expect: ok
"""Correct code: a hand-written gradient-descent loop fits a line by updating the leaf
parameter in place with a.sub_() inside torch.no_grad() and zeroing a.grad afterwards."""
import torch

torch.manual_seed(0)

n = 100
x = torch.ones(n, 2)
x[:, 0].uniform_(-1., 1)
y = x @ torch.tensor([3., 2.]) + 0.1 * torch.randn(n)


def mse(y_hat, y):
    return ((y_hat - y) ** 2).mean()


a = torch.tensor([-5., 5.], requires_grad=True)
lr = 1e-1


def update(t):
    y_hat = x @ a
    loss = mse(y, y_hat)
    if t % 10 == 0:
        print(t, loss.item())
    loss.backward()
    with torch.no_grad():
        a.sub_(lr * a.grad)
        a.grad.zero_()
    return loss.item()


losses = [update(t) for t in range(100)]
assert a.is_leaf and a.requires_grad
assert torch.count_nonzero(a.grad) == 0
assert losses[-1] < 0.1 * losses[0]
assert torch.allclose(a.detach(), torch.tensor([3., 2.]), atol=0.2)
print("fitted", a.detach())
