# Source: https://github.com/modelscope/FunASR/pull/3472
# Category: ddp-sync-skipped
# Expect: silent: the no_sync condition uses batch_idx % accum_grad, so DDP all-reduces the first micro-batch of each accumulation window and skips the micro-batch before optimizer.step(), which then applies rank-local gradients
"""FunASR's trainer wraps each micro-batch's forward and backward in `model.no_sync()` unless
`batch_idx % accum_grad == 0`, and steps the optimizer when `(batch_idx + 1) % accum_grad == 0`. The synchronised
micro-batch is the first of the window, not the last (a two-rank gloo reproduction showed 4.0 vs 7.0 on the ranks);
the fix uses `(batch_idx + 1) % accum_grad`. Run here as a one-process gloo group; a comm hook records which
micro-batches were all-reduced."""
import sys
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

torch.manual_seed(0)


class Trainer:
    def __init__(self, model, optim, accum_grad=3):
        self.model, self.optim, self.accum_grad = model, optim, accum_grad
        self.step_batches = []

    def train_epoch(self, dataloader, log):
        self.optim.zero_grad()
        for batch_idx, (speech, target) in enumerate(dataloader):
            log["batch_idx"] = batch_idx
            my_context = self.model.no_sync if batch_idx % self.accum_grad != 0 else nullcontext  # BUG: ddp-sync-skipped
            with my_context():
                loss = ((self.model(speech) - target) ** 2).mean() / self.accum_grad
                loss.backward()
            if (batch_idx + 1) % self.accum_grad == 0:
                self.step_batches.append(batch_idx)
                self.optim.step()
                self.optim.zero_grad()


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
sys.excepthook = sys.__excepthook__
log = {"batch_idx": None}
synced = []


def record_allreduce(state, bucket):
    synced.append(state["batch_idx"])
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


model = DistributedDataParallel(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 8)))
model.register_comm_hook(log, record_allreduce)
trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3))
trainer.train_epoch([(torch.randn(4, 20), torch.randn(4, 8)) for _ in range(9)], log)
dist.destroy_process_group()
synced = sorted(set(synced))
print("micro-batches all-reduced:", synced, " optimizer steps after:", trainer.step_batches)
assert not set(trainer.step_batches) & set(synced)
print("EVIDENCE: none of the micro-batches that end an accumulation window was all-reduced")
