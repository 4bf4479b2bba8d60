"""The blob classifier."""
import torch.nn as nn


class BlobModel(nn.Module):
    def __init__(self, in_features=2, out_features=4, hidden=8):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, out_features)
        )

    def forward(self, x):
        return self.layers(x)
