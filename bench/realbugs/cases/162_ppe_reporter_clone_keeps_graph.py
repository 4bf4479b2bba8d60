# Source: https://github.com/pfnet/pytorch-pfn-extras/pull/49
# Category: graph-kept-alive
# Expect: silent: the reporter copies reported tensors with clone(), which stays attached to the loss's graph, so the summary that averages the reported loss over the logging interval keeps every iteration's graph
"""pytorch-pfn-extras' Reporter copies every reported value so that later in-place changes do not alter the record;
it used `value.clone()`, which is differentiable, so a reported training loss keeps its autograd graph, and the
LogReport summary that sums the observations keeps all of them alive. The PR uses `value.detach()` instead."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Summary:
    def __init__(self):
        self._x = 0.0
        self._n = 0

    def add(self, value):
        self._x = self._x + value
        self._n += 1

    def compute_mean(self):
        return self._x / self._n


class Reporter:
    def __init__(self):
        self.observation = {}

    def report(self, values):
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                value = value.clone()  # BUG: graph-kept-alive
            self.observation[key] = value


class LogReport:
    def __init__(self):
        self._summary = Summary()

    def __call__(self, observation):
        self._summary.add(observation["main/loss"])


reporter = Reporter()
log_report = LogReport()
model = nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for iteration in range(5):
    x, t = torch.randn(4, 8), torch.randint(0, 2, (4,))
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), t)
    reporter.report({"main/loss": loss})
    loss.backward()
    optimizer.step()
    log_report(reporter.observation)

mean_loss = log_report._summary.compute_mean()
print("mean loss over the interval:", mean_loss.item())
assert mean_loss.grad_fn is not None
print("EVIDENCE: the LogReport summary has grad_fn", type(mean_loss.grad_fn).__name__,
      "and keeps the graphs of all 5 iterations alive")
