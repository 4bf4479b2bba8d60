# Source: https://github.com/jiasenlu/NeuralBabyTalk/issues/26
# Category: int-requires-grad
# Expect: ok
"""The fix from the thread: the byte mask is wrapped as nn.Parameter(..., requires_grad=False) in one call, so the
integer tensor never has to require grad; the float layers still train."""
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import Parameter

torch.manual_seed(0)
np.random.seed(0)


class CascadeCore(nn.Module):
    def __init__(self, opt):
        super(CascadeCore, self).__init__()
        self.rnn_size = opt.rnn_size
        self.fg_size = opt.fg_size
        self.bn_fc = nn.Sequential(nn.Linear(opt.rnn_size + opt.rnn_size, opt.rnn_size), nn.ReLU(),
                                   nn.Dropout(opt.drop_prob_lm), nn.Linear(opt.rnn_size, 2))
        self.fg_fc = nn.Sequential(nn.Linear(opt.rnn_size + opt.rnn_size, opt.rnn_size), nn.ReLU(),
                                   nn.Dropout(opt.drop_prob_lm), nn.Linear(opt.rnn_size, 300))
        # initialize the fine-grained glove embedding.
        self.fg_emb = Parameter(opt.glove_fg)
        self.fg_emb.requires_grad = False
        # setting the fg mask for the cascadeCore.
        self.fg_mask = Parameter(opt.fg_mask, requires_grad=False)
        self.min_value = -1e8
        self.beta = opt.beta

    def forward(self, fg_idx, pool_feats, rnn_outs, roi_labels, seq_batch_size, seq_cnt):
        roi_num = pool_feats.size(1)
        pool_feats = pool_feats.view(seq_batch_size, 1, roi_num, self.rnn_size) * \
            roi_labels.view(seq_batch_size, seq_cnt, roi_num, 1)
        pool_cnt = roi_labels.sum(2)
        pool_cnt[pool_cnt == 0] = 1
        pool_feats = pool_feats.sum(2) / pool_cnt.view(seq_batch_size, seq_cnt, 1)
        pool_feats = torch.cat((rnn_outs, pool_feats), 2)
        bn_logprob = F.log_softmax(self.bn_fc(pool_feats), dim=2)
        fg_out = self.fg_fc(pool_feats)
        fg_score = torch.mm(fg_out.view(-1, 300), self.fg_emb.t()).view(seq_batch_size, -1, self.fg_size + 1)
        fg_mask = self.fg_mask[fg_idx]
        fg_score = fg_score.masked_fill(fg_mask.view_as(fg_score).bool(), self.min_value)
        fg_logprob = F.log_softmax(self.beta * fg_score, dim=2)
        return bn_logprob, fg_logprob


detect_size, fg_size = 5, 7
fg_mask_np = np.ones((detect_size + 1, fg_size + 1))
wtod = {2: 1, 4: 1, 3: 2, 7: 2, 1: 3, 5: 4, 6: 5, 0: 5}
for w, det in wtod.items():
    fg_mask_np[det, w] = 0
opt = SimpleNamespace(rnn_size=16, drop_prob_lm=0.1, fg_size=fg_size, beta=1.0,
                      glove_fg=torch.randn(fg_size + 1, 300),
                      fg_mask=torch.from_numpy(fg_mask_np).byte())

core = CascadeCore(opt)
w_before = core.fg_fc[0].weight.detach().clone()
optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, core.parameters()), lr=1e-3)
seq_batch_size, seq_cnt, roi_num = 2, 3, 4
fg_idx = torch.randint(1, detect_size + 1, (seq_batch_size * seq_cnt,))
pool_feats = torch.randn(seq_batch_size, roi_num, opt.rnn_size)
rnn_outs = torch.randn(seq_batch_size, seq_cnt, opt.rnn_size)
roi_labels = (torch.rand(seq_batch_size, seq_cnt, roi_num) > 0.5).float()
bn_logprob, fg_logprob = core(fg_idx, pool_feats, rnn_outs, roi_labels, seq_batch_size, seq_cnt)
fg_target = torch.tensor([{d: w for w, d in wtod.items()}[int(d)] for d in fg_idx])
loss = F.nll_loss(fg_logprob.view(-1, fg_size + 1), fg_target) + F.nll_loss(bn_logprob.view(-1, 2), torch.zeros(6, dtype=torch.long))
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("loss", loss.item())
assert core.fg_mask.dtype == torch.uint8 and not core.fg_mask.requires_grad and core.fg_mask.grad is None
assert 0 < loss.item() < 100
assert not torch.equal(w_before, core.fg_fc[0].weight)
