"""GL402 recall gap (helper called in the training loop): _grad_step does
zero_grad(set_to_none=False) + backward() and returns w.grad; the loop appends the returned
tensor, so history holds three references to the same (last) gradient. gradlint reports nothing
(the .grad alias is not followed through the helper's return value)."""

import torch
import torch.nn as nn
from gradlint.testing import silently_wrong


def _setup():
    w = torch.ones(2, requires_grad=True)
    return w, torch.optim.SGD([w], lr=0.1)


def _grad_step(w, optimizer, scale):
    optimizer.zero_grad(set_to_none=False)
    (w * scale).sum().backward()
    return w.grad


@silently_wrong
def bad_helper_in_training_loop():
    w, optimizer = _setup()
    history = []
    for i in range(3):
        history.append(_grad_step(w, optimizer, i + 1))  # error: GL402
    return history[0], torch.full((2,), 1.0)


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_helper_in_training_loop"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
