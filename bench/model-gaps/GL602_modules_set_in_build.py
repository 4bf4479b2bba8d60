"""GL602 recall: the submodules are stored in a plain list in build() (called from __init__), not in __init__ itself: not in parameters()/state_dict(). Not reported (the rule only looks at __init__'s own body)."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


class _BuiltLater(nn.Module):
    def __init__(self):
        super().__init__()
        self.build()

    def build(self):
        self.heads = [nn.Linear(2, 1), nn.Linear(2, 1)]  # expected error: GL602 (gradlint: see header)

    def forward(self, x):
        return sum(h(x) for h in self.heads)


@silently_wrong
def bad_heads_set_in_build():
    model = _BuiltLater()
    return len(model.state_dict()), 4



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_heads_set_in_build)
