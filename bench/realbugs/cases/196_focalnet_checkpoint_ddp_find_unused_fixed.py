# Source: https://github.com/microsoft/FocalNet/issues/4
# Category: ddp-reentrant-checkpoint
# Expect: ok
"""The FocalNet blocks checkpointed with the non-reentrant variant (use_reentrant=False), which runs no nested backward,
so DDP with find_unused_parameters=True sees each parameter's gradient once."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint
from torch.nn.parallel import DistributedDataParallel

torch.manual_seed(0)


class FocalNetBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.modulation = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.modulation(self.norm1(x)) * torch.sigmoid(x)
        return x + self.mlp(self.norm2(x))


class BasicLayer(nn.Module):
    def __init__(self, dim, depth, use_checkpoint=False):
        super().__init__()
        self.use_checkpoint = use_checkpoint
        self.blocks = nn.ModuleList([FocalNetBlock(dim) for _ in range(depth)])

    def forward(self, x):
        for blk in self.blocks:
            if self.use_checkpoint:
                x = checkpoint.checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        return x


class FocalNet(nn.Module):
    def __init__(self, in_chans=3, embed_dim=16, depths=(2, 2), num_classes=5, use_checkpoint=True):
        super().__init__()
        self.patch_embed = nn.Conv2d(in_chans, embed_dim, 4, 4)
        self.layers = nn.ModuleList([BasicLayer(embed_dim, d, use_checkpoint) for d in depths])
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean(1))


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
sys.excepthook = sys.__excepthook__
model = DistributedDataParallel(FocalNet(use_checkpoint=True), find_unused_parameters=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
try:
    for step in range(2):
        images, targets = torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,))
        loss = F.cross_entropy(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
finally:
    dist.destroy_process_group()
assert all(p.grad is not None for p in model.module.layers[0].parameters())
print("trained", step + 1, "steps with checkpointed blocks under DDP")
