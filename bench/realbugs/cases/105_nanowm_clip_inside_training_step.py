# Source: https://github.com/simchowitzlabpublic/nano-world-model/pull/22
# Category: clip-before-backward
# Expect: silent: the clip runs inside training_step, before the trainer calls backward(), so the optimizer always steps with the unclipped gradient
"""A Lightning world-model experiment clipped gradients inside training_step; the trainer only calls
backward() after training_step returns, so the clip saw p.grad None (or the previous step's) and the
optimizer was never capped. The PR moved the clip into configure_gradient_clipping."""
from math import inf

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


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


class TinyDiT(nn.Module):
    def __init__(self, ch=4):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(ch + 1, 16, 3, padding=1), nn.SiLU(), nn.Conv2d(16, ch, 3, padding=1))

    def forward(self, x, t):
        tt = t.view(-1, 1, 1, 1).expand(x.shape[0], 1, x.shape[2], x.shape[3]).float() / 1000
        return self.net(torch.cat([x, tt], 1))


class TrainExperiment(nn.Module):
    """Stands in for the LightningModule: training_step returns the loss, the trainer does the rest."""

    def __init__(self, gradient_clip_norm=0.1, gradient_clip_start_step=0):
        super().__init__()
        self.vae = nn.Conv2d(3, 4, 4, stride=4).requires_grad_(False)
        self.model = TinyDiT()
        self.gradient_clip_norm = gradient_clip_norm
        self.gradient_clip_start_step = gradient_clip_start_step
        self.global_step = 0
        self.logged = []

    def training_step(self, batch, batch_idx):
        x = batch["video"]
        with torch.no_grad():
            x = self.vae(x)
        t = torch.randint(0, 1000, (x.shape[0],))
        noise = torch.randn_like(x)
        x_t = x + noise * (t.view(-1, 1, 1, 1) / 1000)
        loss = F.mse_loss(self.model(x_t, t), noise) * 50

        if self.global_step < self.gradient_clip_start_step:
            gradient_norm = clip_grad_norm_(self.model.parameters(), self.gradient_clip_norm, clip_grad=False)  # BUG: clip-before-backward
        else:
            gradient_norm = clip_grad_norm_(self.model.parameters(), self.gradient_clip_norm, clip_grad=True)  # BUG: clip-before-backward
        self.logged.append(float(gradient_norm))
        return loss

    def configure_gradient_clipping(self, optimizer):
        pass

    def configure_optimizers(self):
        return torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0)


def fit(module, batches):
    """Lightning's automatic optimization order: training_step -> backward -> clipping hook -> step."""
    optimizer = module.configure_optimizers()
    norms_at_step = []
    for batch_idx, batch in enumerate(batches):
        loss = module.training_step(batch, batch_idx)
        loss.backward()
        module.configure_gradient_clipping(optimizer)
        norms_at_step.append(float(clip_grad_norm_(module.model.parameters(), 0.0, clip_grad=False)))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        module.global_step += 1
    return norms_at_step


experiment = TrainExperiment()
batches = [{"video": torch.randn(2, 3, 16, 16)} for _ in range(5)]
norms_at_step = fit(experiment, batches)

assert experiment.logged == [0.0] * 5
assert min(norms_at_step) > experiment.gradient_clip_norm
print("EVIDENCE: logged gradient_norm is always 0 (p.grad was None inside training_step) and the optimizer stepped with norms %.2f..%.2f > clip %.1f"
      % (min(norms_at_step), max(norms_at_step), experiment.gradient_clip_norm))
