"""How far two judges agree on the corpus: the ceiling for any tool measured against one of them.

    python benchmarks/judge_agreement.py --trees /tmp/lint_trees

`benchmarks/lint_rejudge.jsonl` holds a second, independent verdict on scripts of the corpus
(`fresh19` and `fresh20`, 60 scripts), made blind by reviewers who saw neither the first
verdicts nor lint's findings, from the same judging guide. Per rule this prints the places both
judges marked, those only one marked, and the second judge's recall against the first (and the
reverse): were the first judge the truth, the second would score that much. Lines of one
statement count as one place, as in lint_recall.py. Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lint_recall import fmt, load, statement_lines  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def places(verdict: str | list[int], lines: dict[int, int]) -> set[int]:
    return set() if verdict == "clean" else {lines.get(n, n) for n in verdict}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", required=True, help="folder with owner+name/ trees")
    parser.add_argument("--corpus", default=os.path.join(HERE, "lint_corpus.jsonl"))
    parser.add_argument("--second", default=os.path.join(HERE, "lint_rejudge.jsonl"))
    args = parser.parse_args()
    first = {(r["repo"], r["path"], r["commit"]): r for r in load(args.corpus)}
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # both, first only, second
    scripts = 0
    for row in load(args.second):
        key = (row["repo"], row["path"], row["commit"])
        if key not in first:
            print(f"not in the corpus: {row['repo']}:{row['path']}", file=sys.stderr)
            continue
        scripts += 1
        script = os.path.join(args.trees, row["repo"].replace("/", "+"), row["path"])
        lines = statement_lines(script)
        for code, verdict in first[key]["verdicts"].items():
            a, b = places(verdict, lines), places(row["verdicts"][code], lines)
            counts[code][0] += len(a & b)
            counts[code][1] += len(a - b)
            counts[code][2] += len(b - a)
    print(f"{scripts} scripts judged twice")
    print("rule    both  first-only  second-only  second-vs-first  first-vs-second")
    total = [0, 0, 0]
    for code in sorted(counts):
        both, one, two = counts[code]
        total = [total[0] + both, total[1] + one, total[2] + two]
        r1 = both / (both + one) if both + one else None
        r2 = both / (both + two) if both + two else None
        print(f"{code}  {both:4}  {one:10}  {two:11}  {fmt(r1):>15}  {fmt(r2):>15}")
    both, one, two = total
    print(
        f"all     {both:4}  {one:10}  {two:11}  {fmt(both / (both + one)):>15}  "
        f"{fmt(both / (both + two)):>15}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
