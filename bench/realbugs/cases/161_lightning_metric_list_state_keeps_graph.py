# Source: https://github.com/Lightning-AI/pytorch-lightning/pull/4313
# Category: graph-kept-alive
# Expect: silent: Metric.forward accumulates the epoch-level state with autograd on, so a differentiable metric used in training_step stores every batch's prediction together with its graph until compute() at the end of the epoch
"""Lightning's Metric.forward() updates the accumulated (epoch) state and then computes the batch value. A
differentiable Dice metric called in training_step appends y_hat to a list state; because the accumulating
update ran with grad enabled, the list holds every batch's graph (memory grows over the epoch, issue #4098). The
fix runs the accumulating update under torch.no_grad() and detaches what is logged."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Metric(nn.Module):
    def __init__(self, compute_on_step=True):
        super().__init__()
        self.compute_on_step = compute_on_step
        self._defaults = {}
        self._forward_cache = None

    def add_state(self, name, default):
        self._defaults[name] = default
        setattr(self, name, list(default) if isinstance(default, list) else default.clone())

    def reset(self):
        for name, default in self._defaults.items():
            setattr(self, name, list(default) if isinstance(default, list) else default.clone())

    def forward(self, *args, **kwargs):
        self.update(*args, **kwargs)  # BUG: graph-kept-alive
        if self.compute_on_step:
            cache = {attr: getattr(self, attr) for attr in self._defaults}
            self.reset()
            self.update(*args, **kwargs)
            self._forward_cache = self.compute()
            for attr, val in cache.items():
                setattr(self, attr, val)
            return self._forward_cache


class DifferentiableDiceCoefficient(Metric):
    def __init__(self):
        super().__init__()
        self.add_state("preds", default=[])
        self.add_state("target", default=[])

    def update(self, preds, target):
        self.preds.append(preds)
        self.target.append(target)

    def compute(self):
        p, t = torch.cat(self.preds), torch.cat(self.target)
        return 2 * (p * t).sum() / (p.sum() + t.sum() + 1e-6)


class SegModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.module = nn.Conv2d(1, 1, 3, padding=1)
        self._dice = DifferentiableDiceCoefficient()

    def training_step(self, batch, batch_idx):
        x, y = batch
        y_hat = torch.sigmoid(self.module(x))
        dice = self._dice(y_hat, y)
        return 1 - dice


model = SegModule()
optimizer = torch.optim.SGD(model.module.parameters(), lr=0.1)
batches = [(torch.randn(2, 1, 8, 8), (torch.rand(2, 1, 8, 8) > 0.5).float()) for _ in range(4)]
for batch_idx, batch in enumerate(batches):
    loss = model.training_step(batch, batch_idx)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
held = [p for p in model._dice.preds if p.grad_fn is not None]
print("accumulated predictions:", len(model._dice.preds), "with a graph:", len(held))
assert len(held) == len(batches)
print("EVIDENCE: the metric's epoch state holds", len(held), "predictions with grad_fn",
      type(held[0].grad_fn).__name__, "(one graph per training batch)")
