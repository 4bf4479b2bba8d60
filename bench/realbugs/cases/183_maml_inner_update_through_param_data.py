# Source: https://github.com/KanishJebaMathewM/Truxify/issues/13118
# Category: stray-detach
# Expect: silent: the MAML inner step writes the adapted weights through param.data, which autograd never sees, so the query loss has no path back to the meta-parameters: their .grad stays None and the outer optimizer never changes them
"""A MAML meta-learner adapts a copy of the model with `param.data -= inner_lr * grad` (the gradient itself taken
with create_graph=True), then sums the query losses of the adapted models and calls backward for the outer update.
The `.data` write cuts the adapted weights off the meta-parameters; the fix builds the adapted weights functionally
(`w - lr * g`) and runs the model with them (torch.func.functional_call)."""
import copy

import torch
import torch.nn as nn

torch.manual_seed(0)


class MetaLearner:
    def __init__(self, model, inner_lr=0.01, outer_lr=1e-3):
        self.model = model
        self.inner_lr = inner_lr
        self.criterion = nn.MSELoss()
        self.meta_optimizer = torch.optim.Adam(self.model.parameters(), lr=outer_lr)

    def inner_update(self, model, support_x, support_y):
        adapted_model = copy.deepcopy(model)
        loss = self.criterion(adapted_model(support_x), support_y)
        grads = torch.autograd.grad(loss, adapted_model.parameters(), create_graph=True)
        for param, grad in zip(adapted_model.parameters(), grads):
            param.data -= self.inner_lr * grad  # BUG: stray-detach
        return lambda x: adapted_model(x)

    def meta_train_step(self, tasks):
        meta_loss = 0.0
        for support_x, support_y, query_x, query_y in tasks:
            adapted = self.inner_update(self.model, support_x, support_y)
            meta_loss = meta_loss + self.criterion(adapted(query_x), query_y)
        self.meta_optimizer.zero_grad()
        meta_loss.backward()
        self.meta_optimizer.step()
        return meta_loss.item()


model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
learner = MetaLearner(model)
tasks = [(torch.randn(5, 3), torch.randn(5, 1), torch.randn(5, 3), torch.randn(5, 1)) for _ in range(4)]
before = [p.detach().clone() for p in model.parameters()]
learner.meta_train_step(tasks)
grads = [p.grad for p in model.parameters()]
changed = any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
print("meta-parameter grads:", [None if g is None else round(g.norm().item(), 4) for g in grads])
assert all(g is None for g in grads) and not changed
print("EVIDENCE: after a meta step every meta-parameter has .grad None and is unchanged")
