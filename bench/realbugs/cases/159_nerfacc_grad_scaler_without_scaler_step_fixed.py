# Source: https://github.com/nerfstudio-project/nerfacc/issues/307
# Category: scaler-step-bypassed
# Expect: ok
"""The NeRF training loop stepping through the scaler: grad_scaler.step(optimizer) unscales the gradients (and skips
non-finite steps) before the update, and grad_scaler.update() adapts the scale."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class RadianceField(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(3, hidden), nn.ReLU(), nn.Linear(hidden, 4))

    def forward(self, positions):
        out = self.mlp(positions)
        return torch.sigmoid(out[..., :3]), F.softplus(out[..., 3])


def render_image(radiance_field, rays_o, rays_d, n_samples=8):
    t = torch.linspace(0.1, 1.0, n_samples)
    pts = rays_o[:, None] + rays_d[:, None] * t[None, :, None]
    rgb, sigma = radiance_field(pts)
    alpha = 1 - torch.exp(-sigma * (1.0 / n_samples))
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha[:, :-1]], 1), 1)
    return ((alpha * trans)[..., None] * rgb).sum(1)


radiance_field = RadianceField()
optimizer = torch.optim.SGD(radiance_field.parameters(), lr=1e-2)
grad_scaler = torch.amp.GradScaler("cpu", 2 ** 10)
seen, true = [], []
for step in range(3):
    rays_o, rays_d, pixels = torch.randn(64, 3), F.normalize(torch.randn(64, 3), dim=-1), torch.rand(64, 3)
    rgb = render_image(radiance_field, rays_o, rays_d)
    loss = F.smooth_l1_loss(rgb, pixels)
    true.append(torch.autograd.grad(loss, radiance_field.mlp[2].weight, retain_graph=True)[0].norm().item())
    optimizer.zero_grad()
    grad_scaler.scale(loss).backward()
    grad_scaler.step(optimizer)
    grad_scaler.update()
    seen.append(radiance_field.mlp[2].weight.grad.norm().item())
ratio = seen[-1] / true[-1]
print("gradient the optimizer used / true gradient:", round(ratio, 1))
assert abs(ratio - 1) < 1e-3
