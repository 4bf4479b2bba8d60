"""Fixture gap from GL203_detach_then_requires_grad.py: good_fresh_leaf_from_data_each_step -- good (gradlint should report nothing).

False alarm (GL402, found while extending the GL203 fixture): grad = x_adv.grad inside a loop where x_adv is a NEW leaf each iteration; the next iteration's backward() fills the new x_adv.grad, never the tensor grad still holds, so reading grad after the loop is correct. gradlint reports 'grad holds the .grad tensor itself ... a later backward() adds to it'.

Run: python3 GL402_fresh_leaf_grad_in_loop.py   (shows what torch does);  gradlint check --no-cache GL402_fresh_leaf_grad_in_loop.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong, warns
COPY = "To copy construct from a tensor"


def good_fresh_leaf_from_data_each_step():
    w = torch.ones(3, requires_grad=True)
    for step in range(2):
        image = torch.rand(3)
        x_adv = image.detach().clone().requires_grad_(True)
        loss = (x_adv * w).sum()
        loss.backward()
        grad = x_adv.grad
    return grad, torch.ones(3)


if __name__ == "__main__":
    import traceback
    try:
        print("result:", good_fresh_leaf_from_data_each_step())
    except Exception:
        traceback.print_exc()
