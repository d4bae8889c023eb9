"""`ddpdoctor run`'s rank side and judges. Importing this package imports no torch.

- `python -m ddpdoctor.trace [--run-dir D] [--steps N] [--max-time S] [--fingerprint-every K]
  [--] (SCRIPT | -m MODULE) [ARGS...]`: what torchrun starts on every rank (entry.py).
- `record.read_records(run_dir) -> {rank: TraceRecord}` from `trace-R.json` (record.py).
- `judges.judge(records, world_size, exit_codes=..., stacks=...) -> [TraceFinding]` (judges/).
- `stacks.request_dump(pid, stack_file(run_dir, rank))`, `stacks.stopped_at(text)` (stacks.py).
- `catalog`: the Problem constants (DDL001-DDL007 in lint's words, DDR###).

See README.md beside this file."""
