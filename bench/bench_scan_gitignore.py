"""Time `.gitignore` matching on hostile patterns: RE2 (what `tracker scan` uses) against Python's `re`.

Run: python bench/bench_scan_gitignore.py [--paths 10000] [--stars 40]

A line of N `*` before a literal makes a backtracking regex try every way of splitting the
name between the stars: Python's `re` (pathspec's "simple" backend) grows by about ×10 per
two stars on a 25-character name. RE2 runs in time linear in the path whatever the pattern.
The figures: RE2 over PATHS paths with STARS stars, and `re` on one path for 4, 6 and 8 stars
(more would take minutes; the growth is the point).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pathspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracker.pipeline.scan.files import GITIGNORE_BACKEND


def timed(spec: pathspec.GitIgnoreSpec, paths: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    ignored = sum(1 for path in paths if spec.check_file(path).include)
    return time.perf_counter() - start, ignored


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--paths", type=int, default=10_000)
    parser.add_argument("--stars", type=int, default=40)
    args = parser.parse_args()
    lines = ["*" * args.stars + "x", "a" + "*a" * (args.stars // 2) + "b.py"]
    paths = [f"src/pkg{i % 100}/{'a' * 20}xb{i}.py" for i in range(args.paths)]

    spec = pathspec.GitIgnoreSpec.from_lines(lines, backend=GITIGNORE_BACKEND)
    seconds, ignored = timed(spec, paths)
    print(f"{GITIGNORE_BACKEND}: {args.stars} stars, {args.paths:,} paths: {seconds:.3f} s "
          f"({seconds / args.paths * 1e6:.1f} µs a path), {ignored} ignored")

    one = [f"{'a' * 20}xb.py"]
    previous = None
    for stars in (4, 6, 8):
        simple = pathspec.GitIgnoreSpec.from_lines(["*" * stars + "x"], backend="simple")
        seconds, _ = timed(simple, one)
        growth = f", ×{seconds / previous:,.0f} for two more stars" if previous else ""
        print(f"re (simple backend): {stars} stars, 1 path: {seconds:.4f} s{growth}")
        previous = seconds


if __name__ == "__main__":
    main()
