# Source: https://github.com/pytorch/pytorch/issues/1266
# Category: optimizer-misses-params
# Expect: ok
"""A network whose first block is a pretrained feature extractor frozen with requires_grad=False;
only the parameters that still require grad are handed to the optimizer (the filter suggested in
the thread), so the frozen block stays fixed while the rest trains."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.classifier(self.features(x))


model = Net()
for param in model.features.parameters():
    param.requires_grad = False

optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1, momentum=0.9)
criterion = nn.CrossEntropyLoss()
images, labels = torch.randn(16, 3, 8, 8), torch.randint(0, 4, (16,))

frozen_before = model.features[0].weight.detach().clone()
head_before = model.classifier[1].weight.detach().clone()
for epoch in range(3):
    optimizer.zero_grad()
    loss = criterion(model(images), labels)
    loss.backward()
    optimizer.step()

assert torch.equal(frozen_before, model.features[0].weight)
assert model.features[0].weight.grad is None
assert not torch.equal(head_before, model.classifier[1].weight.detach())
print("frozen features unchanged, classifier trained; loss", round(loss.item(), 4))
