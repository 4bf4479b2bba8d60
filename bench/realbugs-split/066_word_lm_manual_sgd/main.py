# Source: https://github.com/pytorch/examples/pull/779
# Category: inplace-on-leaf
# Expect: raises RuntimeError: a leaf Variable that requires grad is being used in an in-place operation
"""The word-level language-model example updates its parameters by hand with `p.add_(-lr, p.grad)` after
clipping; once `.data` was dropped the update runs under autograd and crashes on the first batch."""
import math
import time

import torch
import torch.nn as nn

import model

torch.manual_seed(0)
device = torch.device("cpu")


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous().to(device)


def repackage_hidden(h):
    """Detach hidden states from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt=8):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


ntokens = 30
train_data = batchify(torch.randint(0, ntokens, (200,)), 4)
model = model.RNNModel(ntokens, 16, 16, 2).to(device)
criterion = nn.CrossEntropyLoss()
lr = 20.0
clip = 0.25


def train():
    model.train()
    total_loss = 0.
    start_time = time.time()
    hidden = model.init_hidden(4)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, 8)):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output.view(-1, ntokens), targets)
        loss.backward()

        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.add_(p.grad, alpha=-lr)  # BUG: inplace-on-leaf

        total_loss += loss.item()
    cur_loss = total_loss / (batch + 1)
    print('| loss {:5.2f} | ppl {:8.2f} | {:5.2f} s'.format(cur_loss, math.exp(cur_loss), time.time() - start_time))
    return cur_loss


first = model.decoder.weight.detach().clone()
train()
print("EVIDENCE: the manual update ran without error, which it should not have")
