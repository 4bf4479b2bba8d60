"""GL604 recall: model.head.bias = nn.Parameter(...) (a parameter of a submodule, two attributes deep) replaced after the optimizer was built: the new bias never trains. Not reported; layer.bias = nn.Parameter(...) one level deep is."""

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


@silently_wrong
def bad_head_bias_replaced_after_optimizer():
    torch.manual_seed(0)
    model = _Classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model.head.bias = nn.Parameter(torch.zeros(1))  # expected error: GL604 (gradlint: see header)
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    return model.head.bias.detach(), torch.full((1,), -0.5)



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_head_bias_replaced_after_optimizer)
