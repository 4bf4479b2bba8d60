# Source: https://github.com/simchowitzlabpublic/nano-world-model/pull/22
# Category: clip-before-backward
# Expect: silent: the clip runs inside training_step, before the trainer calls backward(), so the optimizer always steps with the unclipped gradient
"""A Lightning world-model experiment clipped gradients inside training_step; the trainer only calls
backward() after training_step returns, so the clip saw p.grad None (or the previous step's) and the
optimizer was never capped. The PR moved the clip into configure_gradient_clipping."""
import torch

from experiment import TrainExperiment
from utils import clip_grad_norm_

torch.manual_seed(0)


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
