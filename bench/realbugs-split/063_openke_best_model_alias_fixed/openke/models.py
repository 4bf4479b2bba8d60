"""Knowledge-graph embedding models."""
import torch
import torch.nn as nn


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
