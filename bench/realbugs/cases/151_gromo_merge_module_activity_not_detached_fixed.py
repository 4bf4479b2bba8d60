# Source: https://github.com/growingnet/gromo/issues/135
# Category: graph-kept-alive
# Expect: ok
"""The merge module with the issue's fix: self.activity = y.detach(), so the growth statistics hold values,
not graphs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class TensorStatistic:
    def __init__(self, dim):
        self._S = torch.zeros(dim, dim)
        self.samples = 0
        self.updated = True

    def update(self, x):
        self._S = self._S + x.T @ x
        self.samples += x.size(0)
        self.updated = True

    def __call__(self):
        return self._S / max(self.samples, 1)


class MergeGrowingModule(nn.Module):
    def __init__(self, dim, post_merge_function=None):
        super().__init__()
        self.post_merge_function = post_merge_function
        self.store_activity = 0
        self.activity = None
        self.tensor_s = TensorStatistic(dim)

    def forward(self, x):
        y = self.post_merge_function(x) if self.post_merge_function is not None else x
        if self.store_activity > 0:
            self.activity = y.detach()
            self.tensor_s.updated = False
        return y

    def update_statistics(self):
        self.tensor_s.update(self.activity)


class GrowingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.merge = MergeGrowingModule(16, post_merge_function=F.relu)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.merge(self.fc1(x)))


net = GrowingNet()
net.merge.store_activity = 1
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(4):
    x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    net.merge.update_statistics()
S = net.merge.tensor_s()
print("S statistic trace", S.trace().item())
assert S.grad_fn is None and net.merge.activity.grad_fn is None
