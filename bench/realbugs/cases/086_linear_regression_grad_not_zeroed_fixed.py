# Source: https://github.com/greebear/pytorch-learning/issues/1
# Category: missing-zero-grad
# Expect: ok
"""A course's hand-written linear-regression demo updates `w.data.sub_(lr * w.grad)` each iteration but never zeroes the
gradients; a student reported that the loss would not decrease even with a tiny lr, and the demo was fixed by zeroing w.grad/b.grad."""
import torch

torch.manual_seed(10)

lr = 0.05

x = torch.rand(20, 1) * 10
y = 2 * x + (5 + torch.randn(20, 1))

w = torch.randn((1), requires_grad=True)
b = torch.zeros((1), requires_grad=True)

losses = []
for iteration in range(1000):
    wx = torch.mul(w, x)
    y_pred = torch.add(wx, b)

    loss = (0.5 * (y - y_pred) ** 2).mean()
    losses.append(loss.item())

    loss.backward()

    b.data.sub_(lr * b.grad)
    w.data.sub_(lr * w.grad)

    w.grad.zero_()
    b.grad.zero_()

    if loss.data.numpy() < 1:
        break

rises = sum(1 for prev, cur in zip(losses, losses[1:]) if cur > prev)
assert rises == 0 and losses[-1] < 1
print("OK: the loss decreased monotonically from %.3f to %.3f in %d iterations" % (losses[0], losses[-1], iteration + 1))
