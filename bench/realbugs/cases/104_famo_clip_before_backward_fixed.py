# Source: https://github.com/Cranial-XIX/FAMO/issues/4
# Category: clip-before-backward
# Expect: ok
"""FAMO's multitask weighting helper clips the shared parameters' gradients inside its backward()
method but before calling loss.backward(); a user asked why, and the author confirmed the clip must
come after the backward call."""
from typing import List, Union

import torch
import torch.nn.functional as F

torch.manual_seed(0)


class FAMO:
    """Fast Adaptive Multitask Optimization."""

    def __init__(self, n_tasks: int, device: torch.device, gamma: float = 0.01, w_lr: float = 0.025,
                 max_norm: float = 1.0):
        self.min_losses = torch.zeros(n_tasks).to(device)
        self.w = torch.tensor([0.0] * n_tasks, device=device, requires_grad=True)
        self.w_opt = torch.optim.Adam([self.w], lr=w_lr, weight_decay=gamma)
        self.max_norm = max_norm
        self.n_tasks = n_tasks
        self.device = device

    def get_weighted_loss(self, losses):
        self.prev_loss = losses
        z = F.softmax(self.w, -1)
        D = losses - self.min_losses + 1e-8
        c = (z / D).sum().detach()
        return (D.log() * z / c).sum()

    def update(self, curr_loss):
        delta = (self.prev_loss - self.min_losses + 1e-8).log() - (curr_loss - self.min_losses + 1e-8).log()
        with torch.enable_grad():
            d = torch.autograd.grad(F.softmax(self.w, -1), self.w, grad_outputs=delta.detach())[0]
        self.w_opt.zero_grad()
        self.w.grad = d
        self.w_opt.step()

    def backward(self, losses: torch.Tensor,
                 shared_parameters: Union[List[torch.nn.parameter.Parameter], torch.Tensor] = None):
        loss = self.get_weighted_loss(losses=losses)
        loss.backward()
        if self.max_norm > 0 and shared_parameters is not None:
            torch.nn.utils.clip_grad_norm_(shared_parameters, self.max_norm)
        return loss


def grad_norm(params):
    return torch.norm(torch.stack([p.grad.norm() for p in params])).item()


n, dim, K = 200, 20, 10
X = torch.randn(n, dim)
Y = 5 * torch.randn(n, K)

model = torch.nn.Linear(dim, K)
weight_opt = FAMO(n_tasks=K, device="cpu", max_norm=0.5)
opt = torch.optim.Adam(model.parameters())
shared = list(model.parameters())

norms_at_step = []
for it in range(10):
    loss = (Y - model(X)).pow(2).mean(0)  # (K,)
    opt.zero_grad()
    weight_opt.backward(loss, shared_parameters=shared)
    norms_at_step.append(grad_norm(shared))
    opt.step()
    with torch.no_grad():
        new_loss = (Y - model(X)).pow(2).mean(0)
        weight_opt.update(new_loss)

assert max(norms_at_step) <= weight_opt.max_norm + 1e-4
print("OK: every step used a gradient clipped to max_norm")
