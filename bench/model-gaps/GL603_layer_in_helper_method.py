"""GL603 recall: forward() calls self._head(h), a helper method that creates self.head = nn.Linear(2, 1) on every call (fresh random weights each forward, never in the optimizer). Not reported: only forward()'s own body is checked."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


class _HeadInHelperMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def _head(self, h):
        self.head = nn.Linear(2, 1)  # expected error: GL603 (gradlint: see header)
        return self.head(h)

    def forward(self, x):
        return self._head(self.fc(x))


@silently_wrong
def bad_layer_created_in_helper_method_called_by_forward():
    torch.manual_seed(0)
    model = _HeadInHelperMethod()
    a = model(torch.ones(1, 2))
    b = model(torch.ones(1, 2))
    return torch.allclose(a, b), True



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_layer_created_in_helper_method_called_by_forward)
