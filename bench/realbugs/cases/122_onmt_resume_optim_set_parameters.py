# Source: https://github.com/OpenNMT/OpenNMT-py/issues/38
# Category: optimizer-state-reset
# Expect: silent: the optimizer restored from the checkpoint is rebuilt by set_parameters before its state is read back, so Adam resumes with empty moments and step 1
"""Resuming NMT training from a checkpoint: the Optim wrapper comes out of the checkpoint, but
`optim.set_parameters(model.parameters())` runs unconditionally and builds a fresh torch optimizer, so the
`optim.optimizer.state_dict()` copied back afterwards is already the empty one."""
import io

import torch
import torch.nn as nn
import torch.optim as optim
from torch.nn.utils import clip_grad_norm_

torch.manual_seed(0)


class Optim(object):
    def set_parameters(self, params):
        self.params = list(params)  # careful: params may be a generator
        if self.method == 'sgd':
            self.optimizer = optim.SGD(self.params, lr=self.lr)
        elif self.method == 'adam':
            self.optimizer = optim.Adam(self.params, lr=self.lr)
        else:
            raise RuntimeError("Invalid optim method: " + self.method)

    def __init__(self, method, lr, max_grad_norm):
        self.lr = lr
        self.max_grad_norm = max_grad_norm
        self.method = method

    def step(self):
        if self.max_grad_norm:
            clip_grad_norm_(self.params, self.max_grad_norm)
        self.optimizer.step()


class NMTModel(nn.Module):
    def __init__(self, vocab=20, dim=16):
        super(NMTModel, self).__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.generator = nn.Sequential(nn.Linear(dim, vocab), nn.LogSoftmax(dim=-1))

    def forward(self, src):
        out, _ = self.rnn(self.embed(src))
        return self.generator(out)


def train_epoch(model, optim, src, tgt, criterion, steps):
    for _ in range(steps):
        model.zero_grad()
        out = model(src)
        loss = criterion(out.reshape(-1, out.size(-1)), tgt.reshape(-1))
        loss.backward()
        optim.step()
    return loss.item()


def build(checkpoint=None):
    model = NMTModel()
    if checkpoint is not None:
        model.load_state_dict(checkpoint['model'])
        optim = checkpoint['optim']
    else:
        optim = Optim('adam', 1e-2, 5.0)
    optim.set_parameters(model.parameters())  # BUG: optimizer-state-reset
    if checkpoint is not None:
        optim.optimizer.load_state_dict(checkpoint['optim'].optimizer.state_dict())
    return model, optim


def main():
    src = torch.randint(0, 20, (8, 6))
    tgt = torch.roll(src, 1, dims=1)
    criterion = nn.NLLLoss()

    # first run: 3 epochs of 4 steps, then drop a checkpoint (kept in memory here)
    model, optim = build()
    for epoch in range(3):
        train_epoch(model, optim, src, tgt, criterion, steps=4)
    buf = io.BytesIO()
    torch.save({'model': model.state_dict(), 'optim': optim, 'epoch': 3}, buf)
    buf.seek(0)
    checkpoint = torch.load(buf, weights_only=False)
    saved_steps = int(checkpoint['optim'].optimizer.state_dict()['state'][0]['step'])

    # resume
    model, optim = build(checkpoint)
    state_at_resume = len(optim.optimizer.state)
    train_epoch(model, optim, src, tgt, criterion, steps=1)
    resumed_step = int(optim.optimizer.state[optim.params[0]]['step'])
    print(f"steps before checkpoint {saved_steps}; Adam states after resume {state_at_resume}; step counter now {resumed_step}")
    assert saved_steps == 12
    assert state_at_resume == 0 and resumed_step == 1
    print("EVIDENCE: resumed Adam restarted at step", resumed_step, "with empty moments instead of continuing from step", saved_steps)


main()
