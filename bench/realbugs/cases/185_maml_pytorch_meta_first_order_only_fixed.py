# Source: https://github.com/dragen1860/MAML-Pytorch/issues/63
# Category: grad-without-create-graph
# Expect: ok
"""MAML-Pytorch's inner loop with create_graph=True, so the query loss differentiates through the inner
gradient steps and the meta update is the second-order MAML gradient."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Learner(nn.Module):
    def __init__(self, n_way=3):
        super().__init__()
        self.vars = nn.ParameterList([nn.Parameter(torch.randn(8, 1, 3, 3) * 0.3), nn.Parameter(torch.zeros(8)),
                                      nn.Parameter(torch.randn(n_way, 8 * 4 * 4) * 0.1), nn.Parameter(torch.zeros(n_way))])

    def forward(self, x, vars=None):
        w, b, fw, fb = self.vars if vars is None else vars
        x = F.max_pool2d(F.relu(F.conv2d(x, w, b)), 2)
        return F.linear(x.flatten(1), fw, fb)


class Meta(nn.Module):
    def __init__(self, update_lr=0.4, meta_lr=1e-3, update_step=2):
        super().__init__()
        self.update_lr, self.update_step = update_lr, update_step
        self.net = Learner()
        self.meta_optim = torch.optim.Adam(self.net.parameters(), lr=meta_lr)

    def adapt(self, x_spt, y_spt):
        fast_weights = list(self.net.parameters())
        for k in range(self.update_step):
            loss = F.cross_entropy(self.net(x_spt, fast_weights), y_spt)
            grad = torch.autograd.grad(loss, fast_weights, create_graph=True)
            fast_weights = list(map(lambda p: p[1] - self.update_lr * p[0], zip(grad, fast_weights)))
        return fast_weights

    def forward(self, x_spt, y_spt, x_qry, y_qry):
        task_num = x_spt.size(0)
        loss_q = 0
        for i in range(task_num):
            fast_weights = self.adapt(x_spt[i], y_spt[i])
            loss_q = loss_q + F.cross_entropy(self.net(x_qry[i], fast_weights), y_qry[i])
        loss_q = loss_q / task_num
        self.meta_optim.zero_grad()
        loss_q.backward()
        grads = [p.grad.clone() for p in self.net.parameters()]
        self.meta_optim.step()
        return grads


def second_order_grad(meta, x_spt, y_spt, x_qry, y_qry):
    loss_q = 0
    for i in range(x_spt.size(0)):
        fast = list(meta.net.parameters())
        for k in range(meta.update_step):
            g = torch.autograd.grad(F.cross_entropy(meta.net(x_spt[i], fast), y_spt[i]), fast, create_graph=True)
            fast = [w - meta.update_lr * gi for w, gi in zip(fast, g)]
        loss_q = loss_q + F.cross_entropy(meta.net(x_qry[i], fast), y_qry[i])
    return torch.autograd.grad(loss_q / x_spt.size(0), list(meta.net.parameters()))


maml = Meta()
x_spt, y_spt = torch.randn(2, 6, 1, 10, 10), torch.randint(0, 3, (2, 6))
x_qry, y_qry = torch.randn(2, 6, 1, 10, 10), torch.randint(0, 3, (2, 6))
expected = second_order_grad(maml, x_spt, y_spt, x_qry, y_qry)
used = maml(x_spt, y_spt, x_qry, y_qry)
gap = max((u - e).abs().max().item() for u, e in zip(used, expected))
print("max |meta-gradient used - second-order meta-gradient| =", gap)
assert gap < 1e-5
