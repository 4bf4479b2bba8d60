# Source: https://github.com/pytorch/pytorch/issues/140469
# Category: non-leaf-parameter
# Expect: raises ValueError: can't optimize a non-leaf Tensor
"""Dataset distillation: the learnable synthetic images are created with requires_grad=True and
then scaled by 0.01 on the same line, so the tensor handed to SGD is a non-leaf product."""
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

args = types.SimpleNamespace(dlipc=2, dldevice=torch.device("cpu"), dllr_img=0.1, iterations=3)
num_classes, channel, im_size = 3, 1, (8, 8)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(channel, 4, 3, padding=1)
        self.fc = nn.Linear(4 * im_size[0] * im_size[1], num_classes)

    def forward(self, x):
        return self.fc(F.relu(self.conv(x)).flatten(1))


def match_loss(gw_syn, gw_real):
    return sum(((a - b) ** 2).sum() for a, b in zip(gw_syn, gw_real))


net = ConvNet().to(args.dldevice)
images_real = torch.randn(12, channel, *im_size, device=args.dldevice)
labels_real = torch.randint(0, num_classes, (12,), device=args.dldevice)

image_syn = torch.randn(size=(num_classes * args.dlipc, channel, im_size[0], im_size[1]), dtype=torch.float, requires_grad=True, device=args.dldevice) * 0.01  # BUG: non-leaf-parameter
label_syn = torch.arange(num_classes, device=args.dldevice).repeat_interleave(args.dlipc)
optimizer_img = torch.optim.SGD([image_syn, ], lr=args.dllr_img, momentum=0.5)

criterion = nn.CrossEntropyLoss()
params = list(net.parameters())
for it in range(args.iterations):
    loss_real = criterion(net(images_real), labels_real)
    gw_real = [g.detach() for g in torch.autograd.grad(loss_real, params)]
    loss_syn = criterion(net(image_syn), label_syn)
    gw_syn = torch.autograd.grad(loss_syn, params, create_graph=True)
    loss = match_loss(gw_syn, gw_real)
    optimizer_img.zero_grad()
    loss.backward()
    optimizer_img.step()
print("distilled", image_syn.shape)
