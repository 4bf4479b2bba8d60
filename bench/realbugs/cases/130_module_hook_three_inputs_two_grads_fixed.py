# Source: https://github.com/pytorch/pytorch/issues/598
# Category: non-full-backward-hook
# Expect: ok
"""The three-input module with register_full_backward_hook: grad_input now has one gradient per module input, and
each equals that input's .grad."""
import torch
import torch.nn as nn

torch.manual_seed(0)

seen = {}


def bh(m, grad_input, grad_output):
    seen['grad_input'] = [g.detach().clone() for g in grad_input if g is not None]
    seen['grad_output'] = [g.detach().clone() for g in grad_output]


class M(nn.Module):
    def __init__(self):
        super(M, self).__init__()
        self.register_full_backward_hook(bh)

    def forward(self, x, y, z):
        return x + y + z


x = torch.randn(1, 5, requires_grad=True)
y = torch.randn(1, 5, requires_grad=True)
z = torch.randn(1, 5, requires_grad=True)

criterion = nn.MSELoss()
mod = M()
out = mod(x, y, z)
loss = criterion(out, torch.randn(1, 5))
loss.backward()

print("inputs:", 3, "| grad_input entries seen by the hook:", len(seen['grad_input']))
assert x.grad is not None and y.grad is not None and z.grad is not None
assert len(seen['grad_input']) == 3
for g, t in zip(seen['grad_input'], (x, y, z)):
    assert torch.allclose(g, t.grad)
