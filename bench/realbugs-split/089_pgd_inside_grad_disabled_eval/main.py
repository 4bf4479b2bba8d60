# Source: https://github.com/locuslab/convex_adversarial/issues/34
# Category: backward-without-graph
# Expect: raises RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""A certified-robustness repo's `evaluate_robust` turns autograd off with `torch.set_grad_enabled(False)` for the whole
evaluation; the reporter un-commented the PGD-attack line inside it, and the attack's `loss.backward()` failed."""
import torch
import torch.nn as nn

from trainer import evaluate_robust

torch.manual_seed(0)


class Flatten(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), -1)


model = nn.Sequential(Flatten(), nn.Linear(28 * 28, 32), nn.ReLU(), nn.Linear(32, 10))
test_loader = [(torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))) for _ in range(2)]
robust_err, err, pgd_err = evaluate_robust(test_loader, model, epsilon=0.1, epoch=0)
assert torch.is_grad_enabled()
assert 0.0 <= pgd_err <= 1.0 and pgd_err >= err - 1e-6
print("OK: clean error %.3f, PGD error %.3f, bound error %.3f" % (err, pgd_err, robust_err))
