# Source: https://github.com/deepinv/deepinv/issues/166
# Category: grad-mode-leak
# Expect: ok
"""deepinv's gradient-step denoiser (GSDRUNet) toggles autograd with torch.set_grad_enabled(True) and
then torch.set_grad_enabled(False) inside potential_grad, so one call leaves gradients globally off;
a user's later, unrelated training code silently stopped building graphs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import deepinv as dinv

torch.manual_seed(0)
device = torch.device("cpu")

# 1) use the pretrained gradient-step denoiser to clean some measurements
denoiser = dinv.models.GSDRUNet(device=device)
clean = torch.rand(4, 3, 16, 16, device=device)
noisy = clean + 0.1 * torch.randn_like(clean)
denoised = denoiser(noisy, 0.1).detach()

# 2) later in the same script: train a small reconstruction head on the denoised images
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    out = model(denoised)
    loss = F.mse_loss(out, clean)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print("epoch", epoch, "loss %.4f" % loss.item())

assert torch.is_grad_enabled()
assert all(p.grad is not None for p in model.parameters())
print("OK: grad mode is unchanged after the denoiser call and the head trains")
