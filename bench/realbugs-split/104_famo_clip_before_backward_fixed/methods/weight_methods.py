"""Multitask loss-weighting methods."""
from typing import List, Union

import torch
import torch.nn.functional as F


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
