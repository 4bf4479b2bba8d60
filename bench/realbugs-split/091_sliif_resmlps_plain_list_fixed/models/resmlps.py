"""The mixture of expert MLPs."""
import torch
import torch.nn as nn

from .mlp import COOD_MLP, RES_MLP, ExpansionNet


class RESMLPS(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_list, coord_hidden_list):
        super().__init__()
        self.mlps = nn.ModuleList([RES_MLP(in_dim, out_dim, coord_hidden_list) for _ in range(10)])
        self.cood_mlp = COOD_MLP(2, 16, hidden_list)
        self.expansionNet = ExpansionNet(in_dim, 10, hidden_list)

    def forward(self, x, rel_coord):
        scores = self.expansionNet(x)
        cood_out = self.cood_mlp(rel_coord)
        res_list = [mlp(x, cood_out) for mlp in self.mlps]
        mlp_res = torch.stack(res_list)
        mlp_res = mlp_res.transpose(0, 1)
        return torch.sum(scores.unsqueeze(-1) * mlp_res, 1)
