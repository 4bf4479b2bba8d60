"""GL604 recall: model[1] = nn.Linear(2, 1) (an nn.Sequential slot replaced by subscript) after the optimizer was built (here by a helper, _build_optimizer(model); a local torch.optim.SGD(...) is missed the same way): the new layer never trains. Not reported; the attribute form model.fc = ... is."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))


def _build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def _train_step(model, optimizer, x):
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()


@silently_wrong
def bad_head_replaced_after_helper_built_optimizer():
    model = _net()
    optimizer = _build_optimizer(model)
    model[1] = nn.Linear(2, 1)  # expected error: GL604 (gradlint: see header)
    before = model[1].weight.detach().clone()
    for epoch in range(2):
        _train_step(model, optimizer, torch.ones(1, 2))
    return torch.allclose(before, model[1].weight.detach()), False



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_head_replaced_after_helper_built_optimizer)
