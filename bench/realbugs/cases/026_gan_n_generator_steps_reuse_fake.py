# Source: https://pytroubles.com/ru/posts/id2658-gan-v-pytorch-ispravljaem-oshibku-backward-cherez-detach
# Category: backward-twice
# Expect: raises RuntimeError: Trying to backward through the graph a second time
"""Training the generator n times per discriminator step, the discriminator update reuses the last
generator batch `fake_batch` without detaching it; its graph was already freed by g_loss.backward(),
so the single d_loss.backward() fails."""
import torch
import torch.nn as nn

torch.manual_seed(0)
dev = torch.device("cpu")
latent_dim, img_dim = 8, 16
total_epochs, g_update_factor, d_update_factor = 2, 3, 1

netG = nn.Sequential(nn.Linear(latent_dim, 32), nn.ReLU(), nn.Linear(32, img_dim), nn.Tanh()).to(dev)
netD = nn.Sequential(nn.Linear(img_dim, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid()).to(dev)
optG = torch.optim.Adam(netG.parameters(), lr=2e-4)
optD = torch.optim.Adam(netD.parameters(), lr=2e-4)
bce_loss = nn.BCELoss()

data_stream = [(torch.rand(10, 4, 4) * 2 - 1, None) for _ in range(2)]

for epoch in range(total_epochs):
    for batch_id, (real_batch, _) in enumerate(data_stream):
        real_batch = real_batch.view(-1, img_dim).to(dev)
        bsz = real_batch.shape[0]

        # Generator updates (n times)
        for _ in range(g_update_factor):
            z = torch.randn(bsz, latent_dim).to(dev)
            fake_batch = netG(z)
            gen_scores = netD(fake_batch).view(-1)
            g_loss = bce_loss(gen_scores, torch.ones_like(gen_scores))
            g_loss.backward()
            optG.step()
            netG.zero_grad()

        # Discriminator updates (m times)
        for _ in range(d_update_factor):
            netD.zero_grad()
            real_scores = netD(real_batch).view(-1)
            fake_scores = netD(fake_batch).view(-1)  # BUG: backward-twice
            d_loss = (bce_loss(real_scores, torch.ones_like(real_scores))
                      + bce_loss(fake_scores, torch.zeros_like(fake_scores)))
            d_loss.backward()
            optD.step()
print("done")
