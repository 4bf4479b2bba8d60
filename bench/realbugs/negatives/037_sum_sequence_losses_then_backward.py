# Source: https://discuss.pytorch.org/t/gpu-memory-increase-while-i-wanna-to-backward-with-accumulative-loss/43284
# Category: graph-kept-alive
# Expect: ok
"""Sequences of different lengths in one batch get their own criterion call and the per-sequence
losses are summed with `loss += loss_part` before a single backward per batch; the reporter later
found this was not the source of their memory growth. The graph lives for one batch only."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class SeqTagger(nn.Module):
    def __init__(self, vocab=20, hidden=16, n_tags=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, n_tags)

    def forward(self, seq):
        h, _ = self.rnn(self.embed(seq).unsqueeze(0))
        return self.out(h.squeeze(0))


model = SeqTagger()
criteria = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

batches = [[(torch.randint(0, 20, (n,)), torch.randint(0, 5, (n,))) for n in (3, 7, 5)]
           for _ in range(4)]
history = []
before = model.out.weight.detach().clone()
for batch in batches:
    optimizer.zero_grad()
    loss = 0
    for seq, tags in batch:
        loss_part = criteria(model(seq), tags)
        loss += loss_part
    loss.backward()
    optimizer.step()
    history.append(loss.item())

assert all(isinstance(v, float) for v in history)
assert not torch.equal(before, model.out.weight.detach())
print("losses", [round(v, 3) for v in history])
