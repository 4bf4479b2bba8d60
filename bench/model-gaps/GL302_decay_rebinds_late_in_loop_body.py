"""GL302 recall gap (second loop iteration): w = w * 0.9 at the end of the loop body makes w a
computed tensor from iteration two on, where w.requires_grad = True raises RuntimeError.
gradlint reports nothing.
UPDATE (16:45, with the uncommitted model edits in gradlint/model/): now reported at the right
line, but it cannot go back into the fixture: tests/test_prefilter.py
::test_fixture_without_the_tokens_has_no_findings fails, because with the pre-filter tokens hidden
(torch.ones -> TORCH.ONES) the rule still fires (w.requires_grad = True on an unknown value makes
it a leaf requiring grad, w * 0.9 a non-leaf): a file like this without the tokens would be
skipped by the pre-filter although a rule finds something in it."""

import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
from gradlint.testing import raises
ONLY_LEAVES = "you can only change requires_grad flags of leaf variables"


@raises(RuntimeError, ONLY_LEAVES)
def bad_decay_rebinds_late_in_loop_body():
    x = torch.ones(3)
    w = torch.ones(3)
    for step in range(2):
        w.requires_grad = True  # error: GL302
        loss = (w * x).sum()
        loss.backward()
        w = w * 0.9


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
