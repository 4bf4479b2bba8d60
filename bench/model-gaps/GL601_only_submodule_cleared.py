"""GL601 recall: the loop clears only model.backbone.zero_grad() while the optimizer steps all of model.parameters(): the head's gradients accumulate (silently wrong). gradlint treats any zero_grad() in the loop as clearing and reports nothing."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


def _setup():
    torch.manual_seed(0)
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    return model, torch.ones(4, 1)


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


@silently_wrong
def bad_only_backbone_cleared():
    model = _Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model.backbone.zero_grad()  # the head's gradients still accumulate
        model(torch.ones(4, 1)).sum().backward()  # expected error: GL601 (gradlint: see header)
        optimizer.step()
    reference = _Net()
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        ref_opt.zero_grad()
        reference(torch.ones(4, 1)).sum().backward()
        ref_opt.step()
    return model.head.weight.detach(), reference.head.weight.detach()



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_only_backbone_cleared)
