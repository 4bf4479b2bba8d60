# Source: https://github.com/pytorch/pytorch/issues/95110
# Category: int-requires-grad
# Expect: ok
"""The loss is computed from the float logits (cross-entropy); `torch.max` is only used for the
accuracy, so nothing integer ever needs to require grad."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.net(x)


def train_step(model, optimizer, inputs, labels):
    optimizer.zero_grad()
    outputs = model(inputs)
    _, predicted = torch.max(outputs, 1)
    loss = nn.functional.cross_entropy(outputs, labels)
    loss.backward()
    optimizer.step()
    return loss.item(), (predicted == labels).float().mean().item()


model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
inputs, labels = torch.randn(32, 10), torch.randint(0, 4, (32,))
losses = []
for epoch in range(30):
    loss, acc = train_step(model, optimizer, inputs, labels)
    losses.append(loss)
assert losses[-1] < losses[0]
print("loss", round(losses[0], 4), "->", round(losses[-1], 4), "accuracy", acc)
