"""The small MLPs: the expert, the coordinate MLP and the gating network."""
import torch
import torch.nn as nn

device = torch.device("cpu")


class ExpansionNet(nn.Module):
    def __init__(self, in_dim, n_experts, hidden_list):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim, hidden_list[0]), nn.ReLU(), nn.Linear(hidden_list[0], n_experts))

    def forward(self, x):
        return torch.softmax(self.body(x), dim=-1)


class COOD_MLP(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_list):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim, hidden_list[0]), nn.ReLU(), nn.Linear(hidden_list[0], out_dim))

    def forward(self, rel_coord):
        return self.body(rel_coord)


class RES_MLP(nn.Module):
    def __init__(self, in_dim, out_dim, coord_hidden_list):
        super().__init__()
        layers = []
        lastv = in_dim
        for hidden in coord_hidden_list:
            layers.append(nn.Linear(lastv, hidden).to(device))
            lastv = hidden
        self.layers = nn.Sequential(*layers)
        self.relu = nn.ReLU()
        self.linear_out = nn.Linear(lastv, out_dim).to(device)

    def forward(self, x, cood_out):
        out = x.view(-1, x.shape[-1])
        out = self.relu(self.layers(out)) * cood_out
        return self.linear_out(out)
