# Source: https://php.bkmy88.com/faq/1575425.html
# Category: optimizer-step-before-backward
# Expect: raises RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""A GAN loss helper returns both the discriminator and the generator loss from one shared
forward; the loop steps D's optimizer and only then backpropagates the generator loss through D."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = torch.device("cpu")


class Generator(nn.Module):
    def __init__(self, z_dim=8):
        super().__init__()
        self.z_dim = z_dim
        self.net = nn.Sequential(nn.Linear(z_dim, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def loss_nonsaturating(d, g, x_real, *, device):
    z = torch.randn(x_real.shape[0], g.z_dim, device=device)
    gz = g(z)
    dgz = torch.sigmoid(d(gz))
    dx = torch.sigmoid(d(x_real))
    real_label = torch.ones(x_real.shape[0], device=device)
    fake_label = torch.zeros(x_real.shape[0], device=device)
    d_loss = F.binary_cross_entropy(dx, real_label) + F.binary_cross_entropy(dgz, fake_label)
    g_loss = F.binary_cross_entropy(dgz, real_label)
    return d_loss, g_loss


g = Generator().to(device)
d = Discriminator().to(device)
g_optimizer = torch.optim.Adam(g.parameters(), lr=1e-3)
d_optimizer = torch.optim.Adam(d.parameters(), lr=1e-3)

for step in range(3):
    x_real = torch.randn(16, 4, device=device)
    d_loss, g_loss = loss_nonsaturating(d, g, x_real, device=device)

    d_optimizer.zero_grad()
    d_loss.backward(retain_graph=True)
    d_optimizer.step()  # BUG: optimizer-step-before-backward

    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()
    print(step, d_loss.item(), g_loss.item())
