# Source: https://github.com/KanishJebaMathewM/Truxify/issues/13118
# Category: stray-detach
# Expect: ok
"""The MAML meta-learner after the fix: the inner step builds the adapted weights as `w - lr * g` from the
meta-parameters and runs the model with them through torch.func.functional_call, so the query loss back-propagates
through the adaptation into the meta-parameters."""
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
        params = dict(model.named_parameters())
        loss = self.criterion(model(support_x), support_y)
        grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
        adapted = {name: p - self.inner_lr * g for (name, p), g in zip(params.items(), grads)}
        return lambda x: torch.func.functional_call(model, adapted, (x,))

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
assert all(g is not None for g in grads) and changed
