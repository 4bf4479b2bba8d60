# Source: https://github.com/meta-pytorch/torchforge/pull/71
# Category: missing-zero-grad
# Expect: ok
"""Fixed twin: the gradients are zeroed after every optimizer step, as in the PR.
torchforge's trainer actor wraps the model parts, optimizers and lr schedulers of a torchtitan-style engine;
its train_step() did forward_backward(), optimizers.step() and lr_schedulers.step() but never
optimizers.zero_grad(). Each step's gradients were added to all previous ones. The PR zeroes the gradients
after every step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class OptimizersContainer:
    def __init__(self, model_parts, lr):
        self.optimizers = [torch.optim.SGD(m.parameters(), lr=lr) for m in model_parts]

    def step(self):
        for opt in self.optimizers:
            opt.step()

    def zero_grad(self):
        for opt in self.optimizers:
            opt.zero_grad()


class LRSchedulersContainer:
    def __init__(self, optimizers):
        self.schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0) for o in optimizers.optimizers]

    def step(self):
        for s in self.schedulers:
            s.step()


class Engine:
    def __init__(self, model_parts, lr=0.1):
        self.model_parts = model_parts
        self.optimizers = OptimizersContainer(model_parts, lr)
        self.lr_schedulers = LRSchedulersContainer(self.optimizers)


class RLTrainer:
    def __init__(self, model):
        self.engine = Engine([model])
        self.current_step = 0
        self.grads_used = []

    def forward_backward(self, inputs, labels):
        model = self.engine.model_parts[0]
        loss = F.mse_loss(model(inputs), labels)
        loss.backward()
        return loss

    def train_step(self, inputs, labels):
        loss = self.forward_backward(inputs, labels)
        self.grads_used.append(self.engine.model_parts[0].weight.grad.clone())
        self.engine.optimizers.step()
        self.engine.optimizers.zero_grad()
        self.engine.lr_schedulers.step()
        self.current_step += 1
        return loss.item()


model = nn.Linear(4, 1)
trainer = RLTrainer(model)
batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
fresh = []
for inputs, labels in batches:
    (g,) = torch.autograd.grad(F.mse_loss(model(inputs), labels), model.weight)
    fresh.append(g)
    trainer.train_step(inputs, labels)

err = (trainer.grads_used[-1] - fresh[-1]).abs().max().item()
print("difference between the gradient used at step 3 and that step's own gradient:", err)
assert err < 1e-6
