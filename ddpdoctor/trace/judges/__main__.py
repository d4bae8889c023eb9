"""`python -m ddpdoctor.trace.judges RUN_DIR [--json]`: judge the trace-R.json files of a run
folder and print the findings (a plain view until `ddpdoctor run` renders its report)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ddpdoctor.trace.judges import judge
from ddpdoctor.trace.record import read_records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddpdoctor.trace.judges", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--json", action="store_true", help="the findings as JSON on stdout")
    args = parser.parse_args(argv)
    records = read_records(args.run_dir)
    if not records:
        print(f"no trace-R.json records in {args.run_dir}", file=sys.stderr)
        return 2
    findings = judge(records, max(r.world_size for r in records.values()))
    if args.json:
        print(json.dumps({"findings": [f.to_json() for f in findings]}, indent=2))
    else:
        for f in findings:
            where = f"{f.where}: " if f.where else ""
            print(f"{where}{f.code} [{f.symbol}] {f.level.word}: {f.message}\n    -> {f.hint}")
        print(f"{len(findings)} finding(s) from {len(records)} rank record(s).")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
