# Source: https://github.com/jongwook/onsets-and-frames/issues/24
# Category: clip-after-step
# Expect: ok
"""The piano-transcription training loop with the clip moved between backward() and optimizer.step(), as agreed
in the thread, so Adam only ever sees gradients of norm <= clip_gradient_norm."""
import torch
from torch.nn.utils import clip_grad_norm_
from torch.optim.lr_scheduler import StepLR

from onsets_and_frames import *

torch.manual_seed(0)

N_MELS, N_KEYS = 16, 8
loader = [(30.0 * torch.randn(4, 20, N_MELS), (torch.rand(4, 20, N_KEYS) > 0.9).float(),
           (torch.rand(4, 20, N_KEYS) > 0.7).float()) for _ in range(3)]
learning_rate, learning_rate_decay_steps, learning_rate_decay_rate = 6e-4, 10, 0.98
clip_gradient_norm = 2
iterations = 6

model = OnsetsAndFrames(N_MELS, N_KEYS)
optimizer = torch.optim.Adam(model.parameters(), learning_rate)
scheduler = StepLR(optimizer, step_size=learning_rate_decay_steps, gamma=learning_rate_decay_rate)

norms_used_by_step = []
optimizer.register_step_pre_hook(lambda opt, args, kwargs: norms_used_by_step.append(
    torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()))

for i, batch in zip(range(1, iterations + 1), cycle(loader)):
    predictions, losses = model.run_on_batch(batch)

    loss = sum(losses.values())
    optimizer.zero_grad()
    loss.backward()
    if clip_gradient_norm:
        clip_grad_norm_(model.parameters(), clip_gradient_norm)
    optimizer.step()
    scheduler.step()

print("gradient norms Adam stepped with:", [round(n, 2) for n in norms_used_by_step])
assert len(norms_used_by_step) == iterations
assert max(norms_used_by_step) <= clip_gradient_norm * (1 + 1e-4)
