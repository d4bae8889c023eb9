"""How often does `ddpdoctor explain` name the confirmed cause of a real public report?

    python benchmarks/explain_accuracy.py [--misses tune] [--split tune|heldout|both]

Reads the corpus in tests/fixtures/triage/corpus/reports.txt (real reports from public issue
threads, each with the cause its thread confirmed) and prints, per root-cause category and for
both splits, top-1 (the first candidate is the confirmed cause) and top-3 (it is among the first
three). Also runs the healthy logs (tests/fixtures/triage/corpus/healthy/) and counts any that get
a diagnosis. The held-out split is fixed by a hash of each reference; tune on `tune` only:
`--misses` lists the misses of the tune split and refuses to list held-out ones.
Not a test: it prints figures (tests/triage/test_corpus.py holds the thresholds).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "fixtures" / "triage" / "corpus")]

import corpus  # noqa: E402

from ddpdoctor.triage.matcher import explain_text  # noqa: E402
from ddpdoctor.triage.signatures import ROOT_CAUSES  # noqa: E402


def ranked_causes(text: str) -> list[str]:
    """Root causes in the order explain ranks them (its candidates)."""
    return [c.root_cause for c in explain_text(text).candidates]


def score(reports: list[corpus.Report]) -> dict[str, tuple[int, int, int]]:
    """category -> (reports, top-1 hits, top-3 hits)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in reports:
        ranked = ranked_causes(r.text)
        row = out[r.category]
        row[0] += 1
        row[1] += bool(ranked[:1] == [r.category])
        row[2] += r.category in ranked[:3]
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def _pct(a: int, n: int) -> str:
    return f"{100 * a / n:5.1f}%" if n else "    -"


def print_table(title: str, table: dict[str, tuple[int, int, int]]) -> None:
    print(f"\n{title}")
    print(f"  {'category':22} {'n':>3} {'top-1':>7} {'top-3':>7}")
    n = t1 = t3 = 0
    for cat in ROOT_CAUSES:
        if cat not in table:
            continue
        c, a, b = table[cat]
        n, t1, t3 = n + c, t1 + a, t3 + b
        print(f"  {cat:22} {c:3} {_pct(a, c):>7} {_pct(b, c):>7}")
    print(f"  {'all':22} {n:3} {_pct(t1, n):>7} {_pct(t3, n):>7}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--misses", choices=["tune", "heldout"], help="list the misses of a split")
    args = parser.parse_args()
    reports = corpus.load_reports()
    by_split = {s: [r for r in reports if r.split == s] for s in ("tune", "heldout")}
    prose = [r for r in reports if r.kind == "prose"]
    print(
        f"corpus: {len(reports)} reports ({len(prose)} prose tickets), "
        f"{len(by_split['tune'])} tune / {len(by_split['heldout'])} held out"
    )
    for split in ("tune", "heldout"):
        print_table(f"split {split}", score(by_split[split]))
    for split in ("tune", "heldout"):
        print_table(f"prose tickets, split {split}", score([r for r in prose if r.split == split]))
    healthy = corpus.healthy_logs()
    flagged = [name for name, raw in healthy.items() if explain_text(raw.decode()).matches]
    print(f"\nhealthy logs: {len(healthy)}, with a diagnosis: {len(flagged)} {flagged or ''}")
    if args.misses == "heldout":
        print("refusing to list held-out misses: tune on the tune split only", file=sys.stderr)
        return 2
    if args.misses == "tune":
        print("\nmisses (tune):")
        for r in by_split["tune"]:
            ranked = ranked_causes(r.text)
            if ranked[:1] != [r.category]:
                print(f"  {r.ref}  want {r.category}  got {ranked[:3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
