# Source: https://github.com/wenet-e2e/wekws/issues/72
# Category: missing-zero-grad
# Expect: ok
"""The keyword-spotting Executor after the merged fix: optimizer.zero_grad() right above loss.backward(), so each
step uses only the current batch's (clipped) gradient."""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_

torch.manual_seed(0)
device = torch.device("cpu")


def max_pooling_loss(logits, target, lengths):
    probs = logits.sigmoid()
    max_probs = torch.stack([probs[i, :lengths[i]].max(0)[0] for i in range(logits.size(0))])
    onehot = F.one_hot(target, probs.size(-1) + 1)[:, 1:].float()
    loss = F.binary_cross_entropy(max_probs, onehot)
    acc = ((max_probs > 0.5).float() == onehot).float().mean().item()
    return loss, acc


def criterion(loss_type, logits, target, lengths):
    assert loss_type == 'max_pooling'
    return max_pooling_loss(logits, target, lengths)


class KWSModel(nn.Module):
    def __init__(self, idim=10, hdim=16, num_keywords=2):
        super().__init__()
        self.backbone = nn.GRU(idim, hdim, batch_first=True)
        self.classifier = nn.Linear(hdim, num_keywords)

    def forward(self, feats):
        out, _ = self.backbone(feats)
        return self.classifier(out)


class Executor:
    def __init__(self):
        self.step = 0

    def train(self, model, optimizer, data_loader, device, writer, args):
        ''' Train one epoch
        '''
        model.train()
        clip = args.get('grad_clip', 50.0)
        log_interval = args.get('log_interval', 10)
        epoch = args.get('epoch', 0)
        for batch_idx, batch in enumerate(data_loader):
            key, feats, target, feats_lengths = batch
            feats = feats.to(device)
            target = target.to(device)
            feats_lengths = feats_lengths.to(device)
            num_utts = feats_lengths.size(0)
            if num_utts == 0:
                continue
            logits = model(feats)
            loss_type = args.get('criterion', 'max_pooling')
            loss, acc = criterion(loss_type, logits, target, feats_lengths)
            optimizer.zero_grad()
            loss.backward()
            grad_norm = clip_grad_norm_(model.parameters(), clip)
            if torch.isfinite(grad_norm):
                optimizer.step()
            if batch_idx % log_interval == 0:
                logging.debug('TRAIN Batch {}/{} loss {:.8f} acc {:.8f}'.format(epoch, batch_idx, loss.item(), acc))


data_loader = []
for b in range(5):
    lengths = torch.randint(6, 12, (4,))
    data_loader.append(([f"utt{b}_{i}" for i in range(4)], torch.randn(4, 12, 10), torch.randint(0, 3, (4,)), lengths))

model = KWSModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

# instrumentation: the gradient of the current batch alone (leaf tensor hooks run before accumulation into .grad)
fresh = {}
for p in model.parameters():
    p.register_hook(lambda g, p=p: fresh.__setitem__(p, g.clone()))
stale = []
optimizer.register_step_pre_hook(lambda opt, a, k: stale.append(
    max((p.grad - fresh[p]).abs().max().item() for p in model.parameters())))

executor = Executor()
executor.train(model, optimizer, data_loader, device, None, {'grad_clip': 50.0, 'epoch': 0})
print("max |p.grad - this batch's gradient| at each step:", [f"{d:.2e}" for d in stale])
assert len(stale) == len(data_loader) and max(stale) < 1e-7
