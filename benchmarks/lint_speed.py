"""How fast is `ddpdoctor lint` next to a bare `ast.parse` of the same files?

    python benchmarks/lint_speed.py [FOLDER]
    python benchmarks/lint_speed.py --trees DIR --repeat 7    # each DIR/owner+name on its own

FOLDER defaults to the installed torch package (about 2,300 files), found without importing it.
Both sides read the same list of files from a warm page cache; the best of --repeat runs counts.
With --trees (the folder `lint_corpus_trees.py` lays out), each repository's tree is linted as
its own project (its folder as --root, as `lint_recall.py` does) and its ratio is printed per
round: median and spread (min-max) over the rounds, then the same for all trees together.
The target is lint at most 1.5x the parse time, cross-file reading included (lint follows each
script's imports into the project, as `ddpdoctor lint FOLDER` does). Lint is given the files as
`ddpdoctor lint FOLDER` gives them, found in a folder (named=()): one with nothing for the checks
is not parsed unless a module that is reaches it, while the parse side parses every file.
Not a test: it prints numbers."""

from __future__ import annotations

import argparse
import ast
import contextlib
import gc
import importlib.util
import os
import statistics
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


def cpu_seconds(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def per_tree(trees: str, repeat: int) -> None:
    """Ratio per repository tree, rounds alternating parse and lint so load hits both alike."""
    layout = [
        (os.path.join(trees, name), collect_files([os.path.join(trees, name)]))
        for name in sorted(os.listdir(trees))
        if os.path.isdir(os.path.join(trees, name))
    ]
    for _, files in layout:
        parse_only(files)  # warm the page cache
    totals: list[tuple[float, float]] = []
    print(
        "tree                                       files     parse s   lint s   ratio: median (min-max)"
    )
    for tree, files in layout:
        rounds = []
        for _ in range(repeat):
            p = cpu_seconds(lambda fs=files: parse_only(fs))
            t = cpu_seconds(lambda fs=files, r=tree: lint_files(fs, root=r, named=()))
            rounds.append((p, t))
        totals.append((min(p for p, _ in rounds), min(t for _, t in rounds)))
        ratios = sorted(t / p for p, t in rounds if p > 0)
        print(
            f"{os.path.basename(tree):42} {len(files):5}  {totals[-1][0]:8.3f} {totals[-1][1]:8.3f}"
            f"   {statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"
        )
    worst = max((t / p for p, t in totals if p > 0), default=0.0)
    parse_s, lint_s = sum(p for p, _ in totals), sum(t for _, t in totals)
    print(f"all trees: parse {parse_s:.2f} s, lint {lint_s:.2f} s (best round of each tree)")
    print(
        f"ratio:     {lint_s / parse_s:.2f}x over all trees; worst tree {worst:.2f}x (best rounds)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trees", help="a folder of repository trees, each judged on its own")
    args = parser.parse_args()
    if args.trees:
        per_tree(args.trees, args.repeat)
        return
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
            best_of(1, lambda fs: findings.append(len(lint_files(fs, named=()))), files),
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
