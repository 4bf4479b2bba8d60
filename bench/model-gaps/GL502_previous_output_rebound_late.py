"""GL502 recall: 'previous = out' rebound at the end of the loop body, used as (out - previous) on the next iteration: from iteration two on backward() goes through the previous iteration's freed graph. Not reported (the hidden-state form 'output, hidden = rnn(x, hidden)' is)."""

import torch
import torch.nn as nn

from gradlint.testing import raises


SECOND_TIME = "Trying to backward through the graph a second time"


@raises(RuntimeError, SECOND_TIME)
def bad_previous_output_rebound_late():
    torch.manual_seed(0)
    model, x = nn.Linear(3, 3), torch.randn(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    previous = None
    for _ in range(3):
        optimizer.zero_grad()
        out = model(x).tanh()
        loss = out.sum()
        if previous is not None:
            loss = loss + (out - previous).pow(2).sum()  # expected error: GL502 (gradlint: see header)
        loss.backward()
        optimizer.step()
        previous = out



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_previous_output_rebound_late)
