# Source: https://github.com/benedekrozemberczki/pytorch_geometric_temporal/issues/57
# Category: inplace-on-saved
# Expect: raises RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""A spatio-temporal graph conv block (STConv) applies its graph convolution to every (batch, time) slice and writes
the result back into the same tensor, `T[b][t] = self._graph_conv(T[b][t], ...)`; the graph conv saved the slice it
read for backward, and the next slice assignment bumps the tensor's version, so training fails at backward."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class GraphConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)

    def forward(self, x, edge_index, edge_weight):
        n = x.size(0)
        adj = torch.zeros(n, n).index_put_((edge_index[0], edge_index[1]), edge_weight, accumulate=True)
        deg = adj.sum(1).clamp(min=1)
        return (adj / deg[:, None]) @ self.lin(x)


class TemporalConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, (1, kernel_size))

    def forward(self, X):  # X: (batch, time, nodes, channels)
        return F.relu(self.conv(X.permute(0, 3, 2, 1))).permute(0, 3, 2, 1)


class STConv(nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, kernel_size):
        super().__init__()
        self._temporal_conv1 = TemporalConv(in_channels, hidden_channels, kernel_size)
        self._graph_conv = GraphConv(hidden_channels, hidden_channels)
        self._temporal_conv2 = TemporalConv(hidden_channels, out_channels, kernel_size)

    def forward(self, X, edge_index, edge_weight):
        T = self._temporal_conv1(X)
        for b in range(T.size(0)):
            for t in range(T.size(1)):
                T[b][t] = self._graph_conv(T[b][t], edge_index, edge_weight)  # BUG: inplace-on-saved
        T = F.relu(T)
        return self._temporal_conv2(T)


class STGCN(nn.Module):
    def __init__(self, nodes=5):
        super().__init__()
        self.recurrent1 = STConv(2, 8, 8, kernel_size=2)
        self.linear = nn.Linear(8, 1)

    def forward(self, x, edge_index, edge_weight):
        return self.linear(self.recurrent1(x, edge_index, edge_weight))


edge_index = torch.tensor([[0, 1, 2, 3, 4, 1], [1, 2, 3, 4, 0, 3]])
edge_weight = torch.ones(edge_index.size(1))
model = STGCN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(2, 6, 5, 2), torch.randn(2, 4, 5, 1)
optimizer.zero_grad()
loss = F.mse_loss(model(x, edge_index, edge_weight), y)
loss.backward()
optimizer.step()
print("loss", loss.item())
