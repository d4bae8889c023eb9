"""How fast is `ddpdoctor lint` next to a bare `ast.parse` of the same files?

    python benchmarks/lint_speed.py [FOLDER]

FOLDER defaults to the installed torch package (about 2,300 files), found without importing it.
Both sides read the same list of files from a warm page cache; the best of --repeat runs counts.
The target is lint at most 1.5x the parse time, cross-file reading included (lint follows each
script's imports into the project, as `ddpdoctor lint FOLDER` does). Not a test: it prints numbers."""

from __future__ import annotations

import argparse
import ast
import contextlib
import gc
import importlib.util
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ddpdoctor.lint.engine import lint_files  # noqa: E402
from ddpdoctor.lint.files import collect_files  # noqa: E402


def default_tree() -> str:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed: pass a folder of Python files")
    return list(spec.submodule_search_locations)[0]


def parse_only(files: list[str]) -> None:
    for path in files:
        with open(path, "rb") as fh:
            data = fh.read()
        with contextlib.suppress(SyntaxError, ValueError):
            ast.parse(data, filename=path)


def parse_only_gc_paused(files: list[str]) -> None:
    """The same loop with the cycle collector paused, as lint runs: the like-for-like figure."""
    gc.disable()
    try:
        parse_only(files)
    finally:
        gc.enable()


def best_of(repeat: int, fn, files: list[str]) -> float:
    """CPU seconds of this process (not wall time): on a machine shared with other jobs, wall
    time measures the neighbours as much as the code."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn(files)
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = args.folder or default_tree()
    files = collect_files([folder])
    size = sum(os.path.getsize(f) for f in files)
    parse_only(files)  # warm the page cache for both sides
    findings: list = []
    # Alternate the three, round after round, so a busy neighbour slows all of them alike.
    rounds = [
        (
            best_of(1, parse_only, files),
            best_of(1, parse_only_gc_paused, files),
            best_of(1, lambda fs: findings.append(len(lint_files(fs))), files),
        )
        for _ in range(args.repeat)
    ]
    parse_s, paused_s, lint_s = (min(col) for col in zip(*rounds, strict=True))
    print(f"tree:      {folder}")
    print(f"files:     {len(files)} ({size / 1e6:.1f} MB), best of {args.repeat}, CPU time")
    print(f"ast.parse: {parse_s:7.2f} s   (gc paused: {paused_s:.2f} s)")
    print(f"lint:      {lint_s:7.2f} s   ({findings[-1]} findings; imports followed)")
    print(f"ratio:     {lint_s / parse_s:7.2f}x  (target <= 1.5x)")
    print(f"ratio vs parse with gc paused: {lint_s / paused_s:.2f}x")


if __name__ == "__main__":
    main()
