# Source: https://github.com/lm-sys/FastChat/issues/581
# Source: https://github.com/lm-sys/FastChat/pull/1489
# Category: checkpoint-no-grad-input
# Expect: ok
"""LoRA fine-tuning with gradient checkpointing and the fix PR's enable_input_require_grads(): a forward hook on
the frozen embeddings makes their output require grad, so every checkpointed layer records a graph and the LoRA
weights train."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class LoraLinear(nn.Module):
    def __init__(self, base: nn.Linear, r=4):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.zeros_(self.lora_B.weight)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x))


class DecoderLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.q_proj = nn.Linear(dim, dim)
        self.mlp = nn.Linear(dim, dim)

    def forward(self, h):
        return h + self.mlp(F.silu(self.q_proj(self.norm(h))))


class LlamaForCausalLM(nn.Module):
    def __init__(self, vocab=50, dim=16, n_layers=2):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(DecoderLayer(dim) for _ in range(n_layers))
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.gradient_checkpointing = False

    def gradient_checkpointing_enable(self):
        self.gradient_checkpointing = True

    def enable_input_require_grads(self):
        def make_inputs_require_grads(module, input, output):
            output.requires_grad_(True)
        self.embed_tokens.register_forward_hook(make_inputs_require_grads)

    def forward(self, input_ids, labels):
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                h = checkpoint(layer, h, use_reentrant=True)
            else:
                h = layer(h)
        logits = self.lm_head(h)
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))


def get_peft_model(model, target="q_proj"):
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in model.layers:
        setattr(layer, target, LoraLinear(getattr(layer, target)))
    return model


def train(model, batches, lr=1e-3):
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for input_ids in batches:
        loss = model(input_ids, labels=input_ids)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


model = LlamaForCausalLM()
model.gradient_checkpointing_enable()
model.enable_input_require_grads()
model = get_peft_model(model)
train(model, [torch.randint(0, 50, (2, 8)) for _ in range(2)])
assert all(layer.q_proj.lora_B.weight.abs().sum() > 0 for layer in model.layers)
