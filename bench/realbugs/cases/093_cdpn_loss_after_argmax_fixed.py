# Source: https://github.com/LZGMatrix/BOP19_CDPN_2019ICCV/issues/4
# Category: nondifferentiable-op
# Expect: ok
"""A user writing a training script for a 6D-pose network (per-pixel coordinates predicted as bins) copied the test-time decoding
(`torch.argmax` over the bins, rescale to [-1, 1]) and put the loss after it; `loss.backward()` failed, because argmax has no gradient."""
import torch
import torch.nn as nn


class Cfg:
    class network:
        coor_bin = 64


cfg = Cfg()
torch.manual_seed(0)
device = torch.device("cpu")


class CDPN(nn.Module):
    def __init__(self, coor_bin):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU())
        self.rot_head = nn.Conv2d(16, 1 + 3 * (coor_bin + 1), 1)
        self.coor_bin = coor_bin

    def forward(self, x):
        out = self.rot_head(self.backbone(x))
        conf = out[:, :1]
        coor_x, coor_y, coor_z = out[:, 1:].split(self.coor_bin + 1, dim=1)
        return conf, coor_x, coor_y, coor_z


model = CDPN(cfg.network.coor_bin).to(device)
model.train()
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-4)
criterion = nn.L1Loss()
ce = nn.CrossEntropyLoss()

for step in range(2):
    inp = torch.rand(1, 3, 16, 16).to(device)
    target_coor = (torch.rand(16, 16, 3) * 2 - 1).to(device)

    output_conf, output_coor_x_, output_coor_y_, output_coor_z_ = model(inp)
    output_coor_x_ = output_coor_x_.squeeze()
    output_coor_y_ = output_coor_y_.squeeze()
    output_coor_z_ = output_coor_z_.squeeze()

    # classify each pixel's coordinate bin: the loss is taken on the logits, before any argmax
    target_bins = ((target_coor + 1.0) / 2.0 * (63.0 - 1.0)).round().long()
    loss = (ce(output_coor_x_.unsqueeze(0), target_bins[..., 0].unsqueeze(0))
            + ce(output_coor_y_.unsqueeze(0), target_bins[..., 1].unsqueeze(0))
            + ce(output_coor_z_.unsqueeze(0), target_bins[..., 2].unsqueeze(0)))

    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

assert model.rot_head.weight.grad is not None
print("OK: coordinate-bin loss %.4f backpropagated into the network" % loss.item())
