"""GL304 false alarm: under no_grad, w = w - lr * w.grad makes a new tensor that does not require
grad, and w.requires_grad_() on the next line makes it a new leaf: correct code (converges to
0.36 as the in-place version). gradlint reports GL304 error ('the next backward() raises
RuntimeError') at the rebinding line."""

import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong
NONE_GRAD = "unsupported operand type(s) for *: 'float' and 'NoneType'"


def good_rebind_under_no_grad_then_requires_grad():
    x = torch.ones(3)
    w = torch.zeros(3, requires_grad=True)
    for _ in range(2):
        loss = ((w * x - 1) ** 2).sum()
        loss.backward()
        with torch.no_grad():
            w = w - 0.1 * w.grad
        w.requires_grad_()
    return w.detach(), torch.full((3,), 0.36)


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["good_rebind_under_no_grad_then_requires_grad"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
