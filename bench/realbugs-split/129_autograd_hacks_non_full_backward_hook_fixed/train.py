# Source: https://github.com/cybertronai/autograd-hacks/issues/10
# Category: non-full-backward-hook
# Expect: ok
"""The per-example-gradient helper with the thread's fix: register_full_backward_hook instead of the deprecated
register_backward_hook (torch may still note that the first layer's hook fires on outputs only, since the data
does not require grad)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import autograd_hacks

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
autograd_hacks.add_hooks(model)
data, targets = torch.randn(8, 10), torch.randint(0, 3, (8,))
loss = F.cross_entropy(model(data), targets)
loss.backward()
autograd_hacks.compute_grad1(model)
for layer in (model[0], model[2]):
    assert torch.allclose(layer.weight.grad1.mean(0), layer.weight.grad, atol=1e-6)
print("per-example gradients shape", tuple(model[0].weight.grad1.shape))
assert model[0].weight.grad1.shape == (8, 16, 10) and len(model[2].backprops_list) == 1
