"""GL502 recall: two losses share model.encoder(x) (a submodule of an nn.Module subclass of the file); loss_a.backward() frees the shared part, loss_b.backward() raises. The same code with local layers (encoder = nn.Linear(...)) is reported; calling the layer as an attribute, model.encoder(...), is not (also with a forward() defined, also nn.Sequential model[0](...))."""

import torch
import torch.nn as nn

from gradlint.testing import raises


SECOND_TIME = "Trying to backward through the graph a second time"


class _TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(3, 3)
        self.head_a = nn.Linear(3, 1)
        self.head_b = nn.Linear(3, 1)


@raises(RuntimeError, SECOND_TIME)
def bad_two_heads_on_encoder_attribute():
    torch.manual_seed(0)
    model = _TwoHeads()
    h = model.encoder(torch.randn(4, 3)).tanh()
    loss_a = model.head_a(h).sum()
    loss_a.backward()  # expected error: GL502 (gradlint: see header)
    loss_b = model.head_b(h).sum()
    loss_b.backward()



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_two_heads_on_encoder_attribute)
