"""Peak memory (not a test): ``python -m bench.memory [DIR] [--jobs 2] [--sizes]``.

1. The peak resident memory of the whole process tree (the main process and its workers, RSS
   summed, sampled from /proc every 20 ms) of a cold ``gradlint check -j N`` on DIR (default: the
   installed torch package's source tree), and the largest single process.
2. ``--sizes``: where the memory goes: the peak RSS of one process that parses (libcst) and
   lints one file, for the largest files of DIR, against the file's size: the data behind
   ``engine.BIG_FILE_BYTES`` (files at least that large are parsed by one worker at a time).
Prints Markdown tables. Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from bench.run import measure, torch_dir

ONE_FILE = """
import resource, sys
from gradlint.engine import Options, lint_data
from gradlint.rule import registry
registry()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
data = open(sys.argv[1], "rb").read()
lint_data(sys.argv[1], data, Options(codes=frozenset(registry()), prefilter=False))
print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def tree_peak(directory: str, jobs: int) -> str:
    with tempfile.TemporaryDirectory() as cache:
        secs, max_proc, tree, _ = measure([sys.executable, "-m", "gradlint", "check", "--exit-zero", "-q",
                                           "-j", str(jobs), "--cache-dir", cache, directory], cwd=directory)
    return f"| cold -j {jobs} | {secs:.1f} | {max_proc:.0f} | {tree:.0f} |"


def sizes(directory: str, n: int = 8) -> None:
    files = []
    for root, _, names in os.walk(directory):
        for name in names:
            if name.endswith(".py"):
                p = os.path.join(root, name)
                files.append((os.path.getsize(p), p))
    files.sort(reverse=True)
    print("| file | size (KiB) | peak RSS added by the lint (MiB) | ratio |")
    print("|---|---:|---:|---:|")
    for size, path in files[:n]:
        out = subprocess.run([sys.executable, "-c", ONE_FILE, path], capture_output=True, text=True).stdout.split()
        if len(out) != 2:
            continue
        added = (int(out[1]) - int(out[0])) / 1024
        print(f"| {os.path.relpath(path, directory)} | {size / 1024:.0f} | {added:.0f} | {added * 1024 * 1024 / size:.0f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="the tree (default: the torch package's source)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--sizes", action="store_true", help="peak per file, for the largest files")
    args = ap.parse_args()
    directory = args.dir or torch_dir()
    if not directory:
        sys.exit("no directory given and torch is not installed")
    print(f"tree: {directory}\n")
    print("| run | time (s) | peak RSS, largest process (MiB) | peak RSS, process tree (MiB) |")
    print("|---|---:|---:|---:|")
    print(tree_peak(directory, args.jobs), flush=True)
    if args.sizes:
        print()
        sizes(directory)


if __name__ == "__main__":
    main()
