"""Overhead of the runtime monitor on a training loop (not a test).

    python bench/runtime_overhead.py [--repeats 3] [--small-steps 1000] [--medium-steps 60]

Adam + cross-entropy (zero_grad, forward, backward, step, loss.item()), one intra-op thread,
baseline / monitor / monitor --deep interleaved within each repeat; the median of the repeats per
variant. Prints a Markdown table of the per-step times and the ratios to the baseline.
"""

from __future__ import annotations

import argparse
import statistics
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


def timed(variant, sizes, batch, n):
    model, opt, x, t = make(sizes, batch)
    steps(model, opt, x, t, max(1, n // 20))  # warm-up (allocator, Adam state)
    start = time.perf_counter()
    if variant == "baseline":
        steps(model, opt, x, t, n)
    elif variant == "empty":
        with _EmptyMode():
            steps(model, opt, x, t, n)
    else:
        with monitor(deep=(variant == "deep")) as m:
            steps(model, opt, x, t, n)
        assert not m.findings, m.findings
    return (time.perf_counter() - start) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--small-steps", type=int, default=1000)
    ap.add_argument("--medium-steps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cases = [
        ("small MLP 32-64-64-10, batch 32", [32, 64, 64, 10], 32, args.small_steps),
        ("medium MLP 512-1024-1024-10, batch 256", [512, 1024, 1024, 10], 256, args.medium_steps),
    ]
    variants = ("baseline", "empty", "monitor", "deep")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), median of {args.repeats} interleaved repeats\n")
    print("| model | baseline step | empty TorchFunctionMode | monitor | monitor --deep |")
    print("|---|---|---|---|---|")
    for label, sizes, batch, n in cases:
        times = {v: [] for v in variants}
        for _ in range(args.repeats):
            for v in variants:
                times[v].append(timed(v, sizes, batch, n))
        med = {v: statistics.median(ts) for v, ts in times.items()}
        base = med["baseline"]
        print(f"| {label} ({n} steps) | {base * 1e3:.3f} ms | {med['empty'] / base:.2f}x | {med['monitor'] / base:.2f}x "
              f"({med['monitor'] * 1e3:.3f} ms) | {med['deep'] / base:.2f}x ({med['deep'] * 1e3:.3f} ms) |")


if __name__ == "__main__":
    main()
