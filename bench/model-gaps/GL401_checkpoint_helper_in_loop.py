"""GL401 recall gap (helper called in the training loop): a _checkpoint(model, store) helper
does store['best'] = model.state_dict() and is called in the training loop; later steps change
the 'checkpoint'. gradlint reports nothing (the snapshot sits in a helper with no step of its own)."""

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


def _checkpoint(model, store):
    store["best"] = model.state_dict()  # error: GL401


@silently_wrong
def bad_checkpoint_helper_in_loop():
    model, optimizer, x = _setup()
    store = {}
    for epoch in range(2):
        _train_step(model, optimizer, x)
        if epoch == 0:
            _checkpoint(model, store)
            first = model[0].weight.detach().clone()
    return store["best"]["0.weight"], first


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_checkpoint_helper_in_loop"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
