# Source: https://prodopsy.com/how-can-the-backward-function-in-tensor-influence-the-matrix-in-model
# Category: inplace-on-detached
# Expect: ok
"""Correct code (the postmortem claims otherwise): a softmax-regression module zero-initialises
its Linear layer with weight.detach().zero_(); detach() shares storage, so the parameter is
zeroed and still trains normally."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)


class SoftmaxRegression(torch.nn.Module):
    def __init__(self, num_features, num_classes):
        super().__init__()
        self.linear = torch.nn.Linear(num_features, num_classes)
        self.linear.weight.detach().zero_()
        self.linear.bias.detach().zero_()

    def forward(self, x):
        logits = self.linear(x)
        probas = F.softmax(logits, dim=1)
        return logits, probas


model = SoftmaxRegression(num_features=4, num_classes=3)
assert torch.count_nonzero(model.linear.weight) == 0
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

features = torch.randn(60, 4)
targets = (features[:, 0] > 0).long() + (features[:, 1] > 0).long()
costs = []
for epoch in range(20):
    logits, probas = model(features)
    cost = F.cross_entropy(logits, targets)
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
    costs.append(cost.item())

assert model.linear.weight.is_leaf and model.linear.weight.grad is not None
assert torch.count_nonzero(model.linear.weight) > 0
assert costs[-1] < costs[0]
print("cost", costs[0], "->", costs[-1])
