# Source: https://github.com/1Konny/FactorVAE/issues/15
# Category: optimizer-step-before-backward
# Expect: ok
"""FactorVAE's solver updates the VAE (`vae_loss.backward(retain_graph=True); optim_VAE.step()`) and then builds the discriminator
loss from the same `D_z = D(z)`; backprop of that loss walks into the encoder whose weights the VAE step already changed in place."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


def recon_loss(x, x_recon):
    return F.binary_cross_entropy_with_logits(x_recon, x, reduction="sum").div(x.size(0))


def kl_divergence(mu, logvar):
    return 0.5 * (-1 - logvar + mu.pow(2) + logvar.exp()).sum(1).mean()


def permute_dims(z):
    B, _ = z.size()
    perm_z = []
    for z_j in z.split(1, 1):
        perm = torch.randperm(B)
        perm_z.append(z_j[perm])
    return torch.cat(perm_z, 1)


class FactorVAE1(nn.Module):
    def __init__(self, z_dim=6):
        super().__init__()
        self.z_dim = z_dim
        self.encode = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2 * z_dim))
        self.decode = nn.Sequential(nn.Linear(z_dim, 32), nn.ReLU(), nn.Linear(32, 64))

    def reparametrize(self, mu, logvar):
        return mu + (0.5 * logvar).exp() * torch.randn_like(mu)

    def forward(self, x, no_dec=False):
        stats = self.encode(x)
        mu, logvar = stats[:, : self.z_dim], stats[:, self.z_dim:]
        z = self.reparametrize(mu, logvar)
        if no_dec:
            return z.squeeze()
        return self.decode(z), mu, logvar, z.squeeze()


class Discriminator(nn.Module):
    def __init__(self, z_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(z_dim, 100), nn.LeakyReLU(0.2, True), nn.Linear(100, 2))

    def forward(self, z):
        return self.net(z).squeeze()


class Solver(object):
    def __init__(self, gamma=6.4, z_dim=6, batch_size=16):
        self.device = torch.device("cpu")
        self.gamma = gamma
        self.batch_size = batch_size
        self.VAE = FactorVAE1(z_dim).to(self.device)
        self.D = Discriminator(z_dim).to(self.device)
        self.optim_VAE = optim.Adam(self.VAE.parameters(), lr=1e-4, betas=(0.9, 0.999))
        self.optim_D = optim.Adam(self.D.parameters(), lr=1e-4, betas=(0.5, 0.9))

    def train(self, data_loader):
        ones = torch.ones(self.batch_size, dtype=torch.long, device=self.device)
        zeros = torch.zeros(self.batch_size, dtype=torch.long, device=self.device)
        for x_true1, x_true2 in data_loader:
            x_true1 = x_true1.to(self.device)
            x_recon, mu, logvar, z = self.VAE(x_true1)
            vae_recon_loss = recon_loss(x_true1, x_recon)
            vae_kld = kl_divergence(mu, logvar)

            D_z = self.D(z)
            vae_tc_loss = (D_z[:, :1] - D_z[:, 1:]).mean()
            vae_loss = vae_recon_loss + vae_kld + self.gamma * vae_tc_loss

            self.optim_VAE.zero_grad()
            vae_loss.backward(retain_graph=True)
            self.optim_VAE.step()

            x_true2 = x_true2.to(self.device)
            z_prime = self.VAE(x_true2, no_dec=True)
            z_pperm = permute_dims(z_prime).detach()
            D_z_pperm = self.D(z_pperm)
            D_tc_loss = 0.5 * (F.cross_entropy(self.D(z.detach()), zeros) + F.cross_entropy(D_z_pperm, ones))

            self.optim_D.zero_grad()
            D_tc_loss.backward()
            self.optim_D.step()
        return vae_loss.item(), D_tc_loss.item()


data_loader = [(torch.rand(16, 64).round(), torch.rand(16, 64).round()) for _ in range(3)]
solver = Solver()
d_before = solver.D.net[0].weight.detach().clone()
vae_loss, d_tc_loss = solver.train(data_loader)
assert not torch.equal(d_before, solver.D.net[0].weight)
print("OK: VAE loss %.3f, discriminator loss %.3f" % (vae_loss, d_tc_loss))
