"""GL605 clip-grad-misplaced (part of the ``optimizers`` family): clipping that runs between a
``step()`` and the next ``backward()``.

Clipping rescales what is in ``.grad`` when it runs; the optimizer watcher
(``optimizers.Steps``) knows, for each gradient a ``step()`` consumed, whether anything wrote it
since. A clipping call is recognised by its frames: a function named ``clip_grad_norm_``,
``clip_grad_value_`` (torch's, ``accelerator.clip_grad_norm_``, a local copy, ...) on the stack
of the torch call; the site reported is the user's call of the outermost such function.

* **In-place clipping ops** (``_foreach_mul_``, ``mul_``, ``clamp_``, ...) on a gradient that no
  ``backward()`` wrote since the last ``step()`` (the update already used it), or since
  ``zero_grad(set_to_none=False)`` zeroed it: reported at once.
* **Clipping that finds no gradient** (``.grad`` is None before the step's ``backward()``) does
  no in-place op; torch's ``clip_grad_norm_`` and the classic copies return ``torch.tensor(0.0)``
  then. That call marks the parameters found in the clipping frames; the next ``step()`` that
  finds them with gradients confirms it (``Steps._check``), the step as the related location.

``max_norm=inf`` (or a copy's ``clip_grad=False``) only measures the norm: never reported.
"""

from __future__ import annotations

import math
import sys
from typing import Any, List, Optional, Tuple

import torch

from gradlint.runtime.attribution import _skip_prefixes, _skipped, display_path
from gradlint.runtime.mode import describe

_Tensor = torch.Tensor
CLIP_NAMES = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "clip_grads_with_norm_",
                        "_clip_grads_with_norm_", "clip_gradients", "clip_grad"})
#: in-place ops a clipping function uses on the gradients (tapped by ``optimizers``)
CLIP_OPS = ("mul_", "div_", "clamp_", "clamp_min_", "clamp_max_", "clip_")
CLIP_FOREACH = ("_foreach_mul_", "_foreach_div_", "_foreach_clamp_min_", "_foreach_clamp_max_")
_MOVE = "clip between backward() and step()"


def clip_call(helpers: int = 2) -> Optional[Tuple[List[Any], Tuple[str, int]]]:
    """``(clipping frames, user call site)`` when the current torch call runs inside a clipping
    function that clips (not a measure-only call); None otherwise. ``helpers``: how many user
    frames may sit between the torch call and the clipping function."""
    skip = _skip_prefixes()
    frame = sys._getframe(2)
    clips: List[Any] = []
    users = 0
    for _ in range(32):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name in CLIP_NAMES:
            clips.append(frame)
        elif not _skipped(code.co_filename, skip):
            if clips:
                break
            users += 1  # a helper of a local copy, or no clipping at all
            if users > helpers:
                return None
        frame = frame.f_back
    else:
        return None
    for f in clips:
        loc = f.f_locals
        norm = loc.get("max_norm")
        if (isinstance(norm, (int, float)) and math.isinf(norm)) or loc.get("clip_grad") is False:
            return None
    return clips, (display_path(frame.f_code.co_filename), frame.f_lineno)


def clip_op(steps: Any, ts: List[Any]) -> None:
    """An in-place clipping op on ``ts``: misplaced when one of them is a gradient that nothing
    wrote since the step that used it (or since it was zeroed)."""
    for t in ts:
        e = steps._by_ptr.get(t.data_ptr()) if isinstance(t, _Tensor) else None
        g = e.ref() if e is not None else None
        if g is not None and g._version == e.version:
            break
    else:
        return
    call = clip_call()
    if call is None:
        return
    _, (path, line) = call
    if e.cleared:
        steps.m._add("GL605", f"gradient clipping before backward(): the gradients ({describe(g)}) were just zeroed, "
                              f"so it clips nothing and the next step() uses unclipped gradients; {_MOVE}", path, line)
    else:
        steps.m._add("GL605", f"gradient clipping after optimizer.step(): the step already used the unclipped "
                              f"gradients ({describe(g)}); {_MOVE}", path, line,
                     related=[(display_path(e.site[0]), e.site[1], "the optimizer step that used the unclipped "
                                                                   "gradients")])


def empty_clip(steps: Any) -> None:
    """``torch.tensor`` was called: inside a clipping function that found no gradient?"""
    call = clip_call(helpers=0)
    if call is None:
        return
    clips, site = call
    params: List[Any] = []
    for f in clips:
        for v in list(f.f_locals.values()):
            vs = v if isinstance(v, (list, tuple)) else [v]
            params.extend(t for t in vs if isinstance(t, _Tensor) and t.is_leaf and t.requires_grad)
    if params and all(p.grad is None for p in params):
        for p in params:
            steps._clips[p] = site


def report_before_backward(steps: Any, site: Tuple[str, int], g: Any, here: Tuple[str, int]) -> None:
    steps.m._add("GL605", f"gradient clipping before backward(): it found no gradient, and the gradients "
                          f"({describe(g)}) that step() then uses are unclipped; {_MOVE}", site[0], site[1],
                 related=[(here[0], here[1], "the optimizer step that uses the unclipped gradients")])
