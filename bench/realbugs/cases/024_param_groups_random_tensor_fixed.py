# Source: https://discuss.pytorch.org/t/how-optimizer-recognize-the-parameters-while-setting-different-learning-rates-for-different-layers/65128
# Category: optimizer-misses-params
# Expect: ok
"""Fixed twin: the second param group is the back half's parameters, so every layer trains with its
own learning rate."""
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)


class SmallConvNet(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, num_classes)

    def forward(self, x):
        for layer in self.children():
            x = layer(x)
        return x


model = SmallConvNet()
large_lr_layers = nn.Sequential(*list(model.children())[:-4]).parameters()
small_lr_layers = nn.Sequential(*list(model.children())[-4:]).parameters()

optimizer = optim.SGD([{"params": large_lr_layers, "lr": 0.1},
                       {"params": small_lr_layers, "lr": 0.01}],
                      lr=0.01, momentum=0.85)
criterion = nn.CrossEntropyLoss()

fc2_before = model.fc2.weight.detach().clone()
conv1_before = model.conv1.weight.detach().clone()
images = torch.randn(16, 3, 8, 8)
labels = torch.randint(0, 3, (16,))
for epoch in range(5):
    optimizer.zero_grad()
    loss = criterion(model(images), labels)
    loss.backward()
    optimizer.step()

assert not torch.equal(fc2_before, model.fc2.weight)
assert not torch.equal(conv1_before, model.conv1.weight)
print("both halves trained")
