"""The convolutional head whose input gradient is inspected."""
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(6, 2, 3)

    def forward(self, x):
        x = F.relu(x, inplace=True)  # BUG: inplace-on-leaf
        x = F.dropout(x, p=0.1, inplace=True)  # BUG: inplace-on-saved
        return self.conv(x)
