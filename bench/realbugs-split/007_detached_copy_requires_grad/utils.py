"""Tensor helpers."""


def func(t):
    t_copy = t.detach()  # BUG: detach-new-leaf
    t_copy.requires_grad = True  # BUG: detach-new-leaf
    return t_copy
