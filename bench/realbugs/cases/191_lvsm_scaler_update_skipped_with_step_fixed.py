# Source: https://github.com/Haian-Jin/LVSM/pull/19
# Category: scaler-update-skipped
# Expect: ok
"""LVSM's training loop after the fix: scaler.update() runs on every iteration, whether or not the optimizer step
was skipped, so the next iteration can unscale again."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Renderer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 64), nn.GELU(), nn.Linear(64, 3))

    def forward(self, rays):
        return torch.sigmoid(self.net(rays))


model = Renderer()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cpu")
config = {"grad_clip_norm": 1.0, "allowed_gradnorm_factor": 5.0}
for step in range(4):
    rays, target = torch.randn(32, 6), torch.rand(32, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.mse_loss(model(rays).float(), target) * (400.0 if step == 1 else 1.0)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config["grad_clip_norm"])
    skip_optimizer_step = grad_norm > config["grad_clip_norm"] * config["allowed_gradnorm_factor"]
    if not skip_optimizer_step:
        scaler.step(optimizer)
    else:
        print(f"step {step}: grad norm {grad_norm.item():.2f} too large, skipping optimizer step")
    scaler.update()
print("trained", step + 1, "iterations with one skipped step")
