# Source: https://github.com/huggingface/transformers/issues/26334
# Category: checkpoint-no-grad-input
# Expect: raises RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""A LoRA run turns gradient checkpointing on after the PeftModel is created. PeftModel prepares a checkpointed
model when it is wrapped (it registers the forward hook that makes the frozen embedding output require grad, i.e.
enable_input_require_grads()), but only if checkpointing is already on; enabled afterwards, the reentrant
checkpoints get inputs that do not require grad, no LoRA weight receives a gradient and the loss has no grad_fn.
The answer: enable checkpointing before wrapping (or call enable_input_require_grads())."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class LoraLinear(nn.Module):
    def __init__(self, base, r=4):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x))


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, dim)

    def forward(self, h):
        return h + F.gelu(self.c_attn(self.ln(h)))


class CausalLM(nn.Module):
    def __init__(self, vocab=32, dim=16, n_layer=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.h = nn.ModuleList(Block(dim) for _ in range(n_layer))
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.is_gradient_checkpointing = False

    def gradient_checkpointing_enable(self):
        self.is_gradient_checkpointing = True

    def enable_input_require_grads(self):
        self.wte.register_forward_hook(lambda module, inputs, output: output.requires_grad_(True))

    def forward(self, input_ids, labels):
        hidden = self.wte(input_ids)
        for block in self.h:
            hidden = checkpoint(block, hidden, use_reentrant=True) if self.is_gradient_checkpointing else block(hidden)
        logits = self.lm_head(hidden)
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))


class PeftModel(nn.Module):
    def __init__(self, model):
        super().__init__()
        for p in model.parameters():
            p.requires_grad_(False)
        for block in model.h:
            block.c_attn = LoraLinear(block.c_attn)
        if model.is_gradient_checkpointing:
            model.enable_input_require_grads()
        self.base_model = model

    def forward(self, **kwargs):
        return self.base_model(**kwargs)


def get_peft_model(model):
    return PeftModel(model)


model = CausalLM()
model = get_peft_model(model)
model.base_model.gradient_checkpointing_enable()  # BUG: checkpoint-no-grad-input
trainable = [p for p in model.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW(trainable, lr=1e-3)
model.train()
for step in range(2):
    input_ids = torch.randint(0, 32, (2, 8))
    loss = model(input_ids=input_ids, labels=input_ids)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
