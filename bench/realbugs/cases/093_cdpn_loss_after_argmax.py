# Source: https://github.com/LZGMatrix/BOP19_CDPN_2019ICCV/issues/4
# Category: nondifferentiable-op
# Expect: raises RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
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

for step in range(2):
    inp = torch.rand(1, 3, 16, 16).to(device)
    target_coor = (torch.rand(16, 16, 3) * 2 - 1).to(device)

    output_conf, output_coor_x_, output_coor_y_, output_coor_z_ = model(inp)
    output_coor_x_ = output_coor_x_.squeeze()
    output_coor_y_ = output_coor_y_.squeeze()
    output_coor_z_ = output_coor_z_.squeeze()

    output_coor_ = torch.stack([torch.argmax(output_coor_x_, axis=0),  # BUG: nondifferentiable-op
                                torch.argmax(output_coor_y_, axis=0),
                                torch.argmax(output_coor_z_, axis=0)], axis=2)
    output_coor_[output_coor_ == cfg.network.coor_bin] = 0
    output_coor_ = 2.0 * output_coor_.float() / (63.0 - 1.0) - 1.0
    loss = criterion(output_coor_, target_coor)  # BUG: nondifferentiable-op

    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

assert model.rot_head.weight.grad is not None
print("OK: coordinate-bin loss %.4f backpropagated into the network" % loss.item())
