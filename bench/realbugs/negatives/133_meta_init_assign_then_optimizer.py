# Source: https://github.com/pytorch/tutorials/pull/2522
# Category: optimizer-stale-params
# Expect: ok
"""The checkpoint-loading recipe builds the module on the meta device, loads the saved state with
load_state_dict(..., assign=True) (which replaces the parameters), and only then constructs the optimizer, as the
recipe insists; the optimizer therefore holds the live parameters."""
import io

import torch
import torch.nn as nn

torch.manual_seed(0)


class SomeModule(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.linears = nn.ModuleList([nn.Linear(size, size) for i in range(4)])

    def forward(self, x):
        for lin in self.linears:
            x = torch.relu(lin(x))
        return x


buf = io.BytesIO()
torch.save(SomeModule(32).state_dict(), buf)
buf.seek(0)
state_dict = torch.load(buf, mmap=False, weights_only=True)
saved = {k: v.clone() for k, v in state_dict.items()}

with torch.device('meta'):
    new_m = SomeModule(32)
new_m.load_state_dict(state_dict, assign=True)
# This MUST be done AFTER the load_state_dict with assign.
opt = torch.optim.SGD(new_m.parameters(), lr=1e-1)

before = {k: v.detach().clone() for k, v in new_m.state_dict().items()}
for _ in range(3):
    x = torch.randn(8, 32)
    loss = (new_m(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

assert all(not p.is_meta for p in new_m.parameters())
assert all(p is q for p, q in zip(opt.param_groups[0]['params'], new_m.parameters()))
assert all(torch.equal(before[k], saved[k]) for k in saved)
assert not torch.equal(before['linears.3.weight'], new_m.linears[3].weight)
print("OK: optimizer built after assign=True updates the loaded parameters; loss", round(loss.item(), 4))
