# Source: https://github.com/Lightning-AI/pytorch-lightning/pull/19067
# Category: optimizer-stale-params
# Expect: silent: the optimizer is created from the meta-device parameters of a model built with empty_init=True, before setup materializes the model, so it holds parameters the model no longer uses and the real weights are never updated
"""With Fabric's `init_module(empty_init=True)` the model is created on the meta device and only materialized
(to_empty + reset_parameters) when it is set up. An optimizer created before that references the meta parameters,
which materialization replaces; the PR documents that the optimizer must be created after setup_module()."""
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Fabric:
    @contextlib.contextmanager
    def init_module(self, empty_init=False):
        with torch.device("meta") if empty_init else contextlib.nullcontext():
            yield

    def setup_module(self, module):
        if any(p.is_meta for p in module.parameters()):
            module.to_empty(device="cpu")
            for m in module.modules():
                if hasattr(m, "reset_parameters"):
                    m.reset_parameters()
        return module

    def setup_optimizers(self, optimizer):
        return optimizer

    def backward(self, loss):
        loss.backward()


class GPT(nn.Module):
    def __init__(self, vocab=30, dim=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.mlp = nn.Linear(dim, dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, idx):
        return self.lm_head(F.gelu(self.mlp(self.wte(idx))))


fabric = Fabric()
with fabric.init_module(empty_init=True):
    model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # BUG: optimizer-stale-params
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)

before = model.mlp.weight.detach().clone()
for step in range(3):
    idx = torch.randint(0, 30, (2, 8))
    logits = model(idx[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 30), idx[:, 1:].reshape(-1))
    fabric.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
print("optimizer holds meta tensors:", optimizer.param_groups[0]["params"][0].is_meta)
assert torch.equal(model.mlp.weight, before)
print("EVIDENCE: after 3 steps the materialized weights are unchanged; the optimizer steps the discarded meta parameters")
