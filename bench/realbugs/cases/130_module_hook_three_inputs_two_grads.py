# Source: https://github.com/pytorch/pytorch/issues/598
# Category: non-full-backward-hook
# Expect: silent: the legacy module backward hook is attached to the module's last op (the second add), so grad_input has 2 entries for a 3-input module and the hook reads the wrong gradients
"""A module that sums three inputs registers a backward hook in its constructor to inspect grad_input; with the legacy
register_backward_hook the hook sees the inputs of the last addition only, so it gets two gradients, not one per input."""
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
        self.register_backward_hook(bh)  # BUG: non-full-backward-hook

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
assert len(seen['grad_input']) == 2
print("EVIDENCE: the module hook received", len(seen['grad_input']), "grad_input tensors for a module with 3 inputs")
