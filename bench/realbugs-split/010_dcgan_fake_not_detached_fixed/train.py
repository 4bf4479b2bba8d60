# Source: https://github.com/pytorch/examples/issues/116
# Category: backward-twice
# Expect: ok
"""The DCGAN loop as in pytorch/examples: the discriminator step uses `fake.detach()`, so the
generator's graph is still intact when errG.backward() runs through it."""
import torch
import torch.nn as nn

from models import build_discriminator as make_D, build_generator as make_G

torch.manual_seed(0)
device = torch.device("cpu")
nz, ngf, ndf, batch_size = 8, 16, 16, 4
real_label, fake_label = 1.0, 0.0

netG = make_G(nz, ngf).to(device)
netD = make_D(ndf).to(device)

criterion = nn.BCELoss()
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
g_before = netG[0].weight.detach().clone()
dataloader = [(torch.randn(batch_size, 1, 8, 8).tanh(), None) for _ in range(3)]

for i, data in enumerate(dataloader):
    # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
    netD.zero_grad()
    real_cpu = data[0].to(device)
    label = torch.full((batch_size,), real_label, device=device)
    output = netD(real_cpu).view(-1)
    errD_real = criterion(output, label)
    errD_real.backward()

    noise = torch.randn(batch_size, nz, 1, 1, device=device)
    fake = netG(noise)
    label.fill_(fake_label)
    output = netD(fake.detach()).view(-1)
    errD_fake = criterion(output, label)
    errD_fake.backward()
    optimizerD.step()

    # (2) Update G network: maximize log(D(G(z)))
    netG.zero_grad()
    label.fill_(real_label)
    output = netD(fake).view(-1)
    errG = criterion(output, label)
    errG.backward()
    optimizerG.step()
    print(i, "Loss_D", (errD_real + errD_fake).item(), "Loss_G", errG.item())
assert all(p.grad is not None for p in netG.parameters())
assert not torch.equal(g_before, netG[0].weight.detach())
