"""Iteration helpers."""

__all__ = ["cycle"]


def cycle(iterable):
    while True:
        for item in iterable:
            yield item
