# Source: https://github.com/facebookresearch/moco/issues/70
# Category: inplace-through-data
# Expect: ok
"""MoCo's key encoder is a frozen copy of the query encoder that follows it by an exponential moving average written
through `.data` inside a @torch.no_grad() method, with keys and the queue computed without a graph; the thread
discusses this update and it is correct as written."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def make_encoder(dim):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, dim))


class MoCo(nn.Module):
    def __init__(self, dim=16, K=32, m=0.9, T=0.07):
        super(MoCo, self).__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = make_encoder(dim)
        self.encoder_k = make_encoder(dim)
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)  # initialize
            param_k.requires_grad = False  # not updated by gradient
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1. - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        self.queue[:, ptr:ptr + batch_size] = keys.T
        self.queue_ptr[0] = (ptr + batch_size) % self.K

    def forward(self, im_q, im_k):
        q = F.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = F.normalize(self.encoder_k(im_k), dim=1)
        l_pos = torch.einsum('nc,nc->n', [q, k]).unsqueeze(-1)
        l_neg = torch.einsum('nc,ck->nk', [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels


model = MoCo()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
k_before = model.encoder_k[-1].weight.detach().clone()
q_before = model.encoder_q[-1].weight.detach().clone()
queue_before = model.queue.clone()

for i in range(4):
    images = torch.rand(8, 3, 8, 8)
    im_q, im_k = images + 0.05 * torch.randn_like(images), images + 0.05 * torch.randn_like(images)
    output, target = model(im_q, im_k)
    loss = criterion(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

assert all(p.grad is None and not p.requires_grad for p in model.encoder_k.parameters())
assert all(p.grad is not None for p in model.encoder_q.parameters())
assert not torch.equal(q_before, model.encoder_q[-1].weight)
assert not torch.equal(k_before, model.encoder_k[-1].weight)  # moved by the EMA
assert not model.queue.requires_grad and not torch.equal(queue_before, model.queue)
print("OK: query encoder trained by SGD, key encoder followed by EMA without gradients, queue refreshed")
