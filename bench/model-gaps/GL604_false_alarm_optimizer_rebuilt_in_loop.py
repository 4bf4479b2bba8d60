"""GL604 false alarm: inside the epoch loop the head is reset (model.head = nn.Linear(...)) and the optimizer is rebuilt right after from model.parameters(): the new head trains. gradlint reports the replacement as stale for the optimizer built before the loop."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


class _Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(2, 2)
        self.head = nn.Linear(2, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def good_head_reset_late_in_loop_with_new_optimizer():
    torch.manual_seed(0)
    model = _Classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(3):
        before = model.head.weight.detach().clone()
        optimizer.zero_grad()
        model(torch.ones(1, 2)).sum().backward()
        optimizer.step()
        if epoch == 0:
            model.head = nn.Linear(2, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    return torch.allclose(before, model.head.weight.detach()), False



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(good_head_reset_late_in_loop_with_new_optimizer)
