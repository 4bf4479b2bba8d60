# Source: https://github.com/bayesiains/nflows/pull/11
# Category: graph-kept-alive
# Expect: silent: the flow's BatchNorm transform updates its running mean and variance buffers in place from the batch statistics without detaching them, so the buffers become part of the graph and chain every training step's graph together (memory grows, issue #10)
"""nflows' BatchNorm transform computes the batch mean and variance in training mode and blends them into the
running_mean/running_var buffers with in-place mul_/add_. The batch statistics carry the graph of the inputs, so
after the first step the buffers are non-leaf tensors that reference every earlier step. The fix detaches them."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class BatchNorm(nn.Module):
    def __init__(self, features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.momentum = momentum
        self.eps = eps
        self.unconstrained_weight = nn.Parameter(torch.zeros(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("running_mean", torch.zeros(features))
        self.register_buffer("running_var", torch.zeros(features))

    @property
    def weight(self):
        return nn.functional.softplus(self.unconstrained_weight) + self.eps

    def forward(self, inputs):
        if self.training:
            mean, var = inputs.mean(0), inputs.var(0)
            self.running_mean.mul_(1 - self.momentum).add_(mean * self.momentum)  # BUG: graph-kept-alive
            self.running_var.mul_(1 - self.momentum).add_(var * self.momentum)  # BUG: graph-kept-alive
        else:
            mean, var = self.running_mean, self.running_var
        outputs = self.weight * ((inputs - mean) / torch.sqrt(var + self.eps)) + self.bias
        logabsdet = (torch.log(self.weight) - 0.5 * torch.log(var + self.eps)).sum() * inputs.new_ones(inputs.shape[0])
        return outputs, logabsdet


class Flow(nn.Module):
    def __init__(self, features=4):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.norm = BatchNorm(features)

    def log_prob(self, x):
        z, logabsdet = self.norm(self.linear(x))
        base = -0.5 * (z ** 2).sum(1)
        return base + logabsdet


flow = Flow()
optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
for step in range(5):
    x = torch.randn(16, 4)
    optimizer.zero_grad()
    loss = -flow.log_prob(x).mean()
    loss.backward()
    optimizer.step()

running_mean = flow.norm.running_mean
print("running_mean requires grad:", running_mean.requires_grad)
assert running_mean.grad_fn is not None
print("EVIDENCE: the running_mean buffer has grad_fn", type(running_mean.grad_fn).__name__,
      "and chains the graphs of all 5 training steps")
