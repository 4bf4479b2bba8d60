"""Training utilities."""
from math import inf

import torch


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, clip_grad=True):
    """Copy of torch.nn.utils.clip_grad_norm_ that can also only measure the norm."""
    params_list = list(parameters)
    grads = [p.grad for p in params_list if p.grad is not None]
    if len(grads) == 0:
        return torch.tensor(0.0)
    if norm_type == inf:
        total_norm = torch.max(torch.stack([g.detach().abs().max() for g in grads]))
    else:
        total_norm = torch.norm(torch.stack([torch.norm(g.detach(), norm_type) for g in grads]), norm_type)
    if clip_grad:
        clip_coef = torch.clamp(max_norm / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.detach().mul_(clip_coef)
    return total_norm
