# Source: https://php.bkmy88.com/faq/1575425.html
# Category: optimizer-step-before-backward
# Expect: ok
"""Fixed twin: D's loss sees a detached fake, and the generator loss is computed through D
only after D's step, so no graph holds the D weights the optimizer rewrote."""
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


def d_loss_nonsaturating(d, gz, x_real, *, device):
    dgz = torch.sigmoid(d(gz.detach()))
    dx = torch.sigmoid(d(x_real))
    real_label = torch.ones(x_real.shape[0], device=device)
    fake_label = torch.zeros(x_real.shape[0], device=device)
    return F.binary_cross_entropy(dx, real_label) + F.binary_cross_entropy(dgz, fake_label)


def g_loss_nonsaturating(d, gz, *, device):
    real_label = torch.ones(gz.shape[0], device=device)
    return F.binary_cross_entropy(torch.sigmoid(d(gz)), real_label)


g = Generator().to(device)
d = Discriminator().to(device)
g_optimizer = torch.optim.Adam(g.parameters(), lr=1e-3)
d_optimizer = torch.optim.Adam(d.parameters(), lr=1e-3)
g_before = [p.detach().clone() for p in g.parameters()]

for step in range(3):
    x_real = torch.randn(16, 4, device=device)
    z = torch.randn(x_real.shape[0], g.z_dim, device=device)
    gz = g(z)

    d_optimizer.zero_grad()
    d_loss = d_loss_nonsaturating(d, gz, x_real, device=device)
    d_loss.backward()
    d_optimizer.step()

    g_optimizer.zero_grad()
    g_loss = g_loss_nonsaturating(d, gz, device=device)
    g_loss.backward()
    g_optimizer.step()
    print(step, d_loss.item(), g_loss.item())

assert any(not torch.equal(a, b) for a, b in zip(g_before, g.parameters()))
print("generator weights changed")
