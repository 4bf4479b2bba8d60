# Source: https://whosebug.com/question/5232549/How-does-PyTorch-s-loss-backward-work-when-retain-graph-True-is-specified
# Category: backward-twice
# Expect: ok
"""Fixed twin: the discriminator loss sees fake.detach(), so its backward stops at the generator output
and needs no retained graph."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Generator(nn.Module):
    def __init__(self, z_dim=4, out_dim=6):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(z_dim, 16), nn.ReLU(), nn.Linear(16, out_dim))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, in_dim=6):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)


netG, netD = Generator(), Discriminator()
optim_g = torch.optim.Adam(netG.parameters(), lr=1e-3)
optim_d = torch.optim.Adam(netD.parameters(), lr=1e-3)
criterion = nn.BCEWithLogitsLoss()

g_before = netG.net[0].weight.detach().clone()
d_before = netD.net[0].weight.detach().clone()
for it in range(3):
    real = torch.randn(8, 6)
    z = torch.randn(8, 4)
    fake = netG(z)
    ones, zeros = torch.ones(8, 1), torch.zeros(8, 1)

    # computing loss_g and loss_d...
    loss_g = criterion(netD(fake), ones)
    loss_d = criterion(netD(real), ones) + criterion(netD(fake.detach()), zeros)

    optim_g.zero_grad()
    loss_g.backward()
    optim_g.step()

    optim_d.zero_grad()
    loss_d.backward()
    optim_d.step()

assert not torch.equal(g_before, netG.net[0].weight.detach())
assert not torch.equal(d_before, netD.net[0].weight.detach())
print("done")
