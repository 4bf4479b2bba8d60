"""The training configuration: sampling, steps, validation and early stopping."""
import copy

import torch


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
