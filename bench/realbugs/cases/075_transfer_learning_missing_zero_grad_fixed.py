# Source: https://github.com/udacity/deep-learning-v2-pytorch/pull/160
# Category: missing-zero-grad
# Expect: ok
"""A course's transfer-learning notebook freezes a pretrained feature extractor, trains a new classifier head, and
calls backward()/step() per batch without ever zeroing the gradients; the PR adds the missing zero_grad."""
import torch
from torch import nn, optim
import torch.nn.functional as F

torch.manual_seed(0)
device = torch.device("cpu")


class DenseNetLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.classifier = nn.Linear(128, 1000)

    def forward(self, x):
        return self.classifier(self.features(x))


model = DenseNetLike()  # stands in for models.densenet121(pretrained=True)
for param in model.parameters():
    param.requires_grad = False

model.classifier = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 2), nn.LogSoftmax(dim=1))
criterion = nn.NLLLoss()
optimizer = optim.Adam(model.classifier.parameters(), lr=0.003)
model.to(device)

step_grads = []
model.classifier[0].weight.register_hook(lambda g: step_grads.append(g.clone()))

trainloader = [(torch.rand(8, 3, 16, 16), torch.randint(0, 2, (8,))) for _ in range(5)]
epochs = 1
steps = 0
running_loss = 0
print_every = 5
for epoch in range(epochs):
    for inputs, labels in trainloader:
        steps += 1
        inputs, labels = inputs.to(device), labels.to(device)

        optimizer.zero_grad()

        logps = model.forward(inputs)
        loss = criterion(logps, labels)
        loss.backward()
        optimizer.step()

        running_loss += loss.item()
        if steps % print_every == 0:
            print(f"Epoch {epoch + 1}/{epochs}.. Train loss: {running_loss / print_every:.3f}")
            running_loss = 0

grad = model.classifier[0].weight.grad
assert len(step_grads) == 5
assert torch.allclose(grad, step_grads[-1])
print("OK: the classifier's .grad holds only the last batch's gradient")
