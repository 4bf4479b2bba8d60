# Source: https://github.com/wudongming97/TopoMLP/issues/25
# Category: ddp-reentrant-checkpoint
# Expect: ok
"""TopoMLP's checkpointed VoVNet under DDP with the unused-parameter search off (every parameter is used), so the
reentrant checkpoint's nested backward no longer trips DDP's ready-once check."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from torch.nn.parallel import DistributedDataParallel

torch.manual_seed(0)


class eSEModule(nn.Module):
    def __init__(self, channel):
        super().__init__()
        self.fc = nn.Conv2d(channel, channel, 1)

    def forward(self, x):
        return x * F.hardsigmoid(self.fc(F.adaptive_avg_pool2d(x, 1)))


class _OSA_module(nn.Module):
    def __init__(self, in_ch, stage_ch, concat_ch, layer_per_block=3, with_cp=True):
        super().__init__()
        self.with_cp = with_cp
        self.layers = nn.ModuleList()
        ch = in_ch
        for _ in range(layer_per_block):
            self.layers.append(nn.Sequential(nn.Conv2d(ch, stage_ch, 3, padding=1), nn.ReLU()))
            ch = stage_ch
        self.concat = nn.Sequential(nn.Conv2d(in_ch + layer_per_block * stage_ch, concat_ch, 1), nn.ReLU())
        self.ese = eSEModule(concat_ch)

    def _forward(self, x):
        outputs = [x]
        for layer in self.layers:
            x = layer(x)
            outputs.append(x)
        return self.ese(self.concat(torch.cat(outputs, dim=1)))

    def forward(self, x):
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._forward, x, use_reentrant=True)
        return self._forward(x)


class VoVNetCP(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU())
        self.stage4 = _OSA_module(8, 8, 16)
        self.stage5 = _OSA_module(16, 8, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, img):
        x = self.stage5(self.stage4(self.stem(img)))
        return self.head(x.mean((2, 3)))


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
sys.excepthook = sys.__excepthook__
cfg = {"find_unused_parameters": False}
model = DistributedDataParallel(VoVNetCP(), find_unused_parameters=cfg["find_unused_parameters"])
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)
try:
    for it in range(2):
        img, gt = torch.randn(2, 3, 16, 16), torch.randn(2, 4)
        loss = F.smooth_l1_loss(model(img), gt)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
finally:
    dist.destroy_process_group()
assert all(p.grad is not None for p in model.module.stage5.parameters())
print("trained", it + 1, "iterations with checkpointed OSA modules under DDP")
