# Source: https://github.com/thuanz123/enhancing-transformers/issues/11
# Category: inplace-on-saved
# Expect: ok
"""The ViT-VQGAN decoder with the issue's fix: `token = token + self.de_pos_embedding`, a new tensor, so both
decoders can read the same quantized tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Transformer(nn.Module):
    def __init__(self, dim, depth=1):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU()) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x


class ViTDecoder(nn.Module):
    def __init__(self, num_tokens=16, dim=32, patch_dim=12):
        super().__init__()
        self.de_pos_embedding = nn.Parameter(torch.randn(1, num_tokens, dim) * 0.02)
        self.transformer = Transformer(dim)
        self.to_pixel = nn.Linear(dim, patch_dim)

    def forward(self, token):
        token = token + self.de_pos_embedding
        x = self.transformer(token)
        return self.to_pixel(x)


class VectorQuantizer(nn.Module):
    def __init__(self, n_embed=64, dim=32):
        super().__init__()
        self.embedding = nn.Embedding(n_embed, dim)

    def forward(self, z):
        d = torch.cdist(z, self.embedding.weight[None])
        z_q = self.embedding(d.argmin(-1))
        loss = F.mse_loss(z_q, z.detach()) + 0.25 * F.mse_loss(z, z_q.detach())
        return z + (z_q - z).detach(), loss


encoder = nn.Linear(12, 32)
quantizer = VectorQuantizer()
decoder_a, decoder_b = ViTDecoder(), ViTDecoder()
params = [*encoder.parameters(), *quantizer.parameters(), *decoder_a.parameters(), *decoder_b.parameters()]
opt = torch.optim.Adam(params, lr=1e-4)
patches = torch.randn(2, 16, 12)
quant, emb_loss = quantizer(encoder(patches))
rec_a = decoder_a(quant)
rec_b = decoder_b(quant)
loss = F.mse_loss(rec_a, patches) + F.mse_loss(rec_b, patches) + emb_loss
loss.backward()
opt.step()
print("loss", loss.item())
assert encoder.weight.grad is not None and decoder_a.de_pos_embedding.grad is not None
