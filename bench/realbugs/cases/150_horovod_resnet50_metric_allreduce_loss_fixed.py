# Source: https://github.com/horovod/horovod/pull/641
# Category: graph-kept-alive
# Expect: ok
"""The ImageNet ResNet-50 example with the fix PR: the loss is detached before the metric's allreduce, so the
running sum holds plain values."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.nn.functional import all_reduce

torch.manual_seed(0)


def allreduce(tensor, name=None):
    return all_reduce(tensor) / dist.get_world_size()


class Metric(object):
    def __init__(self, name):
        self.name = name
        self.sum = torch.tensor(0.)
        self.n = torch.tensor(0.)

    def update(self, val):
        self.sum += allreduce(val, name=self.name)
        self.n += 1

    @property
    def avg(self):
        return self.sum / self.n


def accuracy(output, target):
    return output.max(1)[1].eq(target).float().mean()


def train(model, optimizer, train_loader, epoch):
    model.train()
    train_loss = Metric('train_loss')
    train_accuracy = Metric('train_accuracy')
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        train_loss.update(loss.detach())
        train_accuracy.update(accuracy(output, target))
    return train_loss


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.0125 * dist.get_world_size(), momentum=0.9)
loader = [(torch.randn(4, 3, 12, 12), torch.randint(0, 10, (4,))) for _ in range(4)]
train_loss = train(model, optimizer, loader, epoch=0)
dist.destroy_process_group()
print("epoch train loss", train_loss.avg.item())
assert train_loss.sum.grad_fn is None
