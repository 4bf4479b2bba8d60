"""GL402 false alarm: good_read_before_change reads g = w.grad at once, before
zero_grad(set_to_none=False) (returns 6.0, correct). It is reported only because an unrelated
later function (good_frozen_layer_has_no_grad) also reads a local named g: the 'read after the
change' check uses the last read of the name anywhere in the file, not in the same function.
Remove the second function and the report goes away."""

import torch
import torch.nn as nn
from gradlint.testing import silently_wrong


def _setup():
    w = torch.ones(2, requires_grad=True)
    return w, torch.optim.SGD([w], lr=0.1)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x):
        return self.fc(x)


def good_read_before_change():
    w, optimizer = _setup()
    (w * 3).sum().backward()
    g = w.grad
    total = g.sum().item()
    optimizer.zero_grad(set_to_none=False)
    return total, 6.0


def good_frozen_layer_has_no_grad():
    model = _Net()
    model.fc.bias.requires_grad_(False)
    model(torch.ones(4, 2)).sum().backward()
    g = model.fc.weight.grad
    return (g, model.fc.bias.grad), (torch.full((1, 2), 4.0), None)


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["good_frozen_layer_has_no_grad"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
