# Source: https://github.com/greebear/pytorch-learning/issues/1
# Category: missing-zero-grad
# Expect: silent: w.grad and b.grad are never zeroed, so each update uses the sum of all past gradients and the loss keeps going up and down
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
    w.data.sub_(lr * w.grad)  # BUG: missing-zero-grad

    if loss.data.numpy() < 1:
        break

rises = sum(1 for prev, cur in zip(losses, losses[1:]) if cur > prev)
assert rises >= 5
print("EVIDENCE: the loss went up in %d of %d gradient-descent steps; w.grad holds the running sum %.2f" % (
    rises, len(losses) - 1, w.grad.item()))
