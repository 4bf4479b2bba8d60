# Source: https://github.com/Cranial-XIX/FAMO/issues/4
# Category: clip-before-backward
# Expect: silent: clip_grad_norm_ runs before loss.backward(), so it clips nothing and opt.step() uses the full, unclipped gradient
"""FAMO's multitask weighting helper clips the shared parameters' gradients inside its backward()
method but before calling loss.backward(); a user asked why, and the author confirmed the clip must
come after the backward call."""
import torch

from methods.weight_methods import FAMO

torch.manual_seed(0)


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

assert min(norms_at_step) > weight_opt.max_norm
print("EVIDENCE: gradient norm at opt.step() was %.2f..%.2f although max_norm=%.1f"
      % (min(norms_at_step), max(norms_at_step), weight_opt.max_norm))
