# Source: https://github.com/locuslab/convex_adversarial/issues/34
# Category: backward-without-graph
# Expect: raises RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""A certified-robustness repo's `evaluate_robust` turns autograd off with `torch.set_grad_enabled(False)` for the whole
evaluation; the reporter un-commented the PGD-attack line inside it, and the attack's `loss.backward()` failed."""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable

torch.manual_seed(0)


class Flatten(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), -1)


class AverageMeter(object):
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def robust_loss(model, epsilon, X, y):
    # stand-in for the dual-network bound: worst case over the two corners of the box
    out = torch.min(model(X - epsilon), model(X + epsilon))
    ce = nn.CrossEntropyLoss()(out, y)
    err = (out.max(1)[1] != y).float().mean()
    return ce, err


def _pgd(model, X, y, epsilon, niters=10, alpha=0.01):
    out = model(X)
    ce = nn.CrossEntropyLoss()(out, y)
    err = (out.data.max(1)[1] != y.data).float().sum() / X.size(0)

    X_pgd = Variable(X.data, requires_grad=True)
    for i in range(niters):
        opt = optim.Adam([X_pgd], lr=1e-3)
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(X_pgd), y)
        loss.backward()
        eta = alpha * X_pgd.grad.data.sign()
        X_pgd = Variable(X_pgd.data + eta, requires_grad=True)

        eta = torch.clamp(X_pgd.data - X.data, -epsilon, epsilon)
        X_pgd = Variable(X.data + eta, requires_grad=True)

    err_pgd = (model(X_pgd).data.max(1)[1] != y.data).float().sum() / X.size(0)
    return err, err_pgd


def evaluate_robust(loader, model, epsilon, epoch, verbose=False):
    robust_errors = AverageMeter()
    errors = AverageMeter()
    pgd_errors = AverageMeter()
    model.eval()
    torch.set_grad_enabled(False)
    for i, (X, y) in enumerate(loader):
        y = y.long()
        robust_ce, robust_err = robust_loss(model, epsilon, Variable(X), Variable(y))
        out = model(Variable(X))
        err = (out.data.max(1)[1] != y).float().sum() / X.size(0)
        _, pgd_err = _pgd(model, Variable(X), Variable(y), epsilon)  # BUG: backward-without-graph

        robust_errors.update(robust_err.item(), X.size(0))
        errors.update(err.item(), X.size(0))
        pgd_errors.update(pgd_err.item(), X.size(0))
        if verbose:
            print(epoch, i, robust_err.item(), err.item(), pgd_err.item())
    torch.set_grad_enabled(True)
    return robust_errors.avg, errors.avg, pgd_errors.avg


model = nn.Sequential(Flatten(), nn.Linear(28 * 28, 32), nn.ReLU(), nn.Linear(32, 10))
test_loader = [(torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))) for _ in range(2)]
robust_err, err, pgd_err = evaluate_robust(test_loader, model, epsilon=0.1, epoch=0)
assert torch.is_grad_enabled()
assert 0.0 <= pgd_err <= 1.0 and pgd_err >= err - 1e-6
print("OK: clean error %.3f, PGD error %.3f, bound error %.3f" % (err, pgd_err, robust_err))
