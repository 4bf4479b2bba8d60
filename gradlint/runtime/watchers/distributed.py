"""Process groups (``torch.distributed``): no check, a safe teardown.

While the monitor is installed, every collective a gloo process group runs captures the calling
thread's thread-local state (``at::ThreadLocalState``), which holds the monitor's Python objects:
its ``TorchFunctionMode`` and, in deep mode, its saved-tensor hooks. Gloo's worker thread copies
and drops that state, and drops each work item when it is done, taking the GIL to change those
objects' reference counts. A gloo group's destructor joins its worker threads; run from a C++
owner that holds the GIL (``DistributedDataParallel``'s reducer, freed with the model: its
Python binding frees it without releasing the GIL), the join waits for a worker that waits for
the GIL: the program hangs at its end. (Python's own reference to a group frees it with the GIL
released, so the last reference must be a Python one.)

So while the monitor is installed it keeps a Python reference to the process group of every
``DistributedDataParallel`` model built, for as long as the model lives: its reducer is then never
the group's last owner. A group whose models are all freed is let go at the next
``init_process_group`` / ``new_group`` / ``destroy_process_group`` (a program that tears a group
down and makes a new one on the same port finds the port free, as without the monitor) and at the
latest when the monitor exits, after it has left its mode and hooks
(:meth:`ProcessGroups.uninstall`). A group whose last owner was this list is destroyed with the
GIL released.
"""

from __future__ import annotations

import functools
import sys
import weakref
from typing import Any, Dict, List

from gradlint.runtime.watchers import Patching


class ProcessGroups(Patching):
    codes: frozenset = frozenset()

    def __init__(self, monitor: Any) -> None:
        super().__init__(monitor)
        self._groups: Dict[int, List[Any]] = {}  # id -> [process group, models alive on it]
        self._free: List[Any] = []  # groups whose models are all freed: let go at the next safe point

    def install(self) -> None:
        c10d = sys.modules.get("torch.distributed.distributed_c10d")
        ddp = sys.modules.get("torch.nn.parallel.distributed")
        cls = getattr(ddp, "DistributedDataParallel", None)
        if c10d is None or cls is None or "__init__" not in vars(cls):
            return  # torch.distributed unavailable: nothing to keep
        self.active = True
        self.patch(cls, "__init__", self._wrap_ddp_init)
        for owner in (sys.modules.get("torch.distributed"), c10d):
            for name in ("init_process_group", "new_group", "destroy_process_group"):
                if owner is not None and name in vars(owner):
                    self.patch(owner, name, self._wrap_release)  # type: ignore[arg-type]

    def uninstall(self) -> None:
        self.unpatch()
        # the monitor's mode and hooks are gone by now (Monitor.__exit__ leaves them before it
        # stops the watchers): a last reference dropped here destroys its group with the GIL
        # released, so a worker still dropping a work item can take the GIL
        groups, self._groups = self._groups, {}
        self._free = []
        groups.clear()

    def release(self) -> None:
        """Let go of the groups whose models are all freed (a safe point: no reducer of theirs is
        left to be their last owner)."""
        free, self._free = self._free, []
        free.clear()

    def _wrap_release(self, orig: Any) -> Any:
        watcher = self

        @functools.wraps(orig)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if watcher.active and watcher._free:
                watcher.release()
            return orig(*args, **kwargs)

        return wrapper

    def _wrap_ddp_init(self, orig: Any) -> Any:
        watcher = self

        @functools.wraps(orig)
        def __init__(module: Any, *args: Any, **kwargs: Any) -> None:
            orig(module, *args, **kwargs)
            if watcher.active:
                try:
                    group = module.__dict__.get("process_group")
                    if group is not None:
                        entry = watcher._groups.setdefault(id(group), [group, 0])
                        entry[1] += 1
                        weakref.finalize(module, _model_freed, weakref.ref(watcher), id(group)).atexit = False
                except Exception:
                    pass

        return __init__


def _model_freed(ref: Any, key: int) -> None:
    """A model on the group ``key`` was freed (called as it is freed, before its reducer: the
    group is not dropped here but at the next safe point)."""
    watcher = ref()
    entry = watcher._groups.get(key) if watcher is not None else None
    if entry is not None:
        entry[1] -= 1
        if entry[1] <= 0:
            watcher._free.append(watcher._groups.pop(key)[0])


WATCHERS: List[type] = [ProcessGroups]
