"""The node-prediction GNN."""
import torch.nn as nn
import torch.nn.functional as F


class GSgnnNodeModel(nn.Module):
    def __init__(self, in_dim, hid, n_classes):
        super().__init__()
        self.encoder = nn.Linear(in_dim, hid)
        self.decoder = nn.Linear(hid, n_classes)

    def forward(self, adj, node_feats, labels):
        h = F.relu(self.encoder(adj @ node_feats))
        logits = self.decoder(adj @ h)
        return F.cross_entropy(logits, labels)
