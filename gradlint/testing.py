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

Real code does not look like a minimal example, so each rule's fixture also shows its claim in
the shapes real code takes, marked with ``@shape(...)`` on bad and good examples alike:

- ``"helper"``: through a helper function called in the training loop;
- ``"method"``: a method using object state set outside ``__init__`` (``setup``, ``build``, a
  trainer's attributes);
- ``"attribute"``: a module attribute (``self.head.weight``, ``model.encoder``, a submodule's
  buffer);
- ``"iteration"``: the second loop iteration (a value rebound late in the body and read at the
  top, state carried from one step into the next).

A fixture covers each shape with at least one bad and one good example, or names the shape in a
module-level ``SHAPES_NOT_COVERED = {"shape": "reason"}`` (tests/test_shapes.py checks both).
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


SHAPES = ("helper", "method", "attribute", "iteration")


def shape(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Tag an example with the real-code shape(s) it is written in (see the module docstring)."""
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        raise ValueError(f"unknown shape(s) {unknown}; use {SHAPES}")
    return lambda fn: _add(fn, "shapes", tuple(names))


def expectation(fn: Callable[..., Any]) -> Optional[dict]:
    return getattr(fn, EXPECT_ATTR, None)
