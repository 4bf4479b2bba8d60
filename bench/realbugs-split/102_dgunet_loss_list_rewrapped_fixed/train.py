# Source: https://github.com/MC-E/Deep-Generalized-Unfolding-Networks-for-Image-Restoration/issues/6
# Category: loss-rewrap
# Expect: ok
"""Deblurring training sums the Charbonnier and edge losses of every unfolding stage; np.sum over the
list failed on the user's setup, so they rebuilt it as torch.tensor([...], requires_grad=True).sum(),
after which training ran but PSNR never changed."""
import torch

import losses
from DGUNet import DGUNet

torch.manual_seed(0)
device = torch.device("cpu")

model_restoration = DGUNet().to(device)
optimizer = torch.optim.Adam(model_restoration.parameters(), lr=2e-4, betas=(0.9, 0.999), eps=1e-8)
criterion_char = losses.CharbonnierLoss()
criterion_edge = losses.EdgeLoss()

before = [p.detach().clone() for p in model_restoration.parameters()]
model_restoration.train()
for epoch in range(2):
    epoch_loss = 0
    for i in range(3):
        target = torch.rand(2, 3, 16, 16).to(device)
        input_ = (target + 0.1 * torch.randn_like(target)).to(device)

        for param in model_restoration.parameters():
            param.grad = None
        restored = model_restoration(input_)

        loss_char = torch.stack([criterion_char(restored[j], target) for j in range(len(restored))]).sum()
        loss_edge = torch.stack([criterion_edge(restored[j], target) for j in range(len(restored))]).sum()
        loss = (loss_char) + (0.05 * loss_edge)

        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
    print("epoch", epoch, "loss %.4f" % epoch_loss)

changed = [not torch.equal(b, p) for b, p in zip(before, model_restoration.parameters())]
assert all(changed)
print("OK: every stage's parameters were updated")
