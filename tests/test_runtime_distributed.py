"""The runtime monitor on programs with a torch.distributed process group (one-process gloo).

A gloo group's destructor joins its worker threads; run by a C++ owner that holds the GIL (the
reducer of a DistributedDataParallel model, freed with it) while a worker drops a work item whose
captured thread-local state holds the monitor's mode or saved-tensor hooks (which takes the GIL),
the program hangs at its end. The monitor keeps each DDP model's group until the model is freed
and lets it go from Python (which releases the GIL) once it has left its mode and hooks
(gradlint/runtime/watchers/distributed.py). Each run here has a timeout: a hang fails the test.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():  # pragma: no cover
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from gradlint.runtime import monitor  # noqa: E402
from gradlint.runtime.watchers.distributed import ProcessGroups  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# {end}: how the program ends (the model alive at exit, freed before or after the group's
# destruction, the group never destroyed)
DDP_SCRIPT = '''
import sys
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

hook = sys.excepthook
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
sys.excepthook = hook
torch.manual_seed(0)
model = DistributedDataParallel(nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
{bug}
print("trained", flush=True)
{end}
'''

ENDS = {
    "alive_at_exit": "",
    "destroy_then_free": "dist.destroy_process_group()\ndel model, optimizer, loss",
    "free_then_destroy": "del model, optimizer, loss\ndist.destroy_process_group()",
    "free_never_destroyed": "del model, optimizer, loss",
    "destroy_model_alive": "dist.destroy_process_group()",
}

# a GL203-style misuse the monitor reports (a leaf made from the model's output, grad read)
BUG = '''x = torch.randn(2, 4, requires_grad=True)
y = (x * 2).detach().requires_grad_()  # BUG
y.sum().backward()
print(x.grad)'''


def _run(tmp_path: Path, end: str, *flags: str, bug: str = "") -> subprocess.CompletedProcess:
    script = tmp_path / "ddp_train.py"
    script.write_text(DDP_SCRIPT.format(end=end, bug=bug))
    try:
        return subprocess.run([sys.executable, "-m", "gradlint", "run", *flags, str(script)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as exc:  # the hang this file is about
        pytest.fail(f"`gradlint run {' '.join(flags)}` did not end within 120 s (hung at teardown?): "
                    f"stdout={exc.stdout!r} stderr={exc.stderr!r}")


@pytest.mark.parametrize("deep", [False, True], ids=["default", "deep"])
@pytest.mark.parametrize("end", sorted(ENDS))
def test_gloo_ddp_program_ends_under_the_monitor(tmp_path, end, deep):
    got = _run(tmp_path, ENDS[end], *(["--deep"] if deep else []))
    assert got.returncode == 0, got.stderr
    assert "trained" in got.stdout
    assert "gradlint: no autograd misuse observed at runtime." in got.stderr, got.stderr


@pytest.mark.parametrize("deep", [False, True], ids=["default", "deep"])
def test_gloo_ddp_program_findings_are_reported(tmp_path, deep):
    got = _run(tmp_path, ENDS["destroy_then_free"], *(["--deep"] if deep else []), bug=BUG)
    assert got.returncode == 0, got.stderr
    line = DDP_SCRIPT.format(end="", bug=BUG).splitlines().index(BUG.splitlines()[1]) + 1
    assert f"ddp_train.py:{line}:" in got.stderr and "GL2" in got.stderr, got.stderr


def _watcher(m) -> ProcessGroups:
    return next(w for w in m.watchers if isinstance(w, ProcessGroups))


def test_the_group_is_kept_while_its_model_lives_and_let_go_after_the_monitor():
    hook = sys.excepthook
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    sys.excepthook = hook
    try:
        with monitor() as m:
            w = _watcher(m)
            model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
            model(torch.randn(2, 4)).sum().backward()
            group = model.process_group
            assert [g for g, _ in w._groups.values()] == [group]
            dist.destroy_process_group()
            del model
            gc.collect()
            # freed: not let go here (its reducer is freed after it), but at the next safe point
            assert w._groups == {} and w._free == [group]
            del group
        assert w._groups == {} and w._free == []
        assert not hasattr(torch.nn.parallel.DistributedDataParallel.__init__, "__wrapped__")  # unpatched
        assert not hasattr(dist.destroy_process_group, "__wrapped__")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        sys.excepthook = hook


def test_a_freed_models_group_is_let_go_before_a_new_group_is_made():
    """A program that tears its group down and makes a new one (a fixed port, say) must find the
    old group gone, as without the monitor: the group is let go at the next init_process_group."""
    hook = sys.excepthook
    try:
        with monitor() as m:
            w = _watcher(m)
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
            model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
            dist.destroy_process_group()
            del model
            gc.collect()
            assert len(w._free) == 1
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
            assert w._free == []
            dist.destroy_process_group()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        sys.excepthook = hook


SYNTH = textwrap.dedent('''
    # a model's group whose reducer is freed while the monitor runs
    import torch, torch.distributed as dist, torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel
    for i in range(3):
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        m = DistributedDataParallel(nn.Linear(4, 1))
        m(torch.randn(2, 4)).sum().backward()
        dist.destroy_process_group()
        del m
    print("done")
''')


@pytest.mark.parametrize("deep", [False, True], ids=["default", "deep"])
def test_groups_made_and_destroyed_in_a_loop(tmp_path, deep):
    script = tmp_path / "loop.py"
    script.write_text(SYNTH)
    got = subprocess.run([sys.executable, "-m", "gradlint", "run", *(["--deep"] if deep else []), str(script)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and "done" in got.stdout, got.stderr
