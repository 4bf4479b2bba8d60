# Source: https://github.com/dalinvip/pytorch_word2vec/issues/2
# Category: numpy-roundtrip
# Expect: silent: the context embeddings are summed in NumPy and re-wrapped as a new tensor, so u_embeddings gets no gradient and never changes
"""A word2vec CBOW model sums each window's context embeddings with `np.sum(emb.data.numpy())` and wraps the result in a fresh
FloatTensor; a user reported that u_embeddings never updates during training."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable

torch.manual_seed(0)


class CBOW(nn.Module):
    def __init__(self, emb_size, emb_dimension):
        super(CBOW, self).__init__()
        self.emb_size = emb_size
        self.emb_dimension = emb_dimension
        self.u_embeddings = nn.Embedding(2 * emb_size - 1, emb_dimension, sparse=True)
        self.v_embeddings = nn.Embedding(2 * emb_size - 1, emb_dimension, sparse=True)
        self.init_emb()

    def init_emb(self):
        initrange = 0.5 / self.emb_dimension
        self.u_embeddings.weight.data.uniform_(-initrange, initrange)
        self.v_embeddings.weight.data.uniform_(-0, 0)

    def forward(self, pos_u, pos_v, neg_u, neg_v):
        losses = []
        emb_u = []
        for i in range(len(pos_u)):
            emb_ui = self.u_embeddings(Variable(torch.LongTensor(pos_u[i])))
            emb_u.append(np.sum(emb_ui.data.numpy(), axis=0).tolist())  # BUG: numpy-roundtrip
        emb_u = Variable(torch.FloatTensor(emb_u))  # BUG: numpy-roundtrip
        emb_v = self.v_embeddings(Variable(torch.LongTensor(pos_v)))
        score = torch.mul(emb_u, emb_v)
        score = torch.sum(score, dim=1)
        score = F.logsigmoid(score)
        losses.append(sum(score))

        neg_emb_u = []
        for i in range(len(neg_u)):
            neg_emb_ui = self.u_embeddings(Variable(torch.LongTensor(neg_u[i])))
            neg_emb_u.append(np.sum(neg_emb_ui.data.numpy(), axis=0).tolist())  # BUG: numpy-roundtrip
        neg_emb_u = Variable(torch.FloatTensor(neg_emb_u))  # BUG: numpy-roundtrip
        neg_emb_v = self.v_embeddings(Variable(torch.LongTensor(neg_v)))
        neg_score = torch.mul(neg_emb_u, neg_emb_v)
        neg_score = torch.sum(neg_score, dim=1)
        neg_score = F.logsigmoid(-1 * neg_score)
        losses.append(sum(neg_score))
        return -1 * sum(losses)


emb_size, emb_dimension = 20, 8
cbow_model = CBOW(emb_size, emb_dimension)
optimizer = optim.SGD(cbow_model.parameters(), lr=0.5)
u_before = cbow_model.u_embeddings.weight.detach().clone()
v_before = cbow_model.v_embeddings.weight.detach().clone()

rng = np.random.RandomState(0)
for i in range(20):
    pos_u = [rng.randint(0, emb_size, 4).tolist() for _ in range(6)]
    pos_v = rng.randint(0, emb_size, 6).tolist()
    neg_u = [rng.randint(0, emb_size, 4).tolist() for _ in range(6)]
    neg_v = rng.randint(0, emb_size, 6).tolist()
    optimizer.zero_grad()
    loss = cbow_model.forward(pos_u, pos_v, neg_u, neg_v)
    loss.backward()
    optimizer.step()

assert not torch.equal(v_before, cbow_model.v_embeddings.weight)
assert torch.equal(u_before, cbow_model.u_embeddings.weight) and cbow_model.u_embeddings.weight.grad is None
print("EVIDENCE: after 20 steps v_embeddings moved but u_embeddings is bit-identical and has no .grad")
