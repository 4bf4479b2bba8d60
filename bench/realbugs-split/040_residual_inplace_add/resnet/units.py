"""Residual units."""
import torch.nn as nn
import torch.nn.functional as F


class ResidualUnitA(nn.Module):
    def __init__(self):
        super(ResidualUnitA, self).__init__()
        self.conv_0 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn_0 = nn.BatchNorm2d(8)
        self.conv_1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn_1 = nn.BatchNorm2d(8)

    def forward(self, x):
        x = self.conv_0(x)
        x = self.bn_0(x)
        x = F.relu(x, inplace=True)

        residual = self.conv_1(x)
        residual = self.bn_1(residual)
        x += residual  # BUG: inplace-on-saved
        x = F.relu(x, inplace=True)
        return x
