# Source: https://github.com/NVlabs/FasterViT/issues/24
# Category: deepcopy-non-leaf
# Expect: ok
"""Fixed twin: the module caches a detached copy of the bias and uses the attached one only for its output.
FasterViT's positional-embedding MLP caches its output for deployment on the module and in a registered buffer
(`self.pos_emb = self.cpb_mlp(...)`, `self.relative_bias = self.pos_emb`). After one forward pass in grad mode
(the reporter's YOLOv5 trainer runs one to compute the strides) both are non-leaf tensors of the MLP's graph,
and timm's ModelEmaV2, which deep-copies the model, fails. Caching a detached copy (and using the attached one
only for the output) lets the model be copied."""
import copy

import torch
import torch.nn as nn

torch.manual_seed(0)


class PosEmbMLPSwinv1D(nn.Module):
    def __init__(self, dim, rank=2, seq_length=4):
        super().__init__()
        self.rank = rank
        self.cpb_mlp = nn.Sequential(nn.Linear(self.rank, 32, bias=True), nn.ReLU(), nn.Linear(32, dim, bias=False))
        self.grid_exists = False
        self.pos_emb = None
        self.deploy = False
        self.register_buffer("relative_bias", torch.zeros(1, seq_length, dim))

    def forward(self, input_tensor):
        seq_length = input_tensor.shape[1]
        if self.deploy:
            return input_tensor + self.relative_bias
        seq_length = int(seq_length ** 0.5)
        coords_h = torch.arange(0, seq_length, dtype=input_tensor.dtype)
        coords_w = torch.arange(0, seq_length, dtype=input_tensor.dtype)
        table = torch.stack(torch.meshgrid([coords_h, coords_w], indexing="ij")).contiguous().unsqueeze(0)
        table = (table - seq_length // 2) / (seq_length // 2)
        pos_emb = self.cpb_mlp(table.flatten(2).transpose(1, 2))
        self.pos_emb = pos_emb.detach()
        self.relative_bias = self.pos_emb
        return input_tensor + pos_emb


class FasterViTLayer(nn.Module):
    def __init__(self, dim=8, seq_length=4):
        super().__init__()
        self.pos_embed = PosEmbMLPSwinv1D(dim, seq_length=seq_length)
        self.mlp = nn.Linear(dim, dim)

    def forward(self, x):
        return self.mlp(self.pos_embed(x))


class ModelEmaV2(nn.Module):
    def __init__(self, model, decay=0.9999):
        super().__init__()
        self.module = copy.deepcopy(model)
        self.module.eval()
        self.decay = decay


model = FasterViTLayer()
stride = model(torch.zeros(1, 4, 8)).shape[1]  # the trainer's dummy forward (strides)
ema = ModelEmaV2(model)
print("EMA created, stride", stride)
assert torch.equal(ema.module.pos_embed.relative_bias, model.pos_embed.relative_bias)
