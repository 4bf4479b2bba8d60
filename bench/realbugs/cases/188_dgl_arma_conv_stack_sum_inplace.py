# Source: https://github.com/dmlc/dgl/issues/4202
# Category: inplace-on-saved
# Expect: raises RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""DGL's ARMA example sums its K parallel stacks with `output = feats` for the first stack and `output += feats`
for the others; the first stack's feats is the ReLU output that ReLU saved for backward, so the in-place sum bumps
its version and `train_loss.backward()` fails (ReluBackward0, "is at version 1; expected version 0").
Message passing is written here with an edge list instead of a DGLGraph."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def propagate(src, dst, num_nodes, feats):  # copy_u + sum over incoming edges
    return torch.zeros(num_nodes, feats.shape[1]).index_add(0, dst, feats[src])


class ARMAConv(nn.Module):
    def __init__(self, in_dim, out_dim, num_stacks, num_layers, activation=None, dropout=0.0):
        super().__init__()
        self.K, self.T, self.activation = num_stacks, num_layers, activation
        self.dropout = nn.Dropout(p=dropout)
        self.w_0 = nn.ModuleDict({str(k): nn.Linear(in_dim, out_dim, bias=False) for k in range(self.K)})
        self.w = nn.ModuleDict({str(k): nn.Linear(out_dim, out_dim, bias=False) for k in range(self.K)})
        self.v = nn.ModuleDict({str(k): nn.Linear(in_dim, out_dim, bias=False) for k in range(self.K)})
        self.bias = nn.Parameter(torch.zeros(self.K, self.T, 1, out_dim))

    def forward(self, graph, feats):
        src, dst, n = graph
        init_feats = feats
        degs = torch.bincount(dst, minlength=n).float().clamp(min=1)
        norm = torch.pow(degs, -0.5).unsqueeze(1)
        output = None
        for k in range(self.K):
            feats = init_feats
            for t in range(self.T):
                feats = propagate(src, dst, n, feats * norm) * norm
                feats = self.w_0[str(k)](feats) if t == 0 else self.w[str(k)](feats)
                feats = feats + self.v[str(k)](self.dropout(init_feats)) + self.bias[k][t]
                if self.activation is not None:
                    feats = self.activation(feats)
            if output is None:
                output = feats
            else:
                output += feats  # BUG: inplace-on-saved
        return output / self.K


class ARMA4NC(nn.Module):
    def __init__(self, in_dim, hid_dim, out_dim, num_stacks=2, num_layers=1, activation=nn.ReLU(), dropout=0.5):
        super().__init__()
        self.conv1 = ARMAConv(in_dim, hid_dim, num_stacks, num_layers, activation, dropout)
        self.conv2 = ARMAConv(hid_dim, out_dim, num_stacks, num_layers, activation, dropout)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, g, feats):
        feats = self.dropout(F.relu(self.conv1(g, feats)))
        return self.conv2(g, feats)


n = 30
src, dst = torch.randint(0, n, (120,)), torch.randint(0, n, (120,))
graph = (torch.cat([src, dst]), torch.cat([dst, src]), n)
features, labels = torch.randn(n, 12), torch.randint(0, 4, (n,))
train_mask = torch.rand(n) < 0.5
model = ARMA4NC(12, 16, 4)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(3):
    model.train()
    logits = model(graph, features)
    train_loss = F.cross_entropy(logits[train_mask], labels[train_mask])
    opt.zero_grad()
    train_loss.backward()
    opt.step()
