# Source: https://github.com/pytorch/pytorch/issues/140469
# Category: non-leaf-parameter
# Expect: ok
"""Dataset distillation with the fix: scale the random images first, then make the scaled tensor
the leaf that requires grad, so SGD accepts it and the synthetic images get updated."""
import torch
import torch.nn as nn

from synthetic import image_syn, label_syn
from utils import ConvNet, args, channel, im_size, match_loss, num_classes

torch.manual_seed(0)

net = ConvNet().to(args.dldevice)
images_real = torch.randn(12, channel, *im_size, device=args.dldevice)
labels_real = torch.randint(0, num_classes, (12,), device=args.dldevice)

start = image_syn.detach().clone()
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
assert image_syn.is_leaf and image_syn.grad is not None
assert not torch.equal(start, image_syn.detach()), "synthetic images never moved"
print("distilled", image_syn.shape)
