"""The three-layer network."""
import torch

from config import D_in, D_out, H


class ThreeLayerNet(torch.nn.Module):
    def __init__(self, D_in, H, D_out):
        super(ThreeLayerNet, self).__init__()

    def forward(self, x):
        h_relu = torch.nn.Linear(D_in, H)(x).clamp(min=0)  # BUG: module-in-forward
        h_relu = torch.nn.Linear(H, H)(h_relu).clamp(min=0)  # BUG: module-in-forward
        y_pred = torch.nn.Linear(H, D_out)(h_relu)  # BUG: module-in-forward
        return y_pred
