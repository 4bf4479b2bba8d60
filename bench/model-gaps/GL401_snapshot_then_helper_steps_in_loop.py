"""GL401 recall gap (helper called in the training loop): initial = model.state_dict() before a
loop whose optimizer.step() happens inside a helper (_train_step) called in the loop; the
'snapshot' follows the steps (silently wrong). gradlint reports nothing: a step reached through a
helper call is not seen as following the snapshot (found when the step is written in the loop
itself). Same miss for pretrained = model.encoder.state_dict() (module attribute of a class in
the file) followed by _train_step(...) calls."""

import copy
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong


def _setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    return model, optimizer, torch.randn(8, 3)


def _train_step(model, optimizer, x):
    optimizer.zero_grad()
    model(x).pow(2).sum().backward()
    optimizer.step()


@silently_wrong
def bad_snapshot_then_helper_steps_in_loop():
    model, optimizer, x = _setup()
    initial = model.state_dict()  # error: GL401
    before = model[0].weight.detach().clone()
    for epoch in range(2):
        _train_step(model, optimizer, x)
    return initial["0.weight"], before


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_snapshot_then_helper_steps_in_loop"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
