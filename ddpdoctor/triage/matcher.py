"""Match candidate lines against the signature table and rank what was found.

Ranking (best first), following torchelastic's rule that the first failure is the root cause:
1. causes before symptoms (an OOM on rank 3 explains the watchdog timeouts on the other ranks,
   whatever order the lines were printed in);
2. what torchrun's "Root Cause (first observed failure)" block points at: a match inside the
   block, or on the rank it names;
3. the earliest line;
4. table order (the more specific signature).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import BinaryIO

from ddpdoctor.triage.lines import decode, shown, strip_prefixes
from ddpdoctor.triage.scan import Candidate, Counts, scan
from ddpdoctor.triage.signatures import (
    NCCL_VERSION_LINE,
    NCCL_VERSION_SKEW,
    SIGNATURES,
    Signature,
)

MAX_EVIDENCE = 5  # the first line plus lines from further ranks
ROOT_BLOCK_LINES = 200  # how far torchrun's root-cause block (with its traceback) may reach
_ROOT_HEADER = re.compile(r"root\s+cause\s*\(first\s+observed\s+failure\)", re.I)
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)", re.I)


@dataclass
class Evidence:
    line: int
    text: str
    rank: int | None = None


@dataclass
class Match:
    signature: Signature
    order: int  # position in the table
    first_line: int
    evidence: list[Evidence] = field(default_factory=list)
    ranks: set[int] = field(default_factory=set)
    count: int = 0
    in_root_block: bool = False
    seen_lines: set[int] = field(default_factory=set)


@dataclass
class Diagnosis:
    matches: list[Match]
    lines_read: int
    bytes_read: int
    engine: str
    root_cause_rank: int | None


@dataclass
class _Line:
    no: int
    text: str
    lower: str
    rank: int | None
    hit: bool


class _Analyzer:
    def __init__(self) -> None:
        self.found: dict[str, Match] = {}
        self.root_line: int | None = None
        self.root_rank: int | None = None
        self.nccl_versions: dict[str, _Line] = {}  # first line that shows each version

    def _in_root_block(self, no: int) -> bool:
        return self.root_line is not None and 0 < no - self.root_line <= ROOT_BLOCK_LINES

    def line(self, prev: _Line | None, cur: _Line, nxt: _Line | None) -> None:
        if _ROOT_HEADER.search(cur.text):
            self.root_line, self.root_rank = cur.no, None
        elif self.root_rank is None and self._in_root_block(cur.no):
            m = _ROOT_RANK.match(cur.text)
            if m:
                self.root_rank = int(m.group(1))
        if "nccl version" in cur.lower and len(self.nccl_versions) < 16:
            v = NCCL_VERSION_LINE.search(cur.text)
            if v:
                self.nccl_versions.setdefault(v.group(1), cur)
        for order, sig in enumerate(SIGNATURES):
            self._try(order, sig, prev, cur, nxt)

    def _try(
        self, order: int, sig: Signature, prev: _Line | None, cur: _Line, nxt: _Line | None
    ) -> None:
        windows: list[tuple[_Line, ...]] = [(cur,)]
        if prev is not None:
            windows.append((prev, cur))
        if nxt is not None:
            windows.append((cur, nxt))
        if prev is not None and nxt is not None:
            windows.append((prev, cur, nxt))
        for window in windows:
            if len(window) == 1:
                gate = window[0].lower
            else:  # joined both ways: wrapped at a space, or hard-wrapped inside a word
                gate = " ".join(w.lower for w in window) + "\n" + "".join(w.lower for w in window)
            if not any(k in gate for k in sig.keywords):
                continue
            if _found(sig, window):
                self._record(order, sig, window)
                return

    def _record(self, order: int, sig: Signature, window: tuple[_Line, ...]) -> None:
        first = window[0]
        m = self.found.get(sig.code)
        if m is None:
            m = self.found[sig.code] = Match(sig, order, first.no)
        if first.no in m.seen_lines or (len(window) == 2 and window[1].no in m.seen_lines):
            return
        m.seen_lines.update(w.no for w in window)
        if len(m.seen_lines) > 4096:  # only needed to avoid double counts of neighbours
            m.seen_lines = {w.no for w in window}
        m.count += 1
        rank = next((w.rank for w in window if w.rank is not None), None)
        new_rank = rank is not None and rank not in m.ranks
        if rank is not None and len(m.ranks) < 1024:
            m.ranks.add(rank)
        if any(self._in_root_block(w.no) for w in window):
            m.in_root_block = True
        if len(m.evidence) < MAX_EVIDENCE and (not m.evidence or new_rank):
            m.evidence.extend(Evidence(w.no, shown(w.text), w.rank) for w in window)

    def _version_skew(self) -> Match | None:
        """Two processes that loaded different NCCL versions: a finding no single line shows."""
        if len(self.nccl_versions) < 2:
            return None
        lines = sorted(self.nccl_versions.values(), key=lambda w: w.no)
        m = Match(NCCL_VERSION_SKEW, len(SIGNATURES), lines[1].no, count=len(lines))
        m.evidence = [Evidence(w.no, shown(w.text), w.rank) for w in lines[:MAX_EVIDENCE]]
        m.ranks = {w.rank for w in lines if w.rank is not None}
        return m

    def ranked(self) -> list[Match]:
        kept = [m for m in self.found.values() if m.count >= m.signature.min_count]
        skew = self._version_skew()
        if skew is not None:
            kept.append(skew)
        for m in kept:
            if self.root_rank is not None and self.root_rank in m.ranks:
                m.in_root_block = True
        return sorted(
            kept,
            key=lambda m: (m.signature.tier, not m.in_root_block, m.first_line, m.order),
        )


def _found(sig: Signature, window: tuple[_Line, ...]) -> bool:
    """A match in one line, or one that spans the line breaks of a window: a message wrapped
    at a space (joined with one) or hard-wrapped at a fixed width inside a word (joined with
    nothing). A match must cross every break of its window; one that fits in fewer lines
    belongs to the smaller window."""
    if len(window) == 1:
        return sig.search(window[0].text) is not None
    for sep in (" ", ""):
        joined = sep.join(w.text for w in window)
        cuts, pos = [], 0
        for w in window[:-1]:
            pos += len(w.text)
            cuts.append(pos)
            pos += len(sep)
        for p in sig.patterns:
            for m in p.finditer(joined):
                if m.start() < cuts[0] and m.end() > cuts[-1]:
                    return True
    return False


def _to_line(c: Candidate) -> _Line:
    text, rank = strip_prefixes(decode(c[1]))
    return _Line(c[0], text, text.lower(), rank, c[2])


def analyse(candidates: Iterable[Candidate]) -> _Analyzer:
    """Run every hit line (with its neighbours) through the table."""
    analyzer = _Analyzer()
    prev: _Line | None = None
    cur: _Line | None = None
    for c in candidates:
        line = _to_line(c)
        if cur is not None and cur.hit:
            nxt = line if line.no == cur.no + 1 else None
            analyzer.line(prev if prev and prev.no == cur.no - 1 else None, cur, nxt)
        prev, cur = cur, line
    if cur is not None and cur.hit:
        analyzer.line(prev if prev and prev.no == cur.no - 1 else None, cur, None)
    return analyzer


def _utf16_reader(stream: BinaryIO):
    """A read(n) that turns a UTF-16 stream (PowerShell's `>` writes it) into UTF-8 bytes."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")

    def read(n: int) -> bytes:
        while chunk := stream.read(n):
            text = decoder.decode(chunk)
            if text:
                return text.encode("utf-8")
        return decoder.decode(b"", final=True).encode("utf-8")

    return read


def explain_stream(stream: BinaryIO, engine: str = "auto") -> Diagnosis:
    """Diagnose a whole log read from a binary stream."""
    counts = Counts()
    peek = getattr(stream, "peek", None)
    head = peek(2)[:2] if peek else b""
    if head in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 with a byte-order mark
        used, candidates = scan(_utf16_reader(stream), counts, engine)
    else:
        used, candidates = scan(stream.read, counts, engine, stream)
    analyzer = analyse(candidates)
    return Diagnosis(analyzer.ranked(), counts.lines, counts.bytes, used, analyzer.root_rank)


def explain_text(text: str, engine: str = "python") -> Diagnosis:
    """Diagnose a log given as a string (tests, library use)."""
    import io

    return explain_stream(io.BytesIO(text.encode("utf-8", errors="replace")), engine)
