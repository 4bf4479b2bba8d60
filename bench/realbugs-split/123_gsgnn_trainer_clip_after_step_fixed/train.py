# Source: https://github.com/awslabs/graphstorm/issues/1366
# Category: clip-after-step
# Expect: ok
"""The node-prediction trainer after the fix: backward -> clip_grad_norm_ -> step, so each SGD update is bounded
by lr * max_grad_norm."""
import torch as th

from graphstorm.model import GSgnnNodeModel
from graphstorm.trainer import GSgnnNodePredictionTrainer

th.manual_seed(0)


def make_loader(n_batches=4, n=12, in_dim=8, n_classes=3):
    batches = []
    for _ in range(n_batches):
        adj = (th.rand(n, n) < 0.3).float() + th.eye(n)
        adj = adj / adj.sum(1, keepdim=True)
        batches.append((adj, 50.0 * th.randn(n, in_dim), th.randint(0, n_classes, (n,))))
    return batches


lr, max_grad_norm = 0.01, 1.0
trainer = GSgnnNodePredictionTrainer(GSgnnNodeModel(8, 16, 3), lr=lr)
trainer.fit(make_loader(), num_epochs=2, max_grad_norm=max_grad_norm)
largest = max(trainer.update_norms)
print(f"largest parameter update {largest:.4f}; bound with clipping lr*max_grad_norm = {lr * max_grad_norm:.4f}")
assert largest <= lr * max_grad_norm * (1 + 1e-4)
assert min(trainer.update_norms) > 0
