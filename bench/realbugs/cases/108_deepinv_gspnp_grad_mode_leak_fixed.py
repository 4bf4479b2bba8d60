# Source: https://github.com/deepinv/deepinv/issues/166
# Category: grad-mode-leak
# Expect: ok
"""deepinv's gradient-step denoiser (GSDRUNet) toggles autograd with torch.set_grad_enabled(True) and
then torch.set_grad_enabled(False) inside potential_grad, so one call leaves gradients globally off;
a user's later, unrelated training code silently stopped building graphs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = torch.device("cpu")


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
        with torch.enable_grad():
            x = x.float()
            x = x.requires_grad_()
            N = self.student_grad(x, sigma)
            JN = torch.autograd.grad(N, x, grad_outputs=x - N, create_graph=True, only_inputs=True)[0]
        Dg = x - N - JN
        return self.alpha * Dg

    def forward(self, x, sigma):
        Dg = self.potential_grad(x, sigma)
        return x - Dg


def GSDRUNet(alpha=1.0, in_channels=3, train=False, device=torch.device("cpu")):
    denoiser = TinyDRUNet(in_channels)
    return GSPnP(denoiser, alpha=alpha, train=train).to(device)


# 1) use the pretrained gradient-step denoiser to clean some measurements
denoiser = GSDRUNet(device=device)
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
