# Source: https://github.com/pytorch/pytorch/pull/6017
# Category: graph-kept-alive
# Expect: ok
"""The epoch loss is accumulated the way the FAQ entry in this pull request recommends: the
per-iteration loss is converted to a Python number (`float(loss)` / `loss.item()`) before it is
added, so no iteration's graph is kept alive by the running total."""
import torch
import torch.nn as nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
batches = [(torch.randn(8, 6), torch.randn(8, 1)) for _ in range(5)]

history = []
for epoch in range(3):
    total_loss = 0.0
    per_batch = []
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total_loss += float(loss)
        per_batch.append(loss.item())
    history.append(total_loss / len(batches))

assert isinstance(total_loss, float) and all(isinstance(v, float) for v in per_batch)
assert history[-1] < history[0]
print("epoch losses", [round(h, 4) for h in history])
