# Source: https://github.com/descriptinc/descript-audio-codec/issues/81
# Category: deepcopy-non-leaf
# Expect: raises RuntimeError: Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol
"""The Descript audio codec builds its convolutions with the legacy `torch.nn.utils.weight_norm`, which stores the
recomposed `weight` on the module as a non-leaf tensor computed from weight_g and weight_v. Deep-copying the model
(for an EMA copy or a frozen teacher) fails on that tensor; the reporter switched to the parametrization-based
`torch.nn.utils.parametrizations.weight_norm`."""
import copy
import warnings

import torch
import torch.nn as nn
from torch.nn.utils import weight_norm

warnings.simplefilter("ignore", FutureWarning)  # the legacy weight_norm is deprecated
torch.manual_seed(0)


def WNConv1d(*args, **kwargs):
    return weight_norm(nn.Conv1d(*args, **kwargs))  # BUG: deepcopy-non-leaf


class ResidualUnit(nn.Module):
    def __init__(self, dim=8, dilation=1):
        super().__init__()
        pad = ((7 - 1) * dilation) // 2
        self.block = nn.Sequential(nn.ELU(), WNConv1d(dim, dim, kernel_size=7, dilation=dilation, padding=pad),
                                   nn.ELU(), WNConv1d(dim, dim, kernel_size=1))

    def forward(self, x):
        return x + self.block(x)


class Encoder(nn.Module):
    def __init__(self, d_model=8, d_latent=4):
        super().__init__()
        self.block = nn.Sequential(WNConv1d(1, d_model, kernel_size=7, padding=3),
                                   ResidualUnit(d_model, 1), ResidualUnit(d_model, 3),
                                   WNConv1d(d_model, d_latent, kernel_size=3, padding=1))

    def forward(self, x):
        return self.block(x)


class DAC(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = nn.Conv1d(4, 1, kernel_size=7, padding=3)

    def forward(self, audio):
        return self.decoder(self.encoder(audio))


model = DAC()
teacher = copy.deepcopy(model)
print("recon shape:", tuple(teacher(torch.randn(1, 1, 32)).shape))
