"""The parse floor: read, decode and ``libcst.parse_module`` every file of a list, and nothing
else; over N processes with ``-j N`` (files spread by size, as the engine does).

    python -m bench.parse_floor FILELIST [-j N]

FILELIST holds one path per line. Prints the number of files parsed and the failures.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import List, Tuple


def _parse(paths: List[str]) -> Tuple[int, int]:
    import libcst

    from gradlint.engine import decode

    ok = bad = 0
    for p in paths:
        try:
            with open(p, "rb") as fh:
                libcst.parse_module(decode(fh.read()))
            ok += 1
        except Exception:
            bad += 1
    return ok, bad


def _bins(paths: List[str], n: int) -> List[List[str]]:
    sized = sorted(((os.path.getsize(p) + 2048, p) for p in paths), reverse=True)
    bins: List[List[str]] = [[] for _ in range(n)]
    loads = [0] * n
    for size, p in sized:
        i = loads.index(min(loads))
        bins[i].append(p)
        loads[i] += size
    return [b for b in bins if b]


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("filelist")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    args = ap.parse_args(argv)
    sys.setrecursionlimit(10000)
    with open(args.filelist, encoding="utf-8") as fh:
        paths = [line.rstrip("\n") for line in fh if line.strip()]
    if args.jobs <= 1:
        ok, bad = _parse(paths)
    else:
        import libcst  # noqa: F401  (imported once, before the fork, as gradlint does)

        ok = bad = 0
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for o, b in pool.map(_parse, _bins(paths, args.jobs * 4)):
                ok, bad = ok + o, bad + b
    print(f"parsed {ok} files, {bad} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
