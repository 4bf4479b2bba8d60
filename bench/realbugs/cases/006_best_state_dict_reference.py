# Source: https://github.com/pytorch/pytorch/issues/34765
# Category: state-dict-alias
# Expect: silent: the "best" state_dict holds references to the live parameters, so restoring it restores the last (overshot) weights, not the best ones
"""The optimizer overshoots late in training, so the reporter keeps the state of the iteration
with the lowest loss via `model.state_dict()`; the saved state keeps changing with the model."""
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
        best_state = model.state_dict()  # BUG: state-dict-alias
    loss.backward()
    optimizer.step()
    scheduler.step()

model.load_state_dict(best_state)
with torch.no_grad():
    restored = criterion(model(x), y).item()
print(f"best loss {best_loss:.4f} at iteration {best_it}; loss after restoring it {restored:.4f}")
assert best_it < 59
assert restored > 10 * best_loss
print("EVIDENCE: restored 'best' state gives loss", round(restored, 4), "instead of", round(best_loss, 4))
