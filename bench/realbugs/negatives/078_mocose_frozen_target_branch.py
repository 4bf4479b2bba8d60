# Source: https://github.com/xbdxwyh/mocose/issues/2
# Category: target-not-detached
# Expect: ok
"""A momentum-contrastive sentence-embedding model runs its offline (target) branch without no_grad or detach; a
reader asked where the stop-gradient is, and the author pointed to the demo, which sets requires_grad = False on
every target-branch parameter, so the target output carries no graph. Correct as written."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self, vocab=60, dim=16):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.layer = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.1, batch_first=True)

    def forward(self, input_ids):
        return self.layer(self.embeddings(input_ids))


class Pooler(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.dense = nn.Linear(dim, dim)

    def forward(self, hidden):
        return torch.tanh(self.dense(hidden[:, 0]))


class MoCoSE(nn.Module):
    def __init__(self, dim=16, ema_decay=0.9):
        super().__init__()
        self.online_encoder, self.online_pooler = Encoder(dim=dim), Pooler(dim)
        self.predictor = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        self.target_encoder = copy.deepcopy(self.online_encoder)
        self.target_pooler = copy.deepcopy(self.online_pooler)
        self.ema_decay = ema_decay

    def forward(self, ids_a, ids_b):
        online = self.predictor(self.online_pooler(self.online_encoder(ids_a)))
        target = self.target_pooler(self.target_encoder(ids_b))  # offline branch: no detach needed, params frozen
        self.last_target = target
        return 2 - 2 * F.cosine_similarity(online, target, dim=-1).mean()

    def update_target(self):
        with torch.no_grad():
            for online, target in ((self.online_encoder, self.target_encoder), (self.online_pooler, self.target_pooler)):
                for p_o, p_t in zip(online.parameters(), target.parameters()):
                    p_t.mul_(self.ema_decay).add_(p_o, alpha=1 - self.ema_decay)


model = MoCoSE()
non_optimizer_list = [model.target_encoder, model.target_pooler]
for layer in non_optimizer_list:
    for para in layer.parameters():
        para.requires_grad = False

optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
target_before = model.target_pooler.dense.weight.clone()
online_before = model.online_pooler.dense.weight.detach().clone()
for step in range(4):
    ids = torch.randint(0, 60, (8, 10))
    loss = model(ids, ids)  # two dropout views of the same sentences
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.update_target()

assert model.last_target.grad_fn is None and not model.last_target.requires_grad
assert all(p.grad is None for layer in non_optimizer_list for p in layer.parameters())
assert not torch.equal(online_before, model.online_pooler.dense.weight)
assert not torch.equal(target_before, model.target_pooler.dense.weight)  # moved only by the EMA
print("OK: the offline branch produced graph-free targets, got no gradients, and followed the online branch by EMA")
