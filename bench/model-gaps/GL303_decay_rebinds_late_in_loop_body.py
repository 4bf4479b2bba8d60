"""GL303 recall gap (second loop iteration): w = w * 0.99 at the end of the loop body makes w a
non-leaf from iteration two on; w.grad is then None and .norm() raises AttributeError.
gradlint reports nothing.
UPDATE (16:45, with the uncommitted model edits in gradlint/model/): now reported, but as GL301 at
w = w * 0.99 (GL303 defers to GL301 for a converted/scaled fresh leaf, by design), not as GL303 at
the .grad read. So GL303 has no second-iteration example of its own; whether this is a gap or the
intended division between the two rules is for the rule owners to decide."""

import copy
import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong, warns
GRAD_WARNING = "is not a leaf Tensor is being accessed"
NONE_NORM = "'NoneType' object has no attribute 'norm'"


@warns(UserWarning, GRAD_WARNING)
@raises(AttributeError, NONE_NORM)
def bad_decay_rebinds_late_in_loop_body():
    x = torch.ones(3)
    w = torch.ones(3, requires_grad=True)
    norms = []
    for step in range(2):
        loss = (w * x).sum()
        loss.backward()
        norms.append(w.grad.norm())  # error: GL303
        w = w * 0.99


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_decay_rebinds_late_in_loop_body"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
