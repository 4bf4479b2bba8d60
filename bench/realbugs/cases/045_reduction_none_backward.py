# Source: https://blog.csdn.net/cyj972628089/article/details/122732509
# Category: nonscalar-backward
# Expect: raises RuntimeError: grad can be implicitly created only for scalar outputs
"""The author defined the criterion as CrossEntropyLoss(reduction='none') and called backward
on its per-sample loss vector inside an epoch-training helper."""
import torch
from torch import nn

torch.manual_seed(0)

net = nn.Sequential(nn.Flatten(), nn.Linear(16, 10))
loss = nn.CrossEntropyLoss(reduction='none')
trainer = torch.optim.SGD(net.parameters(), lr=0.1)


def train_epoch(net, train_iter, loss, updater):
    net.train()
    total, n = 0.0, 0
    for X, y in train_iter:
        y_hat = net(X)
        l = loss(y_hat, y)
        updater.zero_grad()
        l.backward()  # BUG: nonscalar-backward
        updater.step()
        total += l.sum().item()
        n += y.numel()
    return total / n


train_iter = [(torch.randn(8, 4, 4), torch.randint(0, 10, (8,))) for _ in range(3)]
for epoch in range(2):
    print(epoch, train_epoch(net, train_iter, loss, trainer))
