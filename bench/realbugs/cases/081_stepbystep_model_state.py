# Source: https://github.com/dvgodoy/PyTorchStepByStep/pull/28
# Category: state-dict-alias
# Expect: silent: model_state is the live state_dict, so the Adam run does not start from the initial weights but from where SGD ended
"""A deep-learning book compares SGD and Adam from the same starting point: it stores `model_state = model.state_dict()`
and calls `model.load_state_dict(model_state)` before each run; the reader found the second run started from the first run's result."""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(42)


class StepByStep(object):
    def __init__(self, model, loss_fn, optimizer):
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.device = torch.device("cpu")
        self.model.to(self.device)
        self.train_loader = None
        self.val_loader = None
        self.losses = []
        self.val_losses = []
        self.total_epochs = 0
        self.train_step_fn = self._make_train_step_fn()
        self.val_step_fn = self._make_val_step_fn()

    def set_loaders(self, train_loader, val_loader=None):
        self.train_loader = train_loader
        self.val_loader = val_loader

    def _make_train_step_fn(self):
        def perform_train_step_fn(x, y):
            self.model.train()
            yhat = self.model(x)
            loss = self.loss_fn(yhat, y)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            return loss.item()
        return perform_train_step_fn

    def _make_val_step_fn(self):
        def perform_val_step_fn(x, y):
            self.model.eval()
            yhat = self.model(x)
            loss = self.loss_fn(yhat, y)
            return loss.item()
        return perform_val_step_fn

    def _mini_batch(self, validation=False):
        if validation:
            data_loader, step_fn = self.val_loader, self.val_step_fn
        else:
            data_loader, step_fn = self.train_loader, self.train_step_fn
        mini_batch_losses = []
        for x_batch, y_batch in data_loader:
            x_batch = x_batch.to(self.device)
            y_batch = y_batch.to(self.device)
            mini_batch_losses.append(step_fn(x_batch, y_batch))
        return np.mean(mini_batch_losses)

    def train(self, n_epochs, seed=42):
        torch.manual_seed(seed)
        for epoch in range(n_epochs):
            self.total_epochs += 1
            self.losses.append(self._mini_batch(validation=False))
            with torch.no_grad():
                self.val_losses.append(self._mini_batch(validation=True))


true_b, true_w = 1.0, 2.0
x = torch.rand(100, 1)
y = true_b + true_w * x + 0.1 * torch.randn(100, 1)
train_loader = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 80, 16)]
val_loader = [(x[80:], y[80:])]

model = nn.Sequential()
model.add_module("linear", nn.Linear(1, 1))
loss_fn = nn.MSELoss(reduction="mean")
initial_weight = model.linear.weight.detach().clone()

model_state = model.state_dict()  # BUG: state-dict-alias

runs = {}
for name, make_optimizer in [("SGD", lambda p: optim.SGD(p, lr=0.1)), ("Adam", lambda p: optim.Adam(p, lr=0.1))]:
    model.load_state_dict(model_state)
    start_weight = model.linear.weight.detach().clone()
    optimizer = make_optimizer(model.parameters())
    sbs = StepByStep(model, loss_fn, optimizer)
    sbs.set_loaders(train_loader, val_loader)
    sbs.train(10)
    runs[name] = (start_weight, sbs.losses)

adam_start = runs["Adam"][0]
assert not torch.equal(adam_start, initial_weight)
print("EVIDENCE: the Adam run started at w=%.4f instead of the initial w=%.4f" % (adam_start.item(), initial_weight.item()))
