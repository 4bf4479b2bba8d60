"""GL601 recall: 'params = model.parameters()' (a generator) before the loop, 'for p in params: p.grad = None' in it: the generator is exhausted after the first iteration, so gradients accumulate from iteration two on. Not reported."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


def _setup():
    torch.manual_seed(0)
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    return model, torch.ones(4, 1)


def _expected_after(steps, lr=0.1):
    model, x = _setup()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
    return model.weight.detach()


@silently_wrong
def bad_params_generator_cleared_once():
    model, x = _setup()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    params = model.parameters()  # a generator: empty from the second iteration on
    for _ in range(3):
        for p in params:
            p.grad = None
        model(x).sum().backward()  # expected error: GL601 (gradlint: see header)
        optimizer.step()
    return model.weight.detach(), _expected_after(3)



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_params_generator_cleared_once)
