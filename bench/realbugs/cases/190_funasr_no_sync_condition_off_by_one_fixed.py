# Source: https://github.com/modelscope/FunASR/pull/3472
# Category: ddp-sync-skipped
# Expect: ok
"""FunASR's trainer after the fix: the micro-batches before the last one of each window run under no_sync and the
last one, the one before optimizer.step(), is all-reduced."""
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
            my_context = self.model.no_sync if (batch_idx + 1) % self.accum_grad != 0 else nullcontext
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
assert synced == trainer.step_batches
