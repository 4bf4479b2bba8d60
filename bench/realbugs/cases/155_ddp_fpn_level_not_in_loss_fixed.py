# Source: https://github.com/pytorch/pytorch/issues/43259
# Category: ddp-unused-parameters
# Expect: ok
"""The DDP-wrapped detector using all five FPN levels in its forward, as the commenter's fix, so every parameter
receives a gradient each iteration and DDP's reducer completes."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

torch.manual_seed(0)


class FPN(nn.Module):
    def __init__(self, in_channels=8, out_channels=8, num_levels=5):
        super().__init__()
        self.lateral = nn.ModuleList(nn.Conv2d(in_channels, out_channels, 1) for _ in range(num_levels))

    def forward(self, feats):
        return [lat(f) for lat, f in zip(self.lateral, feats)]


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Conv2d(3, 8, 3, padding=1)
        self.fpn = FPN()
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, images):
        c = F.relu(self.backbone(images))
        feats = [F.avg_pool2d(c, 2 ** i) for i in range(5)]
        p2, p3, p4, p5, p6 = self.fpn(feats)
        return [self.head(p) for p in (p2, p3, p4, p5, p6)]


def train(model, loader, optimizer):
    for images, targets in loader:
        outputs = model(images)
        loss = sum(F.mse_loss(o, F.interpolate(targets, size=o.shape[-2:])) for o in outputs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
sys.excepthook = sys.__excepthook__  # a plain traceback (torch prefixes every line with [rank0] otherwise)
model = DistributedDataParallel(Detector())
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loader = [(torch.randn(2, 3, 32, 32), torch.randn(2, 4, 32, 32)) for _ in range(3)]
try:
    train(model, loader, optimizer)
    assert all(p.grad is not None for p in model.parameters())
except RuntimeError as err:  # keep torch's first line: the rest is DDP's multi-line hint
    raise RuntimeError(str(err).splitlines()[0]) from None
finally:
    dist.destroy_process_group()
