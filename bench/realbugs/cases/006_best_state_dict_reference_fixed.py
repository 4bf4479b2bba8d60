# Source: https://github.com/pytorch/pytorch/issues/34765
# Category: state-dict-alias
# Expect: ok
"""Keeping the lowest-loss iteration with the maintainers' suggestion: `copy.deepcopy` of the
state_dict, so later optimizer steps cannot change the saved snapshot."""
import copy

import torch
import torch.nn as nn

torch.manual_seed(0)

model = nn.Linear(4, 1)
x = torch.randn(64, 4)
y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0 if it < 40 else 16.0)

best_loss, best_state, best_it = float("inf"), None, -1
for it in range(60):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    if loss.item() < best_loss:
        best_loss, best_it = loss.item(), it
        best_state = copy.deepcopy(model.state_dict())
    loss.backward()
    optimizer.step()
    scheduler.step()

model.load_state_dict(best_state)
with torch.no_grad():
    restored = criterion(model(x), y).item()
print(f"best loss {best_loss:.4f} at iteration {best_it}; loss after restoring it {restored:.4f}")
assert abs(restored - best_loss) < 1e-6
