"""The runtime monitor's check families, one module per family of rules.

The core monitor (``gradlint.runtime.mode``) watches the torch calls themselves (in-place ops,
detach, ``.grad``, ``backward()``). The families below watch what a ``TorchFunctionMode`` alone
does not see: optimizers (the global step hooks torch offers), modules (the global module
registration and forward hooks), custom ``autograd.Function``s, the graphs that ``backward()``
goes through, and they translate the errors torch raises into findings blamed on the cause.

Each family is a :class:`Watcher`: installed when the outermost monitor is entered, removed
when it exits; it receives the monitor's events (``before_backward``, ``after_backward``,
``on_error``) and can see more torch calls with :func:`gradlint.runtime.mode.tap`. A family
never changes what the program computes, and its own errors are swallowed.

One family checks nothing: ``distributed`` keeps the process group of each
``DistributedDataParallel`` model so that tearing the group down cannot deadlock with the
monitor's mode and hooks captured by gloo's worker threads (see its docstring).
"""

from __future__ import annotations

import importlib
from typing import Any, List, Tuple

__all__ = ["Watcher", "Patching", "FAMILIES", "start", "stop"]

# module names under gradlint.runtime.watchers, in the order their events are delivered
FAMILIES = ("graphs", "inference", "functions", "optimizers", "modules", "snapshots", "distributed")


class Watcher:
    """One family of checks. ``m`` is the monitor (``m._report``, ``m._add``, ``m.deep``)."""

    #: rule codes this family reports
    codes: frozenset = frozenset()

    def __init__(self, monitor: Any) -> None:
        self.m = monitor

    def install(self) -> None:
        """Register hooks (removed in :meth:`uninstall`)."""

    def uninstall(self) -> None:
        """Remove what :meth:`install` registered."""

    def finish(self) -> None:
        """The monitored program ended: settle what only the end can settle."""

    def before_backward(self, roots: List[Any], retain: bool, is_grad: bool) -> None:
        """A ``backward()`` (``is_grad``: ``torch.autograd.grad``) is about to run on ``roots``."""

    def after_backward(self, roots: List[Any], retain: bool, is_grad: bool) -> None:
        """That ``backward()`` returned."""

    def on_error(self, exc: BaseException, func: Any, args: Any, kwargs: Any) -> bool:
        """Torch raised ``exc`` from ``func``; record the finding at its cause. True when this
        family recognised the error (the others are then not asked)."""
        return False


class Patching(Watcher):
    """A family that wraps torch functions while active and registers hooks; ``unpatch`` undoes
    both (a wrapper only where nobody replaced it meanwhile; one left in somebody else's chain
    passes through once ``active`` is False)."""

    def __init__(self, monitor: Any) -> None:
        super().__init__(monitor)
        self.active = False
        self._handles: List[Any] = []
        self._patches: List[Tuple[type, str, Any, Any]] = []

    def patch(self, owner: type, name: str, make: Any) -> None:
        orig = owner.__dict__[name]
        wrapper = make(orig)
        setattr(owner, name, wrapper)
        self._patches.append((owner, name, orig, wrapper))

    def unpatch(self) -> None:
        self.active = False
        for owner, name, orig, wrapper in reversed(self._patches):
            if owner.__dict__.get(name) is wrapper:
                setattr(owner, name, orig)
        self._patches = []
        for h in self._handles:
            try:
                h.remove()
            except Exception:
                pass
        self._handles = []


def _classes() -> List[type]:
    out = []
    for name in FAMILIES:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ImportError:
            continue
        out.extend(getattr(mod, "WATCHERS", ()))
    return out


_CLASSES: List[type] = []


def start(monitor: Any) -> List[Watcher]:
    global _CLASSES
    if not _CLASSES:
        _CLASSES = _classes()
    watchers = []
    for cls in _CLASSES:
        try:
            w = cls(monitor)
            w.install()
        except Exception:
            continue
        watchers.append(w)
    return watchers


def stop(watchers: List[Watcher]) -> None:
    for w in watchers:
        try:
            w.finish()
        except Exception:
            pass
        try:
            w.uninstall()
        except Exception:
            pass


def codes() -> frozenset:
    """Every rule code some family reports."""
    out: set = set()
    for cls in _classes():
        out |= set(cls.codes)
    return frozenset(out)
