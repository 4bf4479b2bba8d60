# Source: https://github.com/jongwook/onsets-and-frames/issues/24
# Category: clip-after-step
# Expect: ok
"""The piano-transcription training loop with the clip moved between backward() and optimizer.step(), as agreed
in the thread, so Adam only ever sees gradients of norm <= clip_gradient_norm."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_
from torch.optim.lr_scheduler import StepLR

torch.manual_seed(0)


class OnsetsAndFrames(nn.Module):
    def __init__(self, input_features, output_features, model_complexity=8):
        super().__init__()
        self.onset_stack = nn.Sequential(nn.Linear(input_features, model_complexity), nn.ReLU(),
                                         nn.Linear(model_complexity, output_features))
        self.frame_stack = nn.Sequential(nn.Linear(input_features, model_complexity), nn.ReLU(),
                                         nn.Linear(model_complexity, output_features))

    def forward(self, mel):
        return self.onset_stack(mel), self.frame_stack(mel)

    def run_on_batch(self, batch):
        mel, onset_label, frame_label = batch
        onset_pred, frame_pred = self(mel)
        predictions = {'onset': onset_pred.sigmoid(), 'frame': frame_pred.sigmoid()}
        losses = {
            'loss/onset': F.binary_cross_entropy_with_logits(onset_pred, onset_label),
            'loss/frame': F.binary_cross_entropy_with_logits(frame_pred, frame_label),
        }
        return predictions, losses


def cycle(iterable):
    while True:
        for item in iterable:
            yield item


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
