"""Overhead of the runtime monitor on a training loop (not a test).

    python bench/runtime_overhead.py [--repeats 9] [--small-steps 1000] [--medium-steps 60] [--clock cpu|wall]

Adam + cross-entropy (zero_grad, forward, backward, step, loss.item()), one intra-op thread,
baseline / empty mode / monitor / monitor --deep interleaved within each repeat. Each ratio is
the median over the repeats of the ratio within the repeat (neighbouring runs share the
machine's state of the moment: on a shared machine this is far steadier than a ratio of
medians). ``--clock cpu`` (the default) times the process's CPU time, ``wall`` the elapsed time.
Prints a Markdown table of the per-step times and the ratios to the baseline and to the empty
``TorchFunctionMode``.

    python bench/runtime_overhead.py --instructions [--small-steps 300] [--medium-steps 20]

counts the instructions each variant executes per step instead (valgrind's callgrind, started
with instrumentation off and switched on around the measured steps only; the per-step figure is
the difference between a run of N steps and one of N/4, which cancels building the model and the
warm-up). Deterministic: the figure to use on a shared machine, where CPU and wall time of the
same run vary by 2x. Needs ``valgrind`` and ``callgrind_control`` on PATH; slow (minutes).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn

from gradlint.runtime import monitor


def make(sizes, batch):
    torch.manual_seed(0)
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, sizes[0])
    t = torch.randint(0, sizes[-1], (batch,))
    return model, opt, x, t


def steps(model, opt, x, t, n):
    loss_fn = nn.CrossEntropyLoss()
    total = 0.0
    for _ in range(n):
        opt.zero_grad()
        loss = loss_fn(model(x), t)
        loss.backward()
        opt.step()
        total += loss.item()
    return total


class _EmptyMode(torch.overrides.TorchFunctionMode):
    """The reference: a TorchFunctionMode that only forwards each call."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


CLOCK = time.process_time


def timed(variant, sizes, batch, n):
    model, opt, x, t = make(sizes, batch)
    steps(model, opt, x, t, max(1, n // 20))  # warm-up (allocator, Adam state)
    start = CLOCK()
    if variant == "baseline":
        steps(model, opt, x, t, n)
    elif variant == "empty":
        with _EmptyMode():
            steps(model, opt, x, t, n)
    else:
        with monitor(deep=(variant == "deep")) as m:
            steps(model, opt, x, t, n)
        assert not m.findings, m.findings
    return (CLOCK() - start) / n


def _child(variant: str, case: int, n: int) -> None:
    """Run under callgrind: warm up uninstrumented, count only ``n`` steps."""
    sizes, batch = CASES[case][1], CASES[case][2]
    timed(variant, sizes, batch, 4)
    me = str(os.getpid())
    subprocess.run(["callgrind_control", "-i", "on", me], capture_output=True, check=False)
    timed(variant, sizes, batch, n)
    subprocess.run(["callgrind_control", "-i", "off", me], capture_output=True, check=False)


def _count(variant: str, case: int, n: int, threads: int) -> int:
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={os.devnull}",
         sys.executable, os.path.abspath(__file__), "--child", variant, str(case), str(n),
         "--threads", str(threads)],
        capture_output=True, text=True, check=False)
    found = re.findall(r"Collected : (\d+)", out.stderr)
    if not found:
        raise SystemExit(f"callgrind gave no count for {variant}:\n{out.stderr[-2000:]}")
    return int(found[-1])


def instructions(args) -> None:
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        raise SystemExit("--instructions needs valgrind and callgrind_control on PATH")
    from concurrent.futures import ThreadPoolExecutor

    variants = ("baseline", "empty", "monitor", "deep")
    print(f"torch {torch.__version__}, {args.threads} thread(s), instructions per step (callgrind)\n")
    print("| model | baseline step | empty TorchFunctionMode | monitor | monitor / empty mode | monitor --deep |")
    print("|---|---|---|---|---|---|")
    for case, (label, _, _) in enumerate(CASES):
        n = args.small_steps if case == 0 else args.medium_steps
        jobs = [(v, case, k) for v in variants for k in (n // 4, n)]
        with ThreadPoolExecutor(max(1, os.cpu_count() or 1)) as pool:
            counts = dict(zip(jobs, pool.map(lambda j: _count(*j, args.threads), jobs)))
        per = {v: (counts[(v, case, n)] - counts[(v, case, n // 4)]) / (n - n // 4) for v in variants}
        b, e = per["baseline"], per["empty"]
        print(f"| {label} ({n} steps) | {b / 1e6:.2f} M | {e / b:.3f}x | {per['monitor'] / b:.3f}x "
              f"| **{per['monitor'] / e:.3f}x** | {per['deep'] / b:.3f}x ({per['deep'] / e:.3f}x the empty mode) |")


CASES = [
    ("small MLP 32-64-64-10, batch 32", [32, 64, 64, 10], 32),
    ("medium MLP 512-1024-1024-10, batch 256", [512, 1024, 1024, 10], 256),
]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        torch.set_num_threads(int(sys.argv[6]) if len(sys.argv) > 6 else 1)
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--small-steps", type=int, default=1000)
    ap.add_argument("--medium-steps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--instructions", action="store_true", help="count instructions with callgrind")
    args = ap.parse_args()
    if args.instructions:
        if "--small-steps" not in sys.argv:
            args.small_steps = 300
        if "--medium-steps" not in sys.argv:
            args.medium_steps = 12
        instructions(args)
        return
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    cases = [(label, sizes, batch, args.small_steps if i == 0 else args.medium_steps)
             for i, (label, sizes, batch) in enumerate(CASES)]
    variants = ("baseline", "empty", "monitor", "deep")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {args.clock} time, "
          f"median of {args.repeats} interleaved repeats\n")
    print("| model | baseline step | empty TorchFunctionMode | monitor | monitor / empty mode | monitor --deep |")
    print("|---|---|---|---|---|---|")
    for label, sizes, batch, n in cases:
        times = {v: [] for v in variants}
        for _ in range(args.repeats):
            for v in variants:
                times[v].append(timed(v, sizes, batch, n))

        def ratio(a, b):
            return statistics.median(x / y for x, y in zip(times[a], times[b]))

        base = statistics.median(times["baseline"])
        print(f"| {label} ({n} steps) | {base * 1e3:.3f} ms | {ratio('empty', 'baseline'):.2f}x "
              f"| {ratio('monitor', 'baseline'):.2f}x | **{ratio('monitor', 'empty'):.3f}x** "
              f"| {ratio('deep', 'baseline'):.2f}x ({ratio('deep', 'empty'):.2f}x the empty mode) |")

if __name__ == "__main__":
    main()
