"""The unfolding restoration network."""
import torch
import torch.nn as nn


class DGUNet(nn.Module):
    """Three unfolding stages, each refining the previous estimate; returns every stage's output."""

    def __init__(self, n_feat=8, stages=3):
        super().__init__()
        self.stages = nn.ModuleList(
            nn.Sequential(nn.Conv2d(6, n_feat, 3, padding=1), nn.PReLU(), nn.Conv2d(n_feat, 3, 3, padding=1))
            for _ in range(stages))

    def forward(self, img):
        outs, x = [], img
        for stage in self.stages:
            x = x + stage(torch.cat([x, img], 1))
            outs.append(x)
        return outs[::-1]
