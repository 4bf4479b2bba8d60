# Source: https://github.com/LianpoWang/SLIIF/issues/13
# Category: unregistered-submodule
# Expect: silent: the ten RES_MLP experts sit in a plain Python list, so they are not in parameters()/state_dict() and never train
"""An implicit-image-function super-resolution model keeps its ten expert MLPs as `self.mlps = [RES_MLP(...) for _ in range(10)]`
(and mixes their outputs through a NumPy round trip); a reader noted the experts are invisible to the optimizer, `.to()` and state_dict."""
import torch

from models.mlp import device
from models.resmlps import RESMLPS

torch.manual_seed(0)

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
