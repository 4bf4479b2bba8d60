# Source: https://github.com/thunlp/OpenKE/pull/131
# Category: state-dict-alias
# Expect: ok
"""OpenKE's trainer keeps `best_model = self.trainModel.state_dict()` when the validation hit@10 improves and
stores it after early stopping; the fix deep-copies it, otherwise the best model is always the newest one."""
import copy

import torch
import torch.nn as nn

torch.manual_seed(0)


class TransE(nn.Module):
    def __init__(self, ent_tot, rel_tot, dim=8, margin=1.0):
        super().__init__()
        self.ent_embeddings = nn.Embedding(ent_tot, dim)
        self.rel_embeddings = nn.Embedding(rel_tot, dim)
        self.margin = margin

    def score(self, h, t, r):
        return torch.norm(self.ent_embeddings(h) + self.rel_embeddings(r) - self.ent_embeddings(t), p=1, dim=-1)

    def forward(self, pos, neg):
        return torch.relu(self.score(*pos) - self.score(*neg) + self.margin).mean()


class Config(object):
    def __init__(self, model, triples, valid_triples, ent_tot):
        self.trainModel = model
        self.triples = triples
        self.valid_triples = valid_triples
        self.ent_tot = ent_tot
        self.train_times = 20
        self.valid_steps = 2
        self.early_stopping_patience = 3
        self.optimizer = torch.optim.SGD(model.parameters(), lr=2.0)
        self.history = []

    def sampling(self):
        h, t, r = self.triples
        return (h, t, r), (h, torch.randint(0, self.ent_tot, t.shape), r)

    def train_one_step(self):
        pos, neg = self.sampling()
        self.optimizer.zero_grad()
        loss = self.trainModel(pos, neg)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def valid(self, model):
        h, t, r = self.valid_triples
        with torch.no_grad():
            all_t = torch.arange(self.ent_tot)
            scores = torch.stack([model.score(h, all_t[i].expand_as(t), r) for i in range(self.ent_tot)], 1)
            rank = (scores < model.score(h, t, r).unsqueeze(1)).sum(1)
        return (rank < 10).float().mean().item()

    def run(self):
        best_hit10 = 0.0
        best_epoch = 0
        best_model = None
        bad_counts = 0
        for epoch in range(self.train_times):
            res = 0.0
            for batch in range(2):
                res += self.train_one_step()
            if (epoch + 1) % self.valid_steps == 0:
                hit10 = self.valid(self.trainModel)
                self.history.append((epoch, hit10))
                if hit10 > best_hit10:
                    best_hit10 = hit10
                    best_epoch = epoch
                    best_model = copy.deepcopy(self.trainModel.state_dict())
                    self.best_snapshot = {k: v.clone() for k, v in self.trainModel.state_dict().items()}
                    bad_counts = 0
                else:
                    bad_counts += 1
                if bad_counts == self.early_stopping_patience:
                    break
        self.last_epoch = epoch
        print("Best epoch is %d | hit@10 of valid set is %f" % (best_epoch, best_hit10))
        return best_model, best_epoch


ent_tot, rel_tot = 60, 3
h = torch.randint(0, ent_tot, (40,))
r = torch.randint(0, rel_tot, (40,))
t = (h + 7 * r + 1) % ent_tot
model = TransE(ent_tot, rel_tot)
con = Config(model, (h, t, r), (h[:20], t[:20], r[:20]), ent_tot)
best_model, best_epoch = con.run()
print("validation history:", con.history)

key = "ent_embeddings.weight"
assert best_epoch < con.last_epoch
assert torch.equal(best_model[key], con.best_snapshot[key])
assert not torch.equal(best_model[key], model.ent_embeddings.weight)
print("OK: the best state_dict still holds the weights of epoch", best_epoch, "after training ran to epoch", con.last_epoch)
