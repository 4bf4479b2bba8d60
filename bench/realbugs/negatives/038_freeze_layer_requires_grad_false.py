# Source: https://discuss.pytorch.org/t/freeze-weights-or-constraint-the-optimizer/175455
# Category: optimizer-misses-params
# Expect: ok
"""To train only the first of two Linear layers, the second is frozen with requires_grad = False and
the optimizer is still built over model.parameters(); the frozen layer gets no grad and AdamW skips
it, so it stays put while the first layer trains."""
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)

model = nn.Sequential(OrderedDict([
    ('1', nn.Linear(3, 3)),
    ('2', nn.Linear(3, 3)),
]))

for param in model[1].parameters():
    param.requires_grad = False
optimizer = optim.AdamW(model.parameters(), lr=0.0001)

first_before = model[0].weight.detach().clone()
second_before = model[1].weight.detach().clone()
x = torch.randn(16, 3)
y = torch.randn(16, 3)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()

assert model[1].weight.grad is None
assert torch.equal(second_before, model[1].weight)
assert not torch.equal(first_before, model[0].weight)
print("first layer trained, second frozen")
