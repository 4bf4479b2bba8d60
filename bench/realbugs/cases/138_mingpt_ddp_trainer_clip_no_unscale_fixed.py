# Source: https://github.com/pytorch/examples/issues/1196
# Category: clip-scaled-grads
# Expect: ok
"""The minGPT DDP trainer with the change the issue asks for: self.scaler.unscale_(self.optimizer) before
clip_grad_norm_, so the true gradients are clipped to grad_norm_clip."""
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)


class GPT(nn.Module):
    def __init__(self, vocab_size=16, n_embd=16, block_size=8):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Parameter(torch.zeros(1, block_size, n_embd))
        self.block = nn.Sequential(nn.LayerNorm(n_embd), nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                   nn.Linear(4 * n_embd, n_embd))
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets=None):
        x = self.tok_emb(idx) + self.pos_emb[:, :idx.size(1)]
        logits = self.head(x + self.block(x))
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


@dataclass
class TrainerConfig:
    max_epochs: int = 1
    grad_norm_clip: float = 1.0
    use_amp: bool = True


class Trainer:
    def __init__(self, trainer_config, model, optimizer, train_data):
        self.config = trainer_config
        self.model = DDP(model)
        self.optimizer = optimizer
        self.train_data = train_data
        if self.config.use_amp:
            self.scaler = torch.amp.GradScaler("cpu")
        self.step_grad_norms = []

    def _run_batch(self, source, targets, train: bool = True) -> float:
        with torch.set_grad_enabled(train), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.config.use_amp):
            _, loss = self.model(source, targets)

        if train:
            self.optimizer.zero_grad(set_to_none=True)
            if self.config.use_amp:
                self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
                self.scaler.step(self.optimizer)
                self.scaler.update()
            self.step_grad_norms.append(
                torch.norm(torch.stack([p.grad.norm() for p in self.model.parameters()])).item())
        return loss.item()

    def train(self):
        for epoch in range(self.config.max_epochs):
            for source, targets in self.train_data:
                self._run_batch(source, targets)


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
model = GPT()
trainer = Trainer(TrainerConfig(), model, torch.optim.AdamW(model.parameters(), lr=3e-4, eps=1e-3),
                  [(torch.randint(0, 16, (4, 8)), torch.randint(0, 16, (4, 8))) for _ in range(3)])
trainer.train()
dist.destroy_process_group()
print("gradient norm per step:", [f"{n:.2e}" for n in trainer.step_grad_norms])
assert 1e-2 < max(trainer.step_grad_norms) <= 1.0 + 1e-4
