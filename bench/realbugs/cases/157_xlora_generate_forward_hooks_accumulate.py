# Source: https://github.com/huggingface/peft/pull/2761
# Category: hook-not-removed
# Expect: silent: each forward during generate registers a new scalings pre-hook on every LoRA layer, but only the last forward's hooks are removed, so stale hooks pile up, run on every later forward and keep their scalings tensors alive
"""An X-LoRA model injects its per-token adapter scalings into each LoRA layer with forward pre-hooks registered in
forward(); generate() calls forward once per new token and the handles are kept in one attribute that each forward
overwrites, so at the end only the last forward's hooks are removed. The fix removes every hook (try/finally)."""
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
        self.hook_handles = handles  # BUG: hook-not-removed
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(h)

    def generate(self, input_ids, max_new_tokens=4):
        for _ in range(max_new_tokens):
            next_token = self(input_ids)[:, -1].argmax(-1, keepdim=True)
            input_ids = torch.cat([input_ids, next_token], 1)
        for handle in self.hook_handles:
            handle.remove()
        return input_ids


model = XLoraModel()
prompt = torch.randint(0, 20, (1, 3))
with torch.no_grad():
    out = model.generate(prompt, max_new_tokens=4)
n_stale = len(model.layers[0]._forward_pre_hooks)
print("generated", out.tolist(), "; pre-hooks left on a LoRA layer after generate():", n_stale)
assert n_stale == 3
print("EVIDENCE:", n_stale, "scalings hooks from earlier decoding steps stay registered on every LoRA layer")
