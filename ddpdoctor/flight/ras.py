"""NCCL RAS text (`ncclras`, the report NCCL ≥2.24 prints on its RAS port): the communicators it
flags and the ranks it names. Its per-communicator blocks start with a line such as
`#0-0 (fa93daea854b060b) MISMATCH` and list the ranks as
`Rank 12 -- GPU 4 managed by process 323032 on node 10.0.0.1`; a count mismatch says how many
ranks "have launched up to operation N"."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ddpdoctor.report import problems
from ddpdoctor.report.model import Finding

_BLOCK = re.compile(
    r"^#(?P<group>\d+)-(?P<comm>\d+) \((?P<hash>[0-9a-fA-F]+)\) (?P<errors>[A-Z_,]+)\s*$"
)
_RANK = re.compile(
    r"^\s*Rank (?P<rank>\d+) -- GPU (?P<gpu>\d+) managed by process (?P<pid>\d+) on node (?P<node>\S+)"
)
_UP_TO = re.compile(r"^\s*(?P<n>\d+) ranks? ha(?:s|ve) launched up to operation (?P<op>\d+)")
_MISSING = re.compile(r"^\s*Missing communicator data from (?P<n>\d+) ranks?")
_OP = re.compile(r"different (?P<op>\w+) operation counts")
_MARKERS = ("Communicators...", "Job summary")


@dataclass
class RasRank:
    rank: int
    gpu: int
    pid: int
    node: str


@dataclass
class RasBlock:
    group: int
    comm: int
    hash: str
    errors: list[str]
    lines: list[str] = field(default_factory=list)
    ranks: list[RasRank] = field(default_factory=list)
    counts: list[tuple[int, int]] = field(default_factory=list)  # (ranks, up to operation)
    missing: int = 0
    op: str | None = None


def looks_like_ras(text: str) -> bool:
    return any(m in text for m in _MARKERS) and bool(
        re.search(r"^#\d+-\d+ \([0-9a-fA-F]+\) ", text, re.M) or "Group     Comms" in text
    )


def parse(text: str) -> list[RasBlock]:
    blocks: list[RasBlock] = []
    for line in text.splitlines():
        head = _BLOCK.match(line.strip())
        if head:
            blocks.append(
                RasBlock(
                    int(head["group"]), int(head["comm"]), head["hash"], head["errors"].split(",")
                )
            )
            continue
        if not blocks or not line.strip():
            continue
        b = blocks[-1]
        b.lines.append(line.strip())
        if m := _RANK.match(line):
            b.ranks.append(RasRank(int(m["rank"]), int(m["gpu"]), int(m["pid"]), m["node"]))
        elif m := _UP_TO.match(line):
            b.counts.append((int(m["n"]), int(m["op"])))
        elif m := _MISSING.match(line):
            b.missing = int(m["n"])
        elif m := _OP.search(line):
            b.op = m["op"]
    return blocks


def _who(ranks: list[RasRank]) -> str:
    return "; ".join(f"rank {r.rank} (GPU {r.gpu}, pid {r.pid} on {r.node})" for r in ranks[:8])


def findings(blocks: list[RasBlock]) -> list[Finding]:
    out = []
    for b in blocks:
        comm = f"communicator #{b.group}-{b.comm} ({b.hash})"
        named = sorted(r.rank for r in b.ranks)
        if "MISMATCH" in b.errors and b.counts:
            low = min(op for _, op in b.counts)
            counts = ", ".join(f"{n} up to operation {op}" for n, op in b.counts)
            out.append(
                problems.RAS_COUNT_MISMATCH.finding(
                    f"NCCL RAS: {comm} ranks launched different {b.op or 'collective'} counts "
                    f"({counts}); the ranks at operation {low} never called #{low + 1}"
                    + (f"; named: {_who(b.ranks)}" if b.ranks else ""),
                    named,
                    group=b.group,
                    seq=low + 1,
                )
            )
        if "INCOMPLETE" in b.errors or b.missing:
            out.append(
                problems.RAS_MISSING_RANKS.finding(
                    f"NCCL RAS: {comm} has no data from {b.missing or len(b.ranks)} rank(s)"
                    + (f": {_who(b.ranks)}" if b.ranks else ""),
                    named,
                    group=b.group,
                )
            )
    return out
