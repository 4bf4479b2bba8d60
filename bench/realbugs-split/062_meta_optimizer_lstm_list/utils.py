"""Gradient preprocessing for the learned optimiser."""
import torch


def preprocess_gradients(x, p=10.0):
    log = torch.log(torch.abs(x) + 1e-8) / p
    log = torch.clamp(log, min=-1)
    sign = torch.clamp(x * torch.exp(torch.tensor(p)), -1, 1)
    return torch.stack((log, sign), dim=1)
