"""The two learnable angles, created at import as leaves that require grad."""
import torch

a = torch.tensor(0.3)
b = torch.tensor(0.7)
a.requires_grad = True
b.requires_grad = True
