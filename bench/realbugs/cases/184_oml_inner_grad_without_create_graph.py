# Source: https://github.com/kjaved0/mrcl/issues/15
# Category: grad-without-create-graph
# Expect: silent: the inner-loop gradient is taken without create_graph=True, so it enters the fast weights as a constant and the meta-gradient silently drops the second-order term (a first-order approximation, not the MAML/OML gradient)
"""OML's meta-learner adapts fast weights with `grad = torch.autograd.grad(loss, fast_weights)` and then
back-propagates the meta loss through `fast_weights = w - lr * grad`. Without create_graph the gradient is a leaf
constant; the author: set create_graph=True (and only for the adapted parameters) to get the correct meta-gradient."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)


class Learner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.vars = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(16, 4) * 0.3),
                                            torch.nn.Parameter(torch.zeros(16)),
                                            torch.nn.Parameter(torch.randn(3, 16) * 0.3),
                                            torch.nn.Parameter(torch.zeros(3))])

    def forward(self, x, vars=None):
        w1, b1, w2, b2 = self.vars if vars is None else vars
        return F.linear(torch.tanh(F.linear(x, w1, b1)), w2, b2)


class MetaLearningClassification:
    def __init__(self, net, update_lr=0.1, update_step=3):
        self.net, self.update_lr, self.update_step = net, update_lr, update_step

    def inner_update(self, x, y, fast_weights):
        loss = F.cross_entropy(self.net(x, fast_weights), y)
        grad = torch.autograd.grad(loss, fast_weights)  # BUG: grad-without-create-graph
        return [w - self.update_lr * g for w, g in zip(fast_weights, grad)]

    def meta_loss(self, x_traj, y_traj, x_rand, y_rand):
        fast_weights = list(self.net.parameters())
        for k in range(self.update_step):
            fast_weights = self.inner_update(x_traj[k], y_traj[k], fast_weights)
        return F.cross_entropy(self.net(x_rand, fast_weights), y_rand)


net = Learner()
meta = MetaLearningClassification(net)
x_traj, y_traj = torch.randn(3, 5, 4), torch.randint(0, 3, (3, 5))
x_rand, y_rand = torch.randn(10, 4), torch.randint(0, 3, (10,))
meta.meta_loss(x_traj, y_traj, x_rand, y_rand).backward()
used = net.vars[0].grad.clone()


def true_meta_grad():  # the same unrolled inner loop, differentiated through the inner gradients
    fast = list(net.parameters())
    for k in range(meta.update_step):
        loss = F.cross_entropy(net(x_traj[k], fast), y_traj[k])
        g = torch.autograd.grad(loss, fast, create_graph=True)
        fast = [w - meta.update_lr * gi for w, gi in zip(fast, g)]
    return torch.autograd.grad(F.cross_entropy(net(x_rand, fast), y_rand), net.vars[0])[0]


gap = (used - true_meta_grad()).abs().max().item()
print("max |meta-gradient used - full meta-gradient| =", gap)
assert gap > 1e-4
print("EVIDENCE: the meta-gradient misses the second-order term (off by", round(gap, 5), ")")
