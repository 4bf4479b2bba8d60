"""Declarations for rule fixtures (``fixtures/GLxxx_*.py``); no torch import here.

A fixture is a runnable module of small functions. ``bad_*`` functions carry the offending line
marked with an inline expectation (``# error: GL101`` or ``# warning: GL201``) and one of these
decorators saying what torch does when the function runs:

- ``@raises(RuntimeError, "a leaf Variable that requires grad")``: it raises this, with this
  text in the message;
- ``@warns(UserWarning, "To copy construct")``: it emits this warning;
- ``@silently_wrong``: it runs without an exception and returns ``(actual, expected)``, and
  ``actual`` is None or differs from ``expected`` (a gradient that is None or wrong);
- ``@warns(...)`` stacked on ``@silently_wrong``: both.

``good_*`` functions have no marker and no decorator; they must run, and when they return
``(actual, expected)`` the two must be equal. The test suite lints every fixture (findings must
match the markers exactly) and runs every example on real torch.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Type

EXPECT_ATTR = "__gradlint_expect__"


def _add(fn: Callable[..., Any], key: str, value: Any) -> Callable[..., Any]:
    spec = dict(getattr(fn, EXPECT_ATTR, {}))
    spec[key] = value
    setattr(fn, EXPECT_ATTR, spec)
    return fn


def raises(exc: Type[BaseException], match: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return lambda fn: _add(fn, "raises", (exc, match))


def warns(category: Type[Warning], match: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return lambda fn: _add(fn, "warns", (category, match))


def silently_wrong(fn: Callable[..., Any]) -> Callable[..., Any]:
    return _add(fn, "wrong", True)


def expectation(fn: Callable[..., Any]) -> Optional[dict]:
    return getattr(fn, EXPECT_ATTR, None)
