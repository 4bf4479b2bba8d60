# Source: https://github.com/huggingface/peft/pull/2761
# Category: hook-not-removed
# Expect: ok
"""The X-LoRA model with the fix PR: forward() removes the hooks it registered in a try/finally, so none survives
a forward call."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class LoraLayer(nn.Module):
    def __init__(self, dim=8, n_adapters=2, r=2):
        super().__init__()
        self.base = nn.Linear(dim, dim)
        self.lora_A = nn.ModuleList(nn.Linear(dim, r, bias=False) for _ in range(n_adapters))
        self.lora_B = nn.ModuleList(nn.Linear(r, dim, bias=False) for _ in range(n_adapters))

    def forward(self, x, scalings=None):
        out = self.base(x)
        for i, (a, b) in enumerate(zip(self.lora_A, self.lora_B)):
            s = 1.0 if scalings is None else scalings[..., i:i + 1]
            out = out + b(a(x * s))
        return out


class XLoraModel(nn.Module):
    def __init__(self, vocab=20, dim=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(LoraLayer(dim) for _ in range(2))
        self.classifier = nn.Linear(dim, 2)
        self.lm_head = nn.Linear(dim, vocab)
        self.hook_handles = []

    def forward(self, input_ids):
        h = self.embed(input_ids)
        scalings = torch.softmax(self.classifier(h), -1)

        def scalings_injection_hook(module, args, kwargs):
            kwargs["scalings"] = scalings
            return args, kwargs

        handles = []
        for layer in self.layers:
            handles.append(layer.register_forward_pre_hook(scalings_injection_hook, with_kwargs=True))
        try:
            for layer in self.layers:
                h = layer(h)
        finally:
            for handle in handles:
                handle.remove()
        return self.lm_head(h)

    def generate(self, input_ids, max_new_tokens=4):
        for _ in range(max_new_tokens):
            next_token = self(input_ids)[:, -1].argmax(-1, keepdim=True)
            input_ids = torch.cat([input_ids, next_token], 1)
        return input_ids


model = XLoraModel()
prompt = torch.randint(0, 20, (1, 3))
with torch.no_grad():
    out = model.generate(prompt, max_new_tokens=4)
n_stale = len(model.layers[0]._forward_pre_hooks)
assert n_stale == 0
