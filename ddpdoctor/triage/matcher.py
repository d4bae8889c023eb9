"""Match candidate lines against the signature table, read the ticket's prose, rank the causes.

Evidence is scored (signatures.WEIGHT): a cause signature weighs 10, a generic cause 5, a
symptom 3, prose phrases 1-5 each (capped per prose signature), so weak signals add up while a
traceback signature outweighs prose. Evidence is grouped by root cause into candidates, ranked:
1. causes before the rest (an OOM on rank 3 explains the watchdog timeouts on the other ranks,
   whatever order the lines were printed in); between causes, what torchrun's "Root Cause
   (first observed failure)" block points at (a match inside it, or on the rank it names),
   then the earliest line: the first failure is the root cause;
2. below causes, diagnoses before hints, then the higher score (several symptoms and phrases
   that agree outrank a lone one); 3. the earliest line; 4. table order.
A candidate is a diagnosis when a signature matched or its score reaches DIAGNOSIS_MIN;
weaker ones are shown as low-confidence hints only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import BinaryIO

from ddpdoctor.triage import prose
from ddpdoctor.triage.lines import decode, strip_prefixes
from ddpdoctor.triage.scan import Candidate, Counts, GrepFailed, regular_file_at_start, scan
from ddpdoctor.triage.signatures import (
    CAUSE,
    NCCL_PLUGIN_SKEW,
    NCCL_VERSION_SKEW,
    SIGNATURES,
    Signature,
    nccl_versions_in,
)

MAX_EVIDENCE = 5  # the first line plus lines from further ranks
ROOT_BLOCK_LINES = 200  # how far torchrun's root-cause block (with its traceback) may reach
DIAGNOSIS_MIN = 3.0  # the score a candidate needs to count as a diagnosis
CAUSE_LEVEL = 10.0  # a match this heavy is a cause
AMP_WARNING_WEIGHT = 8.0  # DDX205 when the same text shows AMP
_CACHE_MAX = 4096  # distinct lines (and line triples) remembered: repeats cost a lookup
_ROOT_HEADER = re.compile(r"root\s+cause\s*\(first\s+observed\s+failure\)", re.I)
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)", re.I)
_NCCL_HOST = re.compile(r"^\s*(?:\[\w+\]:\s?)?([\w.-]+):\d+:\d+\s+\[\d+\]")
_PLUGIN_INTERNAL = re.compile(r"could\s+not\s+find|no\s+plugin\s+found|using\s+internal", re.I)
_PLUGIN_LOADED = re.compile(
    r"plugin\s+path\s*:|loaded\s+net\s+plugin|using\s+network\s+plugin", re.I
)


@dataclass
class Evidence:
    """A line that shows a finding; `text` is whole (up to LINE_CAP): the report redacts it
    first and shortens it after, so a secret cut in half cannot slip through."""

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
    weight: float = 0.0
    reasons: list[str] = field(default_factory=list)


@dataclass
class CauseCandidate:
    """One root cause and the evidence for it, ranked against the others."""

    root_cause: str
    matches: list[Match]
    score: float
    diagnosis: bool
    cause: bool
    root_block: bool
    first_line: int
    order: int
    confidence: float = 0.0

    @property
    def why(self) -> list[str]:
        out: list[str] = []
        for m in self.matches:
            if m.signature.phrases:
                out.extend(f"the text {r}" for r in m.reasons)
            else:
                out.append(f"{m.signature.code} {m.signature.title} (line {m.first_line})")
                out.extend(m.reasons)
        return out


@dataclass
class Diagnosis:
    matches: list[Match]
    lines_read: int
    bytes_read: int
    engine: str
    root_cause_rank: int | None
    candidates: list[CauseCandidate] = field(default_factory=list)
    prose_lines: int = 0  # lines of the head read as prose
    long_lines_cut: int = 0  # lines longer than LINE_CAP, cut to it
    cut_at_bytes: int | None = None  # the input was read up to MAX_INPUT only


@dataclass
class _Line:
    no: int
    text: str
    lower: str
    rank: int | None
    hit: bool
    host: str | None = None


class _Analyzer:
    def __init__(self) -> None:
        self.found: dict[str, Match] = {}
        self.root_line: int | None = None
        self.root_rank: int | None = None
        self.nccl_versions: dict[str, _Line] = {}  # first line that shows each version
        self.plugins: dict[str, tuple[str, _Line]] = {}  # state -> first (host, line)
        self._memo: dict[tuple[str | None, str, str | None], list[tuple[int, int]]] = {}

    def _in_root_block(self, no: int) -> bool:
        return self.root_line is not None and 0 < no - self.root_line <= ROOT_BLOCK_LINES

    def line(self, prev: _Line | None, cur: _Line, nxt: _Line | None) -> None:
        if "root" in cur.lower and _ROOT_HEADER.search(cur.text):
            self.root_line, self.root_rank = cur.no, None
        elif self.root_rank is None and self._in_root_block(cur.no):
            m = _ROOT_RANK.match(cur.text)
            if m:
                self.root_rank = int(m.group(1))
        if "nccl" in cur.lower:
            self._versions(cur, nxt)
        key = (prev.text if prev else None, cur.text, nxt.text if nxt else None)
        found = self._memo.get(key)
        if found is None:
            found = self._match(prev, cur, nxt)
            if len(self._memo) >= _CACHE_MAX:
                self._memo.clear()
            self._memo[key] = found
        for order, shape in found:
            window = _SHAPES[shape](prev, cur, nxt)
            self._record(order, SIGNATURES[order], window)

    def _versions(self, cur: _Line, nxt: _Line | None) -> None:
        if len(self.nccl_versions) < 16:
            for v in nccl_versions_in(cur.text, nxt.text if nxt else ""):
                self.nccl_versions.setdefault(v, cur)
        if "plugin" in cur.lower and cur.host:
            state = (
                "internal"
                if _PLUGIN_INTERNAL.search(cur.text)
                else "loaded"
                if _PLUGIN_LOADED.search(cur.text)
                else None
            )
            if state and state not in self.plugins:
                self.plugins[state] = (cur.host, cur)

    def _match(self, prev: _Line | None, cur: _Line, nxt: _Line | None) -> list[tuple[int, int]]:
        """(table position, window shape) of every signature these lines show."""
        shapes = [0]
        if prev is not None:
            shapes.append(1)
        if nxt is not None:
            shapes.append(2)
        if prev is not None and nxt is not None:
            shapes.append(3)
        found: list[tuple[int, int]] = []
        for order, sig in enumerate(SIGNATURES):
            for shape in shapes:
                window = _SHAPES[shape](prev, cur, nxt)
                if len(window) == 1:
                    gate = window[0].lower
                else:  # joined both ways: wrapped at a space, or hard-wrapped inside a word
                    gate = (
                        " ".join(w.lower for w in window) + "\n" + "".join(w.lower for w in window)
                    )
                if any(k in gate for k in sig.keywords) and _found(sig, window):
                    found.append((order, shape))
                    break
        return found

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
        if self.root_line is not None and any(self._in_root_block(w.no) for w in window):
            m.in_root_block = True
        if len(m.evidence) < MAX_EVIDENCE and (not m.evidence or new_rank):
            m.evidence.extend(Evidence(w.no, w.text, w.rank) for w in window)

    def _version_skew(self) -> list[Match]:
        """Processes that loaded different NCCL versions or network plugins: findings no single
        line shows, only the comparison of lines from different processes and nodes."""
        out: list[Match] = []
        if len(self.nccl_versions) >= 2:
            lines = sorted(self.nccl_versions.values(), key=lambda w: w.no)
            out.append(self._skew_match(NCCL_VERSION_SKEW, lines))
        if len(self.plugins) == 2:
            (h1, l1), (h2, l2) = self.plugins.values()
            if h1 != h2:
                out.append(self._skew_match(NCCL_PLUGIN_SKEW, sorted((l1, l2), key=lambda w: w.no)))
        return out

    @staticmethod
    def _skew_match(sig: Signature, lines: list[_Line]) -> Match:
        m = Match(sig, len(SIGNATURES), lines[1].no, count=len(lines))
        m.evidence = [Evidence(w.no, w.text, w.rank) for w in lines[:MAX_EVIDENCE]]
        m.ranks = {w.rank for w in lines if w.rank is not None}
        return m

    def kept(self) -> list[Match]:
        kept = [m for m in self.found.values() if m.count >= m.signature.min_count]
        kept.extend(self._version_skew())
        for m in kept:
            m.weight = m.signature.base_weight
            if self.root_rank is not None and self.root_rank in m.ranks:
                m.in_root_block = True
        return kept


_SHAPES = (
    lambda p, c, n: (c,),
    lambda p, c, n: (p, c),
    lambda p, c, n: (c, n),
    lambda p, c, n: (p, c, n),
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


class _Decoder:
    """Raw line -> (text, lower, rank, host), remembered for repeated lines."""

    def __init__(self) -> None:
        self.memo: dict[bytes, tuple[str, str, int | None, str | None]] = {}

    def line(self, c: Candidate) -> _Line:
        got = self.memo.get(c[1])
        if got is None:
            raw_text = decode(c[1])
            text, rank = strip_prefixes(raw_text)
            host = None
            if "nccl" in raw_text.lower():
                h = _NCCL_HOST.match(raw_text)
                host = h.group(1) if h else None
            got = (text, text.lower(), rank, host)
            if len(self.memo) >= _CACHE_MAX:
                self.memo.clear()
            self.memo[c[1]] = got
        return _Line(c[0], got[0], got[1], got[2], c[2], got[3])


def analyse(candidates: Iterable[Candidate]) -> _Analyzer:
    """Run every hit line (with its neighbours) through the table."""
    analyzer = _Analyzer()
    decoder = _Decoder()
    prev: _Line | None = None
    cur: _Line | None = None
    for c in candidates:
        line = decoder.line(c)
        if cur is not None and cur.hit:
            nxt = line if line.no == cur.no + 1 else None
            analyzer.line(prev if prev and prev.no == cur.no - 1 else None, cur, nxt)
        prev, cur = cur, line
    if cur is not None and cur.hit:
        analyzer.line(prev if prev and prev.no == cur.no - 1 else None, cur, None)
    return analyzer


def head_lines(head: bytes, complete: bool) -> list[tuple[int, str, int | None]]:
    """The head of the input as (line number, text without prefixes, rank)."""
    raw = head.split(b"\n")
    if not complete and len(raw) > 1:
        raw = raw[:-1]  # the last line was cut by the head limit
    out = []
    for no, r in enumerate(raw, 1):
        text, rank = strip_prefixes(decode(r))
        if text.strip():
            out.append((no, text, rank))
    return out


def _prose_matches(lines: list[tuple[int, str, int | None]]) -> list[Match]:
    by_no = {no: (text, rank) for no, text, rank in lines}
    out = []
    for i, hit in enumerate(prose.find([(no, text) for no, text, _ in lines])):
        m = Match(hit.signature, len(SIGNATURES) + 1 + i, hit.lines[0], count=len(hit.lines))
        m.weight, m.reasons = hit.weight, hit.reasons
        for no in hit.lines[:MAX_EVIDENCE]:
            text, rank = by_no[no]
            m.evidence.append(Evidence(no, text, rank))
            if rank is not None:
                m.ranks.add(rank)
        out.append(m)
    return out


def _read_in_context(kept: list[Match], head_text: str) -> None:
    """Warnings that mean a cause only in context: the scheduler-before-optimizer warning is
    GradScaler skipping a step when the job uses AMP."""
    for m in kept:
        if m.signature.code == "DDX205" and (
            prose.amp_context(head_text) or any(prose.amp_context(e.text) for e in m.evidence)
        ):
            m.weight = AMP_WARNING_WEIGHT
            m.reasons.append("the same text shows AMP, so GradScaler skipped optimizer steps")


def rank_candidates(matches: list[Match]) -> list[CauseCandidate]:
    """Group evidence by root cause and rank it (see the module docstring)."""
    groups: dict[str, list[Match]] = {}
    for m in matches:
        groups.setdefault(m.signature.root_cause, []).append(m)
    cands = []
    for cause, ms in groups.items():
        ms.sort(
            key=lambda m: (m.signature.tier, -m.weight, not m.in_root_block, m.first_line, m.order)
        )
        score = round(sum(m.weight for m in ms), 2)
        is_cause = any(m.weight >= CAUSE_LEVEL for m in ms)
        diagnosis = is_cause or score >= DIAGNOSIS_MIN
        root = any(m.in_root_block and m.signature.tier == CAUSE for m in ms)
        first = min(m.first_line for m in ms)
        cands.append(
            CauseCandidate(
                cause, ms, score, diagnosis, is_cause, root, first, min(m.order for m in ms)
            )
        )
    cands.sort(key=_rank_key)
    for c in cands:  # the runner-up of the same kind (cause, diagnosis, hint) sets the margin
        rival = max(
            (
                o.score
                for o in cands
                if o is not c and (o.cause, o.diagnosis) == (c.cause, c.diagnosis)
            ),
            default=0.0,
        )
        c.confidence = _confidence(c, rival)
    return cands


def _rank_key(c: CauseCandidate) -> tuple:
    """Between causes the first failure wins (torchelastic's rule), so score does not count
    there; below them the weight of the evidence decides."""
    if c.cause:
        return (0, not c.root_block, 0.0, c.first_line, c.order)
    return (1 if c.diagnosis else 2, False, -c.score, c.first_line, c.order)


def _confidence(c: CauseCandidate, rival: float) -> float:
    """0..1: how sure the ranking is of this cause (documented in the README)."""
    if c.cause:
        base = 0.9 + (0.05 if c.root_block else 0.0) + (0.03 if len(c.matches) > 1 else 0.0)
    elif c.diagnosis:
        base = c.score / (c.score + 4)
    else:
        base = c.score / (c.score + 8)
    margin = c.score / (c.score + rival) if rival else 1.0
    top = 0.99 if c.cause else 0.8  # symptoms and prose alone are never as sure as a cause
    return round(min(top, base * (0.7 + 0.3 * margin)), 2)


def _shown(c: CauseCandidate) -> list[Match]:
    """The findings printed for a cause: its signatures, or its prose when there is no
    signature (prose that repeats a signature's category only adds to the score)."""
    lines = [m for m in c.matches if not m.signature.phrases]
    return lines or c.matches


def _diagnose(analyzer: _Analyzer, counts: Counts, used: str) -> Diagnosis:
    complete = counts.bytes <= len(counts.head)
    lines = head_lines(bytes(counts.head), complete)
    head_text = "\n".join(text for _, text, _ in lines)
    kept = analyzer.kept()
    _read_in_context(kept, head_text)
    cands = rank_candidates(kept + _prose_matches(lines))
    matches = [m for c in cands if c.diagnosis for m in _shown(c)]
    return Diagnosis(
        matches,
        counts.lines,
        counts.bytes,
        used,
        analyzer.root_rank,
        cands,
        len(lines),
        counts.long_lines,
        counts.bytes if counts.stopped else None,
    )


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


def explain_stream(
    stream: BinaryIO, engine: str = "auto", max_bytes: int | None = None
) -> Diagnosis:
    """Diagnose a whole log read from a binary stream (at most max_bytes of it)."""
    fd = regular_file_at_start(stream)  # before peek moves the offset
    peek = getattr(stream, "peek", None)
    head = peek(2)[:2] if peek else b""
    if head in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 with a byte-order mark
        read, fd = _utf16_reader(stream), None
    else:
        read = stream.read
    counts = Counts()
    try:
        used, candidates = scan(read, counts, engine, max_bytes, fd)
        analyzer = analyse(candidates)
    except GrepFailed:  # a line too long for grep reading the file itself: pipe it, bounded
        counts = Counts()
        used, candidates = scan(read, counts, engine, max_bytes, fd, direct=False)
        analyzer = analyse(candidates)
    return _diagnose(analyzer, counts, used)


def explain_text(text: str, engine: str = "python") -> Diagnosis:
    """Diagnose a log given as a string (tests, library use)."""
    import io

    return explain_stream(io.BytesIO(text.encode("utf-8", errors="replace")), engine)
