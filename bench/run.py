"""Benchmarks: ``python -m bench.run [DIR ...]`` (or ``python bench/run.py``).

On the installed torch package's source tree (unless ``--no-torch``) and on each DIR, measures:
gradlint cold (empty cache) with -j 1 and -j N (N = cores), warm (cache populated, nothing
changed), warm with one file edited, the parse floor (only ``libcst.parse_module`` on the same
files, one process and N processes), the ratio of each to the floor, lines per second and peak
memory; and ruff / fixit / torchfix / torch-preflight on the same files when installed. Prints
Markdown tables.

Each tree is copied (the files gradlint lints: .py, and .ipynb) to a temporary directory first, so the "edited"
run can change a file without touching the original; every command is a fresh subprocess
(interpreter start and imports included, as a user sees it). Times are the median of
``--repeat`` runs (default 3); ``--slow-repeat`` (default 1) for the cold runs and the floors.

Peak memory: "max proc" is the largest ru_maxrss of the process and its reaped children
(``os.wait4``); "tree" is the largest sum of RSS over the process tree, sampled from /proc every
20 ms (Linux only; "-" elsewhere).

Options: ``--cold-only`` measures only the 1-process floor and gradlint cold -j 1;
``--prefilter-check`` also lints each tree with the pre-filter off and reports whether
the findings are identical; ``--startup`` also measures import times.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple  # noqa: F401

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable


# ---------------------------------------------------------------------------- measuring
def _children(pid: int) -> List[int]:
    out: List[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(x) for x in fh.read().split())
    except OSError:
        pass
    return out


def _rss_tree(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
        todo.extend(_children(p))
    return total


LAST_CPU = [0.0]  # CPU seconds (user + system) of the last measured process (not its children)


def measure(cmd: Sequence[str], cwd: str, env: Optional[Dict[str, str]] = None) -> Tuple[float, float, float, int]:
    """(seconds, max RSS of one process in MiB, peak RSS of the tree in MiB (0: unknown),
    exit status)."""
    start = time.perf_counter()
    p = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_tree(p.pid))
            done.wait(0.02)

    sampler = None
    if os.path.isdir("/proc"):
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
    _, status, usage = os.wait4(p.pid, 0)
    elapsed = time.perf_counter() - start
    done.set()
    if sampler is not None:
        sampler.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    LAST_CPU[0] = usage.ru_utime + usage.ru_stime
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if p.stderr:
        p.stderr.close()
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {err.strip()[-500:]}")
    return elapsed, usage.ru_maxrss / 1024, peak[0] / 2**20, p.returncode


def median_of(n: int, run, before=None) -> Tuple[float, float, float]:
    times, rss, tree = [], [], []
    for i in range(n):
        if before is not None:
            before(i)
        t, r, s, _ = run()
        times.append(t)
        rss.append(r)
        tree.append(s)
    return statistics.median(times), max(rss), max(tree)


# ---------------------------------------------------------------------------- trees
def torch_dir() -> Optional[str]:
    spec = importlib.util.find_spec("torch")  # does not import torch
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def copy_tree(src: str, dst: str) -> Tuple[List[str], int, int]:
    """Copy the files gradlint would lint (default excludes) from src to dst: (relative paths,
    lines, bytes)."""
    from gradlint.config import Settings
    from gradlint.discovery import discover

    from pathlib import Path

    settings = Settings(root=Path(src).resolve())
    files = discover([src], settings)
    rel, lines, size = [], 0, 0
    for f in files:
        r = os.path.relpath(f, src)
        target = os.path.join(dst, r)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(f, target)
        with open(f, "rb") as fh:
            data = fh.read()
        lines += data.count(b"\n")
        size += len(data)
        rel.append(r)
    return rel, lines, size


# ---------------------------------------------------------------------------- other tools
def other_tools(tree: str) -> Dict[str, Optional[List[str]]]:
    """name -> command (None when not installed)."""
    tools: Dict[str, Optional[List[str]]] = {}
    ruff = shutil.which("ruff")
    tools["ruff"] = [ruff, "check", "--no-cache", "--exit-zero", "--quiet", tree] if ruff else None
    fixit = shutil.which("fixit")
    tools["fixit"] = [fixit, "lint", tree] if fixit else None
    torchfix = shutil.which("torchfix")
    tools["torchfix"] = [torchfix, tree] if torchfix else None
    pre = shutil.which("torch-preflight")
    tools["torch-preflight"] = [pre, "check", tree] if pre else None
    return tools


# ---------------------------------------------------------------------------- one tree
def bench_tree(label: str, src: str, jobs: int, repeat: int, slow_repeat: int, prefilter_check: bool,
               cold_only: bool = False) -> str:
    work = tempfile.mkdtemp(prefix="gradlint-bench-")
    try:
        tree = os.path.join(work, "tree")
        os.makedirs(tree)
        rel, lines, size = copy_tree(src, tree)
        if not rel:
            return f"### {label}\n\nno Python files in {src}\n"
        filelist = os.path.join(work, "files.txt")
        with open(filelist, "w", encoding="utf-8") as fh:
            fh.write("\n".join(os.path.join(tree, r) for r in rel) + "\n")
        cache_dir = os.path.join(work, "cache")
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("GRADLINT_CACHE_DIR", None)

        def gradlint(j: int, *extra: str):
            return lambda: measure([PY, "-m", "gradlint", "check", "-q", "--exit-zero", "-j", str(j),
                                    "--cache-dir", cache_dir, *extra, "tree"], cwd=work, env=env)

        def floor(j: int):
            return lambda: measure([PY, "-m", "bench.parse_floor", filelist, "-j", str(j)], cwd=REPO, env=env)

        def clear(_i: int) -> None:
            shutil.rmtree(cache_dir, ignore_errors=True)

        # a mid-sized file to edit: a different comment each time, so each run has one miss
        victim = os.path.join(tree, sorted(rel, key=lambda r: os.path.getsize(os.path.join(tree, r)))[len(rel) // 2])

        def edit(i: int) -> None:
            with open(victim, "a", encoding="utf-8") as fh:
                fh.write(f"\n# edited by bench {time.time()} {i}\n")

        print(f"### {label}: {len(rel)} files, {lines:,} lines, {size / 2**20:.1f} MiB\n\n"
              f"cold and floors: median of {slow_repeat}; warm and edited: median of {repeat}. "
              f"Ratios are to the 1-process parse floor unless said otherwise.\n\n"
              "| run | time (s) | ratio to floor | lines/s | peak RSS, max proc (MiB) | peak RSS, tree (MiB) |\n"
              "|---|---:|---:|---:|---:|---:|", flush=True)

        def row(name: str, r: Tuple[float, float, float], ratio: str) -> None:
            secs, rss, tree_rss = r
            print(f"| {name} | {secs:.2f} | {ratio} | {lines / secs:,.0f} | {rss:.0f} | {tree_rss:.0f} |", flush=True)

        f1 = median_of(slow_repeat, floor(1))
        row("parse floor, 1 process", f1, "1.00")
        if cold_only:
            floor_cpu = LAST_CPU[0]
            r = median_of(slow_repeat, gradlint(1), clear)
            row("gradlint cold -j 1", r, f"{r[0] / f1[0]:.2f}")
            # on a shared machine wall time depends on the load; CPU time much less
            return (f"\nCPU time (user + system) of the last run of each: parse floor {floor_cpu:.1f} s, "
                    f"gradlint cold -j 1 {LAST_CPU[0]:.1f} s, ratio {LAST_CPU[0] / floor_cpu:.2f}.\n")
        fN = median_of(slow_repeat, floor(jobs))
        row(f"parse floor, {jobs} processes", fN, f"{fN[0] / f1[0]:.2f}")
        r = median_of(slow_repeat, gradlint(1), clear)
        row("gradlint cold -j 1", r, f"{r[0] / f1[0]:.2f}")
        r = median_of(slow_repeat, gradlint(jobs), clear)  # leaves the cache populated
        row(f"gradlint cold -j {jobs}", r, f"{r[0] / fN[0]:.2f} (of the {jobs}-process floor)")
        r = median_of(repeat, gradlint(1))
        row("gradlint warm -j 1", r, f"{r[0] / f1[0]:.3f}")
        r = median_of(repeat, gradlint(jobs))
        row(f"gradlint warm -j {jobs}", r, f"{r[0] / f1[0]:.3f}")
        r = median_of(repeat, gradlint(jobs), edit)
        row(f"gradlint warm -j {jobs}, 1 file edited", r, f"{r[0] / f1[0]:.3f}")
        absent = []
        for name, cmd in other_tools("tree").items():
            if cmd is None:
                absent.append(name)
                continue
            try:
                r = median_of(repeat, lambda: measure(cmd, cwd=work))
                row(name, r, f"{r[0] / f1[0]:.2f}")
            except (RuntimeError, OSError) as exc:
                print(f"| {name} (failed: {str(exc)[:60]}) | - | - | - | - | - |", flush=True)
        out = ["", "Other linters: " + (f"absent: {', '.join(absent)}" if absent else "all present") + "."]
        if prefilter_check:
            out.append("")
            try:
                out.append(prefilter_compare(filelist, jobs))
            except Exception as exc:  # e.g. a rule module that does not import
                out.append(f"Pre-filter check failed: {type(exc).__name__}: {exc}")
        return "\n".join(out) + "\n"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def prefilter_compare(filelist: str, jobs: int) -> str:
    """Lint, with the pre-filter on and off, every file that the pre-filter skips (on the other
    files both take the same path, so their findings are the same by construction) and compare."""
    from gradlint.engine import PREFILTER_TOKENS, Options, Task, lint_tasks
    from gradlint.rule import registry

    with open(filelist, encoding="utf-8") as fh:
        files = [line.rstrip("\n") for line in fh if line.strip()]
    skipped = []
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        if not any(tok.encode() in data for tok in PREFILTER_TOKENS):
            skipped.append(f)
    codes = frozenset(registry())
    t0 = time.perf_counter()
    on = lint_tasks([Task(f, f, Options(codes=codes)) for f in skipped], jobs=jobs)
    t1 = time.perf_counter()
    off = lint_tasks([Task(f, f, Options(codes=codes, prefilter=False)) for f in skipped], jobs=jobs)
    t2 = time.perf_counter()

    def key(fs):
        return [(f.to_dict(), f.source_line, f.statement_line) for f in fs]

    same = key(on) == key(off)
    return (f"Pre-filter check (all rules): {len(skipped)} of {len(files)} files are skipped by the "
            f"pre-filter; on them, {len(on)} findings with it on ({t1 - t0:.1f} s), {len(off)} with it "
            f"off ({t2 - t1:.1f} s, the libcst parse and walk): {'identical' if same else 'DIFFERENT'}.")


# ---------------------------------------------------------------------------- startup
def startup(repeat: int) -> str:
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = []
    for label, code in (("python -c pass", "pass"), ("import libcst", "import libcst"),
                        ("import gradlint.cli", "import gradlint.cli"),
                        ("gradlint --version", "import sys; sys.argv=['gradlint','--version'];"
                                               "import gradlint.cli as c; c.main()")):
        times = []
        n = max(repeat, 5)
        for _ in range(n):
            t, _, _, _ = measure([PY, "-c", code], cwd=REPO, env=env)
            times.append(t)
        rows.append(f"| `{label}` | {statistics.median(times) * 1000:.0f} |")
    return (f"### Start-up (median of {max(repeat, 5)} subprocesses)\n\n| command | ms |\n|---|---:|\n" + "\n".join(rows) + "\n")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", help="directories to measure besides the torch source tree")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="N (default: cores)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the quick measurements (median)")
    ap.add_argument("--slow-repeat", type=int, default=1, help="runs of the cold runs and floors (median)")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch source tree")
    ap.add_argument("--prefilter-check", action="store_true", help="compare findings with the pre-filter off")
    ap.add_argument("--startup", action="store_true", help="measure import times too")
    ap.add_argument("--cold-only", action="store_true",
                    help="only the 1-process parse floor and gradlint cold -j 1 (the ratio the model's budget names)")
    args = ap.parse_args(argv)
    sys.path.insert(0, REPO)
    targets = []
    if not args.no_torch:
        t = torch_dir()
        if t is None:
            print("torch is not installed: skipping the torch source tree", file=sys.stderr)
        else:
            targets.append((f"torch source tree ({t})", t))
    for d in args.dirs:
        if not os.path.isdir(d):
            print(f"not a directory: {d}", file=sys.stderr)
            return 2
        targets.append((d, d))
    print(f"## gradlint benchmarks ({os.cpu_count()} cores, N = {args.jobs}, Python "
          f"{sys.version.split()[0]})\n", flush=True)
    if args.startup:
        print(startup(args.repeat), flush=True)
    for label, d in targets:
        print(bench_tree(label, d, args.jobs, args.repeat, args.slow_repeat, args.prefilter_check, args.cold_only),
              flush=True)
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        sys.path.insert(0, REPO)
    sys.exit(main())
