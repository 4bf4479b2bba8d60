"""GL603 recall: forward() calls a module-level helper _project(h) that does nn.Linear(2, 1)(h): a fresh layer per call. Not reported."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


def _project(h):
    return nn.Linear(2, 1)(h)  # expected error: GL603 (gradlint: see header)


class _ProjectInHelperFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return _project(self.fc(x))


@silently_wrong
def bad_layer_created_in_helper_function_called_by_forward():
    torch.manual_seed(0)
    model = _ProjectInHelperFunction()
    a = model(torch.ones(1, 2))
    b = model(torch.ones(1, 2))
    return torch.allclose(a, b), True



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_layer_created_in_helper_function_called_by_forward)
