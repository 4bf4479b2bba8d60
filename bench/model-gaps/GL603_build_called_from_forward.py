"""GL603 recall: forward() calls self.build(), which creates self.head = nn.Linear(2, 1): a new layer on every call. Not reported (the same build() called from __init__ is the correct idiom)."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


class _RebuiltEveryCall(nn.Module):
    def build(self):
        self.head = nn.Linear(2, 1)  # expected error: GL603 (gradlint: see header)

    def forward(self, x):
        self.build()
        return self.head(x)


@silently_wrong
def bad_build_called_from_forward():
    torch.manual_seed(0)
    model = _RebuiltEveryCall()
    a = model(torch.ones(1, 2))
    b = model(torch.ones(1, 2))
    return torch.allclose(a, b), True



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_build_called_from_forward)
