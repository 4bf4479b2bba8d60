# Source: https://github.com/karpathy/build-nanogpt/pull/30
# Category: ddp-sync-skipped
# Expect: ok
"""build-nanogpt's accumulation loop after the fix: require_backward_grad_sync is set before the forward of each
micro-step, so DDP all-reduces exactly on the last micro-step, the one before optimizer.step()."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)


class GPT(nn.Module):
    def __init__(self, vocab=32, n_embd=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))
        self.lm_head = nn.Linear(n_embd, vocab)

    def forward(self, idx, targets):
        x = self.wte(idx)
        logits = self.lm_head(x + self.mlp(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
sys.excepthook = sys.__excepthook__
synced = []


def record_allreduce(state, bucket):
    synced.append(state["micro_step"])
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


model = DDP(GPT())
state = {"micro_step": None}
model.register_comm_hook(state, record_allreduce)
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
grad_accum_steps = 4
step_syncs = []
for step in range(3):
    optimizer.zero_grad()
    synced.clear()
    for micro_step in range(grad_accum_steps):
        state["micro_step"] = micro_step
        x, y = torch.randint(0, 32, (4, 8)), torch.randint(0, 32, (4, 8))
        model.require_backward_grad_sync = (micro_step == grad_accum_steps - 1)
        logits, loss = model(x, y)
        loss = loss / grad_accum_steps
        loss.backward()
    step_syncs.append(sorted(set(synced)))
    optimizer.step()
dist.destroy_process_group()
print("micro-steps whose backward was all-reduced, per step:", step_syncs)
assert all(s == [grad_accum_steps - 1] for s in step_syncs)
