"""GL401 false alarm (debatable): pretrained = model.encoder.state_dict() of an encoder frozen with
requires_grad_(False) (no buffers), with an optimizer over model.head only; the steps that follow
never change the encoder, so the reference still equals the pretrained weights (prints True).
gradlint reports GL401 at pretrained = ... . The fixture keeps the same example written with the
_train_step helper (good_frozen_encoder_state_stays), which is not flagged only because steps in a
helper are not seen (see GL401_snapshot_then_helper_steps_in_loop.py)."""

import torch
import torch.nn as nn


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def good_frozen_encoder_state_stays():
    torch.manual_seed(0)
    model = _Net()
    model.encoder.requires_grad_(False)
    optimizer = torch.optim.SGD(model.head.parameters(), lr=0.5)
    x = torch.randn(8, 3)
    pretrained = model.encoder.state_dict()
    before = model.encoder.weight.detach().clone()
    for epoch in range(2):
        optimizer.zero_grad()
        model(x).pow(2).sum().backward()
        optimizer.step()
    return pretrained["weight"], before

print(torch.equal(*good_frozen_encoder_state_stays()))
