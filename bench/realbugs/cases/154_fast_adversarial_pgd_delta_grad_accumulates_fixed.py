# Source: https://github.com/locuslab/fast_adversarial/issues/26
# Category: missing-zero-grad
# Expect: ok
"""The PGD attack loop with delta's gradient cleared next to the model's, so every sign step uses the current input
gradient."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def mnist_net():
    return nn.Sequential(nn.Conv2d(1, 4, 3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))


args = argparse.Namespace(attack="pgd", epsilon=0.3, alpha=0.1, attack_iters=4, lr=0.01)
model = mnist_net()
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
criterion = nn.CrossEntropyLoss()
X, y = torch.rand(8, 1, 14, 14), torch.randint(0, 10, (8,))

step_grads, used_grads = [], []
if args.attack == 'pgd':
    delta = torch.zeros_like(X).uniform_(-args.epsilon, args.epsilon)
    delta.data = torch.max(torch.min(1 - X, delta.data), 0 - X)
    for _ in range(args.attack_iters):
        delta.requires_grad = True
        output = model(X + delta)
        loss = criterion(output, y)
        opt.zero_grad()
        delta.grad = None
        loss.backward()
        grad = delta.grad.detach()
        step_grads.append(torch.autograd.grad(criterion(model(X + delta), y), delta)[0])
        used_grads.append(grad.clone())
        I = output.max(1)[1] == y
        delta.data[I] = torch.clamp(delta + args.alpha * torch.sign(grad), -args.epsilon, args.epsilon)[I]
        delta.data[I] = torch.max(torch.min(1 - X, delta.data), 0 - X)[I]
    delta = delta.detach()

output = model(torch.clamp(X + delta, 0, 1))
loss = criterion(output, y)
opt.zero_grad()
loss.backward()
opt.step()
gap = (used_grads[-1] - step_grads[-1]).abs().max().item()
print("last attack step: |used grad - current grad| max =", gap)
assert gap < 1e-6
