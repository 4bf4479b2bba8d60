"""Robust evaluation."""
import torch
import torch.nn as nn
from torch.autograd import Variable


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


def evaluate_robust(loader, model, epsilon, epoch, verbose=False):
    from attacks import _pgd  # loaded on first use: only the PGD evaluation needs it

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
