# Source: https://github.com/nikhilsinghmus/image2reverb/issues/37
# Category: stray-detach
# Expect: ok
"""An image-to-reverb GAN's generator step scores `fake_spec.detach()` with the discriminator; the reporter saw the
discriminator dominate early and the maintainer confirmed the detach should not be there (only the L1 term trains G)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = torch.device("cpu")


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, img):
        return self.net(img)


class Generator(nn.Module):
    def __init__(self, latent=4):
        super().__init__()
        self.fc = nn.Linear(latent, 16 * 16)

    def forward(self, f):
        return torch.tanh(self.fc(f)).view(-1, 1, 16, 16)


class Discriminator(nn.Module):
    def __init__(self, latent=4):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 4, stride=4)
        self.fc = nn.Linear(4 * 4 * 4 + latent, 1)

    def forward(self, spec, f):
        return torch.sigmoid(self.fc(torch.cat([self.conv(spec).flatten(1), f], 1)))


class Image2Reverb(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Encoder()
        self.g = Generator()
        self.d = Discriminator()
        self.opt_g = torch.optim.Adam(list(self.enc.parameters()) + list(self.g.parameters()), lr=4e-4)
        self.opt_d = torch.optim.Adam(self.d.parameters(), lr=2e-4)

    def training_step(self, batch, optimizer_idx):
        spec, img = batch
        f = self.enc(img)
        fake_spec = self.g(f)
        if optimizer_idx == 0:  # train the generator
            d_fake2 = self.d(fake_spec, f)
            G_loss1 = F.mse_loss(d_fake2, torch.ones(d_fake2.shape, device=device))
            G_loss2 = F.l1_loss(fake_spec, spec)
            self.last_G_loss1 = G_loss1
            return G_loss1 + 100 * G_loss2
        d_real = self.d(spec, f.detach())
        d_fake = self.d(fake_spec.detach(), f.detach())
        D_loss = F.mse_loss(d_real, torch.ones_like(d_real)) + F.mse_loss(d_fake, torch.zeros_like(d_fake))
        return D_loss


model = Image2Reverb().to(device)
batches = [(torch.rand(4, 1, 16, 16) * 2 - 1, torch.rand(4, 3, 16, 16)) for _ in range(3)]
for batch in batches:
    for optimizer_idx, opt in enumerate((model.opt_g, model.opt_d)):
        opt.zero_grad()
        loss = model.training_step(batch, optimizer_idx)
        loss.backward()
        opt.step()

model.training_step(batches[0], 0)  # one more generator step, inspected before backward
adv_grads = torch.autograd.grad(model.last_G_loss1, list(model.g.parameters()), allow_unused=True)
assert all(g is not None and g.abs().sum() > 0 for g in adv_grads)
print("OK: the adversarial generator loss G_loss1 reaches every generator parameter")
