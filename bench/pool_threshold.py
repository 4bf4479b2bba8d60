"""When does the process pool pay off? Lints k copies of the fixtures (about 5 KB each) in the
main process and over a pool of N workers, for growing k, and prints the times; the engine's
``IN_PROCESS_BYTES`` is chosen from this (below it, a run stays in the main process).

    python -m bench.pool_threshold [-j N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, REPO)
    import gradlint.engine as engine
    from gradlint.engine import Options, Task, lint_tasks
    from gradlint.rule import registry

    codes = frozenset(registry())
    src = sorted(f for f in os.listdir(os.path.join(REPO, "fixtures")) if f.endswith(".py"))
    work = tempfile.mkdtemp()
    try:
        print(f"| files | KiB | in-process (ms) | pool of {args.jobs} (ms) |\n|---:|---:|---:|---:|")
        for k in (1, 2, 4, 8, 16, 32, 64):
            files = []
            for i in range(k):
                name = src[i % len(src)]
                dst = os.path.join(work, f"{k}_{i}_{name}")
                shutil.copyfile(os.path.join(REPO, "fixtures", name), dst)
                files.append(dst)
            tasks = [Task(f, f, Options(codes=codes)) for f in files]
            kib = sum(os.path.getsize(f) for f in files) / 1024
            res = []
            for threshold, jobs in ((1 << 60, 1), (0, args.jobs)):
                engine.IN_PROCESS_BYTES = threshold
                times = []
                for _ in range(args.repeat):
                    t = time.perf_counter()
                    lint_tasks(tasks, jobs=jobs)
                    times.append(time.perf_counter() - t)
                res.append(statistics.median(times) * 1000)
            print(f"| {k} | {kib:.0f} | {res[0]:.0f} | {res[1]:.0f} |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
