"""Runtime-level false alarm (GL203, seen by tests/test_runtime.py on a GL302 good example):
w = (w * 0.9).detach() at the end of the loop body and w.requires_grad = True at the top of the
next iteration: each iteration trains a fresh leaf on purpose (the fix for GL302's
bad_decay_rebinds_late_in_loop_body), result 0.81 is right. `gradlint run` on this file reports
GL203 'requires_grad = True on a detached copy makes a new leaf from a tensor of a graph ... whose
leaves get no gradient' at w.requires_grad = True. The static check reports nothing. (The runtime
also reports w = (w * 0.9).detach().requires_grad_() in a loop the same way.)
Run: gradlint run GL203_runtime_false_alarm_releaf_late_in_loop.py"""

import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
from gradlint.testing import raises
ONLY_LEAVES = "you can only change requires_grad flags of leaf variables"


def good_decay_then_new_leaf_late_in_loop_body():
    x = torch.ones(3)
    w = torch.ones(3)
    for step in range(2):
        w.requires_grad = True
        loss = (w * x).sum()
        loss.backward()
        w = (w * 0.9).detach()
    return w, torch.full((3,), 0.81)


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        print("returned:", good_decay_then_new_leaf_late_in_loop_body())  # the runtime needs the call
    except Exception as e:
        print(type(e).__name__ + ":", e)
