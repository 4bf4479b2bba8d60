# Source: https://github.com/cloneofsimo/lora/issues/26
# Category: checkpoint-no-grad-input
# Expect: silent: with gradient checkpointing the down blocks run under a reentrant checkpoint whose inputs (noisy latents, time embedding) do not require grad, so their LoRA up weights get no gradient and stay zero while the rest trains
"""LoRA DreamBooth training of a frozen UNet (and text encoder) with gradient checkpointing: the checkpointed down
blocks only see the noisy latents and the frozen time embedding, none of which requires grad, so the reentrant
checkpoint records no graph and their LoRA weights never update; the mid and up blocks, reached by the text
embeddings, do train, so the loss still back-propagates and nothing fails."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class LoraInjectedLinear(nn.Module):
    def __init__(self, in_features, out_features, r=4):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.lora_down = nn.Linear(in_features, r, bias=False)
        self.lora_up = nn.Linear(r, out_features, bias=False)
        nn.init.zeros_(self.lora_up.weight)

    def forward(self, x):
        return self.linear(x) + self.lora_up(self.lora_down(x))


class Block(nn.Module):
    def __init__(self, dim, cross=False):
        super().__init__()
        self.proj = LoraInjectedLinear(dim, dim)
        self.to_k = LoraInjectedLinear(dim, dim) if cross else None

    def forward(self, h, temb, context=None):
        h = h + F.silu(self.proj(h + temb))
        if self.to_k is not None:
            h = h + torch.softmax(h @ self.to_k(context).transpose(1, 2), -1) @ context
        return h


class UNet(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.time_embedding = nn.Linear(1, dim)
        self.down_block = Block(dim)
        self.mid_block = Block(dim, cross=True)
        self.up_block = Block(dim)
        self.gradient_checkpointing = False

    def enable_gradient_checkpointing(self):
        self.gradient_checkpointing = True

    def forward(self, sample, timesteps, encoder_hidden_states):
        temb = self.time_embedding(timesteps.float()[:, None, None] / 1000)
        if self.gradient_checkpointing and self.training:
            h = checkpoint(self.down_block, sample, temb, use_reentrant=True)  # BUG: checkpoint-no-grad-input
        else:
            h = self.down_block(sample, temb)
        h = self.mid_block(h, temb, encoder_hidden_states)
        if self.gradient_checkpointing and self.training:
            h = checkpoint(self.up_block, h, temb, use_reentrant=True)
        else:
            h = self.up_block(h, temb)
        return h


class TextEncoder(nn.Module):
    def __init__(self, vocab=30, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = LoraInjectedLinear(dim, dim)

    def forward(self, ids):
        return self.proj(self.embed(ids))


unet, text_encoder = UNet(), TextEncoder()
for m in (unet, text_encoder):
    for name, p in m.named_parameters():
        p.requires_grad_("lora_" in name)
unet.enable_gradient_checkpointing()
params = [p for m in (unet, text_encoder) for p in m.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW(params, lr=1e-3)
unet.train()
text_encoder.train()
for step in range(3):
    latents, ids = torch.randn(2, 6, 16), torch.randint(0, 30, (2, 5))
    noise = torch.randn_like(latents)
    timesteps = torch.randint(0, 1000, (2,))
    noisy_latents = latents + 0.5 * noise
    model_pred = unet(noisy_latents, timesteps, text_encoder(ids))
    loss = F.mse_loss(model_pred, noise)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()

down_up = unet.down_block.proj.lora_up.weight.abs().sum().item()
mid_up = unet.mid_block.proj.lora_up.weight.abs().sum().item()
print("down block lora_up |w|:", down_up, " mid block lora_up |w|:", mid_up)
assert down_up == 0.0 and mid_up > 0
print("EVIDENCE: the checkpointed down block's LoRA up weight is still all zeros after training")
