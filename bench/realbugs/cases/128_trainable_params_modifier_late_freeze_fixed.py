# Source: https://github.com/neuralmagic/sparseml/issues/965
# Category: freeze-after-backward
# Expect: ok
"""The TrainableParamsModifier after the merged fix: disabling a parameter also clears its .grad ("clear to prevent
optimizer updates"), so freezing from inside the wrapped optimizer's step() really keeps the layer fixed."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TrainableParamsModifier:
    def __init__(self, params, trainable, start_epoch=-1.0, end_epoch=-1.0):
        self._params = params
        self._trainable = trainable
        self._start_epoch = start_epoch
        self._end_epoch = end_epoch
        self._module_params = []
        self._original = []
        self._started = False

    def initialize(self, module, epoch=0.0):
        for name, param in module.named_parameters():
            if any(name.startswith(p) for p in self._params):
                self._module_params.append(param)

    def start_pending(self, epoch, steps_per_epoch):
        return not self._started and epoch >= self._start_epoch

    def _enable(self, param):
        param.requires_grad_(True)

    def _disable(self, param):
        param.requires_grad_(False)
        param.grad = None  # clear to prevent optimizer updates

    def update(self, module, optimizer, epoch, steps_per_epoch):
        if self.start_pending(epoch, steps_per_epoch):
            self._started = True
            self._original.clear()
            for param in self._module_params:
                self._original.append(param.requires_grad)
                self._enable(param) if self._trainable else self._disable(param)


class ScheduledOptimizer:
    def __init__(self, optimizer, module, modifier, steps_per_epoch):
        self._optimizer = optimizer
        self._module = module
        self._modifier = modifier
        self._steps_per_epoch = steps_per_epoch
        self._step = 0
        modifier.initialize(module, epoch=0.0)

    def zero_grad(self):
        self._optimizer.zero_grad()

    def step(self):
        epoch = self._step / self._steps_per_epoch
        self._modifier.update(self._module, self._optimizer, epoch, self._steps_per_epoch)
        self._optimizer.step()
        self._step += 1


model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))
frozen_before = model[0].weight.detach().clone()
trained_before = model[2].weight.detach().clone()
steps_per_epoch = 4
modifier = TrainableParamsModifier(params=["0."], trainable=False, start_epoch=0.0)
optimizer = ScheduledOptimizer(torch.optim.Adam(model.parameters(), lr=1e-2), model, modifier, steps_per_epoch)
criterion = nn.CrossEntropyLoss()

for epoch in range(2):
    for _ in range(steps_per_epoch):
        x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

drift = (model[0].weight.detach() - frozen_before).abs().max().item()
print("requires_grad of frozen layer:", model[0].weight.requires_grad, "| max drift of its weights:", drift)
assert not model[0].weight.requires_grad
assert drift == 0.0
assert not torch.equal(trained_before, model[2].weight)
