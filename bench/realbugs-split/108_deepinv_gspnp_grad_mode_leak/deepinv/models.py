"""Denoisers: a tiny DRUNet and its gradient-step wrapper."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class StudentGrad(nn.Module):
    def __init__(self, denoiser):
        super().__init__()
        self.model = denoiser

    def forward(self, x, sigma):
        return self.model(x, sigma)


class TinyDRUNet(nn.Module):
    def __init__(self, in_channels=3, nc=8):
        super().__init__()
        self.head = nn.Conv2d(in_channels + 1, nc, 3, padding=1)
        self.body = nn.Conv2d(nc, nc, 3, padding=1)
        self.tail = nn.Conv2d(nc, in_channels, 3, padding=1)

    def forward(self, x, sigma):
        noise_map = torch.full_like(x[:, :1], sigma)
        h = F.elu(self.head(torch.cat([x, noise_map], 1)))
        h = F.elu(self.body(h))
        return self.tail(h)


class GSPnP(nn.Module):
    """Gradient Step module to use a denoiser architecture as a Gradient Step Denoiser."""

    def __init__(self, denoiser, alpha=1.0, train=False):
        super().__init__()
        self.student_grad = StudentGrad(denoiser)
        self.alpha = alpha
        self.train = train

    def potential_grad(self, x, sigma):
        torch.set_grad_enabled(True)  # BUG: grad-mode-leak
        x = x.float()
        x = x.requires_grad_()
        N = self.student_grad(x, sigma)
        JN = torch.autograd.grad(N, x, grad_outputs=x - N, create_graph=True, only_inputs=True)[0]
        if not self.train:
            torch.set_grad_enabled(False)  # BUG: grad-mode-leak
        Dg = x - N - JN
        return self.alpha * Dg

    def forward(self, x, sigma):
        Dg = self.potential_grad(x, sigma)
        return x - Dg


def GSDRUNet(alpha=1.0, in_channels=3, train=False, device=torch.device("cpu")):
    denoiser = TinyDRUNet(in_channels)
    return GSPnP(denoiser, alpha=alpha, train=train).to(device)
