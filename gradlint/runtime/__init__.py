"""Runtime mode: watch a program run on real torch and report autograd misuse as it happens.

``from gradlint.runtime import monitor``::

    with monitor(deep=False) as m:
        train()
    for f in m.findings: ...

Importing this package does not import torch (the pytest plugin lives here and pytest loads it in
every session); ``monitor``/``Monitor`` are loaded on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["monitor", "Monitor"]


def __getattr__(name: str) -> Any:
    if name in ("monitor", "Monitor"):
        from gradlint.runtime import mode as _m

        return getattr(_m, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
