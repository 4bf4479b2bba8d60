# Source: https://github.com/huawei-noah/AdderNet/issues/21
# Category: function-backward-arity
# Expect: raises RuntimeError: returned an incorrect number of gradients (expected 2, got 1)
"""AdderNet's adder2d layer uses a custom autograd Function whose backward computes grad_W_col and
grad_X_col but never returns them, so training died at the first loss.backward() (a commenter
pointed out the missing `return grad_W_col, grad_X_col`)."""
import torch
import torch.nn as nn

from resnet20 import ResNetTiny

torch.manual_seed(0)

net = ResNetTiny()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)


def train(epoch):
    net.train()
    for batch_idx in range(2):
        images = torch.randn(4, 3, 8, 8)
        labels = torch.randint(0, 10, (4,))
        optimizer.zero_grad()
        output = net(images)
        loss = criterion(output, labels)
        loss.backward()
        optimizer.step()
        print("epoch", epoch, "batch", batch_idx, "loss %.4f" % loss.item())


for e in range(1):
    train(e)
