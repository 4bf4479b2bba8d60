"""Tensor helpers."""


def func(t):
    t_copy = t.clone()
    return t_copy
