# Source: https://github.com/harubaru/waifu-diffusion/issues/64
# Category: clip-scaled-grads
# Expect: ok
"""The diffusers fine-tuning trainer with the fix the report asks for: scaler.unscale_(optimizer) before clipping,
so the unet's true gradients are clipped to norm 1.0."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class TinyUNet(nn.Module):
    def __init__(self, channels=4, cond_dim=8):
        super().__init__()
        self.time_embed = nn.Linear(1, 16)
        self.cond_proj = nn.Linear(cond_dim, 16)
        self.conv_in = nn.Conv2d(channels, 16, 3, padding=1)
        self.conv_out = nn.Conv2d(16, channels, 3, padding=1)

    def forward(self, sample, timesteps, encoder_hidden_states):
        emb = self.time_embed(timesteps.float()[:, None] / 1000) + self.cond_proj(encoder_hidden_states)
        h = F.silu(self.conv_in(sample) + emb[:, :, None, None])
        return self.conv_out(h)


def add_noise(latents, noise, timesteps, num_train_timesteps=1000):
    alphas_cumprod = torch.cumprod(1 - torch.linspace(1e-4, 0.02, num_train_timesteps), 0)
    a = alphas_cumprod[timesteps].sqrt()[:, None, None, None]
    s = (1 - alphas_cumprod[timesteps]).sqrt()[:, None, None, None]
    return a * latents + s * noise


def main(args):
    unet = TinyUNet()
    optimizer = torch.optim.SGD(unet.parameters(), lr=args.lr)
    scaler = torch.amp.GradScaler("cpu", enabled=args.fp16)
    step_grad_norms = []
    for step in range(args.steps):
        latents, text_embeds = torch.randn(2, 4, 8, 8), torch.randn(2, 8)
        noise = torch.randn_like(latents)
        timesteps = torch.randint(0, 1000, (2,))
        noisy_latents = add_noise(latents, noise, timesteps)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.fp16):
            noise_pred = unet(noisy_latents, timesteps, text_embeds)
            loss = F.mse_loss(noise_pred.float(), noise.float(), reduction="mean")
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(unet.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        step_grad_norms.append(torch.norm(torch.stack([p.grad.norm() for p in unet.parameters()])).item())
        optimizer.zero_grad()
    return step_grad_norms


args = argparse.Namespace(lr=1e-3, fp16=True, steps=3)
norms = main(args)
print("gradient norm each optimizer step used:", [f"{n:.2e}" for n in norms])
assert 1e-2 < max(norms) <= 1.0 + 1e-4
