# Source: https://github.com/LianpoWang/SLIIF/issues/13
# Category: unregistered-submodule
# Expect: silent: the ten RES_MLP experts sit in a plain Python list, so they are not in parameters()/state_dict() and never train
"""An implicit-image-function super-resolution model keeps its ten expert MLPs as `self.mlps = [RES_MLP(...) for _ in range(10)]`
(and mixes their outputs through a NumPy round trip); a reader noted the experts are invisible to the optimizer, `.to()` and state_dict."""
import torch
import torch.nn as nn

torch.manual_seed(0)
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


class RESMLPS(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_list, coord_hidden_list):
        super().__init__()
        self.mlps = [RES_MLP(in_dim, out_dim, coord_hidden_list) for _ in range(10)]  # BUG: unregistered-submodule
        self.cood_mlp = COOD_MLP(2, 16, hidden_list)
        self.expansionNet = ExpansionNet(in_dim, 10, hidden_list)

    def forward(self, x, rel_coord):
        scores = self.expansionNet(x)
        cood_out = self.cood_mlp(rel_coord)
        res_list = [mlp(x, cood_out).cpu().detach().numpy() for mlp in self.mlps]  # BUG: numpy-roundtrip
        mlp_res = torch.tensor(res_list).to(device)  # BUG: numpy-roundtrip
        mlp_res = mlp_res.transpose(0, 1)
        return torch.sum(scores.unsqueeze(-1) * mlp_res, 1)


imnet = RESMLPS(in_dim=20, out_dim=3, hidden_list=[32], coord_hidden_list=[16]).to(device)
optimizer = torch.optim.Adam(imnet.parameters(), lr=1e-3)
expert_before = imnet.mlps[0].linear_out.weight.detach().clone()

for step in range(5):
    feat = torch.randn(64, 20)
    rel_coord = torch.rand(64, 2) * 2 - 1
    gt = torch.rand(64, 3)
    pred = imnet(feat, rel_coord)
    loss = torch.abs(pred - gt).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

registered = {id(p) for p in imnet.parameters()}
assert not any(id(p) in registered for p in imnet.mlps[0].parameters())
assert not any(k.startswith("mlps") for k in imnet.state_dict())
assert torch.equal(expert_before, imnet.mlps[0].linear_out.weight) and imnet.mlps[0].linear_out.weight.grad is None
print("EVIDENCE: the 10 expert MLPs are missing from parameters() and state_dict() (%d keys) and never change" % len(imnet.state_dict()))
