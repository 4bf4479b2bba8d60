"""GL601 recall: 'optimizer' is rebound late in the loop body (unfreezing after epoch 0: optimizer = SGD(model.parameters())) while the loop keeps calling head_optimizer.zero_grad(): from the second epoch on the backbone's gradients are never cleared and accumulate. Not reported (zero_grad() on any optimizer in the loop counts as clearing)."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(1, 1, bias=False)
        self.head = nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            self.backbone.weight.fill_(1.0)
            self.head.weight.fill_(1.0)

    def forward(self, x):
        return self.head(self.backbone(x))


def _unfreeze_schedule(clear_all):
    model = _Net()
    model.backbone.requires_grad_(False)
    head_optimizer = torch.optim.SGD(model.head.parameters(), lr=0.1)
    optimizer = head_optimizer
    for epoch in range(4):
        (optimizer if clear_all else head_optimizer).zero_grad()
        model(torch.ones(4, 1)).sum().backward()
        optimizer.step()
        if epoch == 0:  # unfreeze after the first epoch
            model.backbone.requires_grad_(True)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return model.backbone.weight.detach()


@silently_wrong
def bad_optimizer_rebound_late_old_one_cleared():
    model = _Net()
    model.backbone.requires_grad_(False)
    head_optimizer = torch.optim.SGD(model.head.parameters(), lr=0.1)
    optimizer = head_optimizer
    for epoch in range(4):
        head_optimizer.zero_grad()
        model(torch.ones(4, 1)).sum().backward()  # expected error: GL601 (gradlint: see header)
        optimizer.step()
        if epoch == 0:  # unfreeze after the first epoch
            model.backbone.requires_grad_(True)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return model.backbone.weight.detach(), _unfreeze_schedule(clear_all=True)



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_optimizer_rebound_late_old_one_cleared)
