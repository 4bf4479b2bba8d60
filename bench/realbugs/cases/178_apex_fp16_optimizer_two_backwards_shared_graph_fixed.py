# Source: https://github.com/NVIDIA/apex/issues/85
# Category: backward-twice
# Expect: ok
"""Fixed twin: the first backward keeps the shared graph (retain_graph=True, the option apex added).
With apex's FP16_Optimizer the user calls `optimizer.backward(loss)` (which scales the loss and back-propagates)
once per loss, accumulating gradients with update_master_grads=False. Both losses come from the same forward, so
the first backward frees the graph the second one needs; FP16_Optimizer.backward had no way to pass
retain_graph, which apex then added (`optimizer.backward(loss1, update_master_grads=False, retain_graph=True)`)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class FP16_Optimizer:
    def __init__(self, init_optimizer, static_loss_scale=128.0):
        self.optimizer = init_optimizer
        self.loss_scale = static_loss_scale
        self.params = [p for g in init_optimizer.param_groups for p in g["params"]]

    def zero_grad(self):
        self.optimizer.zero_grad()

    def backward(self, loss, update_master_grads=True, retain_graph=False):
        scaled_loss = loss.float() * self.loss_scale
        scaled_loss.backward(retain_graph=retain_graph)
        if update_master_grads:
            self.update_master_grads()

    def update_master_grads(self):
        for p in self.params:
            if p.grad is not None:
                p.grad.div_(self.loss_scale)

    def step(self):
        self.optimizer.step()


class MultiTaskNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
        self.head_a = nn.Linear(16, 3)
        self.head_b = nn.Linear(16, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.head_a(h), self.head_b(h)


model = MultiTaskNet()
optimizer = FP16_Optimizer(torch.optim.SGD(model.parameters(), lr=0.1), static_loss_scale=128.0)
for step in range(2):
    x, y_a, y_b = torch.randn(4, 8), torch.randint(0, 3, (4,)), torch.randn(4, 1)
    out_a, out_b = model(x)
    loss1 = F.cross_entropy(out_a, y_a)
    loss2 = F.mse_loss(out_b, y_b)
    optimizer.zero_grad()
    optimizer.backward(loss1, update_master_grads=False, retain_graph=True)
    optimizer.backward(loss2, update_master_grads=False)
    optimizer.update_master_grads()
    optimizer.step()
    assert model.trunk[0].weight.grad is not None
