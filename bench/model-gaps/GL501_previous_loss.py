"""Gap: GL501 recall, context-dependent: `total += previous` where `previous = loss` is rebound at
the end of the loop body: from iteration two on `total` holds every graph. Reported when the
function is alone in a file, NOT reported when another function of the same file
back-propagates a variable also named `total` (good_summed_then_backward below, as in the
GL501 fixture): the 'accumulated loss that is back-propagated later' exemption seems to match
the name across functions. Renaming `total` to `accumulated` here makes it reported again."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


def _setup():
    torch.manual_seed(0)
    return nn.Linear(3, 1), torch.randn(4, 3)

def good_summed_then_backward():
    # summing losses to back-propagate once is deliberate
    model, x = _setup()
    total = 0
    for _ in range(2):
        total = total + model(x).pow(2).mean()
    total.backward()
    return model.weight.grad is not None, True


@silently_wrong
def bad_previous_loss_added_from_second_iteration():
    model, x = _setup()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    total, previous = 0.0, 0.0
    for _ in range(3):
        total += previous  # expected error: GL501 (not reported)
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        previous = loss
    return total.grad_fn is None, True


if __name__ == "__main__":
    print(bad_previous_loss_added_from_second_iteration())
