"""PyTorch's flight recorder, read by ddpdoctor: the dumps every rank writes (ours at a verdict,
or torch's own JSON and pickle dumps from any job), an analysis of where the ranks part, and NCCL
RAS text. Pure: no torch, no rich; the rank side that writes dumps is `ddpdoctor.rank.flight`.

- `dumps.read_path(path) -> [Dump]` (dumps.py; pickles only through `safe_pickle`).
- `analysis.analyze(dumps, world_size) -> Flight` (analysis.py): per process group, the
  collective where the ranks part, who never joined it, op/shape/dtype mismatches, the last
  collective every rank completed; `Flight.findings(stacks)` in the probe catalog's codes.
- `ras.parse(text) -> [RasGroup]` (ras.py).
"""
