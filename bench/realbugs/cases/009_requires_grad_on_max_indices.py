# Source: https://github.com/pytorch/pytorch/issues/95110
# Category: int-requires-grad
# Expect: raises RuntimeError: only Tensors of floating point and complex dtype can require gradients
"""The loss is computed from the class indices returned by `torch.max`; since those do not require
grad, the reporter sets `requires_grad = True` on the LongTensor, which torch rejects."""
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
    predicted.requires_grad = True  # BUG: int-requires-grad
    loss = nn.functional.mse_loss(predicted.float(), labels.float())
    loss.backward()
    optimizer.step()
    return loss.item()


model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
inputs, labels = torch.randn(32, 10), torch.randint(0, 4, (32,))
for epoch in range(3):
    print("epoch", epoch, "loss", train_step(model, optimizer, inputs, labels))
