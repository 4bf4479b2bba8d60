# Source: http://pullrequest.ru/9554451/pytorch-kak-sdelat-opredelennyi-modul-parameters-staticheskim-vremya-obucheniya
# Category: frozen-by-no-grad-forward
# Expect: ok
"""To keep the middle Linear of a three-layer Sequential fixed, its weight and bias (parameters 2 and 3)
get requires_grad = False; the asker feared this would cut the gradient to the first layer, but the
activations still require grad, so the first and last layers train and the middle one stays put."""
import torch
import torch.nn as nn

torch.manual_seed(0)

s = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))

params = list(s.parameters())  # .parameters() returns a generator
# Each linear layer has 2 parameters (.weight and .bias); skip the first layer's (indices 0, 1)
params[2].requires_grad = False
params[3].requires_grad = False

optimizer = torch.optim.SGD(s.parameters(), lr=0.1)
first_before = s[0].weight.detach().clone()
middle_before = s[2].weight.detach().clone()

x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(5):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(s(x), y)
    loss.backward()
    optimizer.step()

assert s[2].weight.grad is None
assert torch.equal(middle_before, s[2].weight)
assert s[0].weight.grad is not None
assert not torch.equal(first_before, s[0].weight)
print("first layer trained through the frozen middle layer")
