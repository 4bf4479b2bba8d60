# Source: https://github.com/Azure/MS-AMP/pull/45
# Category: scaler-update-skipped
# Expect: ok
"""MS-AMP's MNIST example after the fix: scaler.update() follows every scaler.step(optimizer)."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.fc1 = nn.Linear(8 * 13 * 13, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        return F.log_softmax(self.fc1(torch.flatten(x, 1)), dim=1)


def train(args, model, device, train_loader, optimizer, epoch, scaler):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            output = model(data)
        loss = F.nll_loss(output.float(), target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx}]\tLoss: {loss.item():.6f}")


args = argparse.Namespace(lr=1.0, log_interval=1, epochs=1)
device = torch.device("cpu")
model = Net().to(device)
optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
scaler = torch.amp.GradScaler(device.type)
train_loader = [(torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))) for _ in range(3)]
for epoch in range(1, args.epochs + 1):
    train(args, model, device, train_loader, optimizer, epoch, scaler)
print("finished", args.epochs, "epoch(s) of", len(train_loader), "batches")
