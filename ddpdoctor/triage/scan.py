"""Find the lines worth a full signature pass, fast and in bounded memory.

A log can be 2 GB with a handful of interesting lines. Both engines stream the input in chunks,
run the prefilter (the union of the signatures' keywords) over whole chunks, and yield only the
lines that hit it, each with the line before and after (messages wrap). They yield
`(line_number, raw_bytes, is_hit)` in increasing line order, each line once.

- `grep`: GNU grep does the scanning (`grep -a -n -i -E -B1 -A1`); Python only feeds it the
  input and counts lines. This is what keeps `explain` within a small factor of plain grep.
- `python`: the same job in pure Python (lowercase the chunk, one regex); used when grep is
  missing or unusable, and in tests to prove both engines agree.

Bounded memory whatever the input (both engines, grep included, read the same capped stream):
- lines longer than `LINE_CAP` keep only their first `LINE_CAP` bytes before anything else sees
  them, so a 200 MB single line (or /dev/zero) costs 64 KiB, in grep as in Python;
- at most `MAX_INPUT` bytes are read (`explain /dev/zero` ends); the report says when either
  cap cut the input.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ddpdoctor.triage.lines import LINE_CAP
from ddpdoctor.triage.signatures import keywords, prefilter_pattern

CHUNK = 4 * 1024 * 1024
MAX_INPUT = 8 * 1024**3  # bytes read at most (documented; --max-bytes lowers it)
Candidate = tuple[int, bytes, bool]
Reader = Callable[[int], bytes]


HEAD_CAP = 256 * 1024  # the first bytes of the input, kept for the prose reader (a ticket)


@dataclass
class Counts:
    """What the scan saw of the whole input (not only the candidates), and its head."""

    lines: int = 0
    bytes: int = 0
    head: bytearray = field(default_factory=bytearray)
    long_lines: int = 0  # lines cut to LINE_CAP
    stopped: bool = False  # reading stopped at MAX_INPUT

    def keep_head(self, chunk: bytes) -> None:
        if len(self.head) < HEAD_CAP:
            self.head += chunk[: HEAD_CAP - len(self.head)]


class LineCapper:
    """Cut every line to `cap` bytes in a stream of chunks (the newline is kept, so line
    numbers do not move). Chunks without a long line pass through untouched: one window check
    per `cap` bytes finds them, so the common case costs almost nothing."""

    def __init__(self, counts: Counts, cap: int = LINE_CAP) -> None:
        self.counts, self.cap = counts, cap
        self.run = 0  # bytes of the current line already passed on
        self.dropping = False  # inside a long line, past the cap

    def feed(self, chunk: bytes) -> bytes:
        first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
        if (
            not self.dropping
            and first >= 0
            and self.run + first <= self.cap
            and len(chunk) - last - 1 <= self.cap
            and all(chunk.find(b"\n", p, p + self.cap) >= 0 for p in range(first, last, self.cap))
        ):
            self.run = len(chunk) - last - 1
            return chunk  # every line is shorter than twice the cap: grep's buffer stays small
        return self._cut(chunk)

    def _cut(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        pieces = chunk.split(b"\n")
        for i, piece in enumerate(pieces):
            more = i < len(pieces) - 1  # a newline follows this piece
            if not self.dropping:
                room = self.cap - self.run
                if len(piece) > room:
                    out.append(piece[:room])
                    self.dropping = True
                    self.counts.long_lines += 1
                else:
                    out.append(piece)
                    self.run += len(piece)
            if more:
                out.append(b"\n")
                self.run, self.dropping = 0, False
        return b"".join(out)


def bounded(read: Reader, counts: Counts, max_bytes: int) -> Reader:
    """`read` that stops after max_bytes (noting it when more was there) and caps lines; it
    counts the bytes and keeps the head of the input as it was, before any cut."""
    capper = LineCapper(counts)
    left = max_bytes

    def read_bounded(n: int) -> bytes:
        nonlocal left
        while left > 0:
            chunk = read(min(n, left))
            if not chunk:
                return b""
            left -= len(chunk)
            counts.bytes += len(chunk)
            counts.keep_head(chunk)
            out = capper.feed(chunk)
            if out:  # b"" would read as the end: a chunk wholly inside a cut line is skipped
                return out
        if not counts.stopped and read(1):
            counts.stopped = True
        return b""

    return read_bounded


def capped_lines(read: Reader) -> Iterator[bytes]:
    """Split a byte stream into lines (without the newline), each cut to LINE_CAP bytes."""
    carry = b""
    dropping = False  # inside an over-long line: discard until its newline
    while chunk := read(CHUNK):
        if dropping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            dropping = False
            chunk = chunk[nl:]
        buf = carry + chunk if carry else chunk
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            yield buf[start : min(nl, start + LINE_CAP)]
            start = nl + 1
        carry = buf[start:]
        if len(carry) > LINE_CAP:
            carry, dropping = carry[:LINE_CAP], True
    if carry:
        yield carry


class _Emitter:
    """Collects candidates in order, merging a context line that later turns out to be a hit."""

    def __init__(self) -> None:
        self.out: list[Candidate] = []
        self.last = 0

    def add(self, lineno: int, text: bytes, hit: bool) -> None:
        if lineno < 1:
            return
        if self.out and self.out[-1][0] == lineno:
            if hit and not self.out[-1][2]:
                self.out[-1] = (lineno, self.out[-1][1], True)
            return
        if lineno <= self.last:
            return
        self.out.append((lineno, text[:LINE_CAP], hit))
        self.last = lineno

    def drain(self) -> list[Candidate]:
        out, self.out = self.out, []
        return out


def _trie_pattern(words: tuple[str, ...]) -> str:
    """One regex for many literals, factored by common prefix ("ab|ac" -> "a(?:b|c)").

    Python's re tries the alternatives of a flat alternation one by one at every position; the
    factored form rejects a position after one character, about five times faster here.
    """
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        alts = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie)


def scan_python(read: Reader, counts: Counts) -> Iterator[Candidate]:
    """Pure-Python engine: the prefilter runs over each lowercased chunk of complete lines."""
    rx = re.compile(_trie_pattern(keywords()).encode())  # keywords are lowercase literals
    emit = _Emitter()
    base = 1  # line number of the first line in `body`
    prev_line: bytes | None = None
    want_next = False
    carry = b""
    dropping = False

    def body_candidates(body: bytes) -> None:
        nonlocal prev_line, want_next
        if want_next:
            emit.add(base, body[: body.find(b"\n")], False)
        lower = body.lower()
        lineno, counted, pos = base, 0, 0
        last_hit_end = -1
        while (m := rx.search(lower, pos)) is not None:
            s = body.rfind(b"\n", 0, m.start()) + 1
            e = body.find(b"\n", m.start())
            lineno += body.count(b"\n", counted, s)
            counted = s
            if s > 0:
                emit.add(lineno - 1, body[body.rfind(b"\n", 0, s - 1) + 1 : s - 1], False)
            elif prev_line is not None:
                emit.add(lineno - 1, prev_line, False)
            emit.add(lineno, body[s:e], True)
            if e + 1 < len(body):
                emit.add(lineno + 1, body[e + 1 : body.find(b"\n", e + 1)], False)
            last_hit_end = e
            pos = e + 1
        want_next = last_hit_end == len(body) - 1
        prev_line = body[body.rfind(b"\n", 0, len(body) - 1) + 1 : -1]

    while chunk := read(CHUNK):
        if dropping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            dropping, chunk = False, chunk[nl:]
        buf = carry + chunk if carry else chunk
        cut = buf.rfind(b"\n")
        if cut < 0:
            carry = buf
        else:
            body, carry = buf[: cut + 1], buf[cut + 1 :]
            body_candidates(body)
            n = body.count(b"\n")
            base += n
            counts.lines += n
            yield from emit.drain()
        if len(carry) > LINE_CAP:
            carry, dropping = carry[:LINE_CAP], True
    if carry:
        counts.lines += 1
        body_candidates(carry + b"\n")
        yield from emit.drain()


def _grep() -> str | None:
    """Path of a grep that understands the options we need, or None."""
    exe = shutil.which("grep")
    if exe is None:
        return None
    try:
        probe = subprocess.run(
            [exe, "-a", "-n", "-i", "-E", "-B1", "-A1", "b|c"],
            input=b"a\nB\nd\n",
            capture_output=True,
            timeout=5,
            env=_grep_env(),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return exe if probe.stdout == b"1-a\n2:B\n3-d\n" else None


def _grep_env() -> dict[str, str]:
    # the C locale: bytes are bytes (no UTF-8 validation, so binary input never confuses grep)
    return {**os.environ, "LC_ALL": "C"}


def _feed(read: Reader, sink, counts: Counts, errors: list[BaseException]) -> None:
    """Copy the input into grep's stdin (or, with no sink, only read it), counting lines and
    bytes on the way."""
    last = b"\n"
    try:
        while chunk := read(CHUNK):
            counts.lines += chunk.count(b"\n")
            last = chunk[-1:]
            if sink is not None:
                sink.write(chunk)
        if last != b"\n":
            counts.lines += 1
    except BrokenPipeError:
        pass
    except BaseException as e:  # reported by the reading side
        errors.append(e)
    finally:
        if sink is not None:
            with contextlib.suppress(OSError):
                sink.close()


GREP_MEMORY = 96 * 1024 * 1024  # address space grep may use when it reads a file itself


class GrepFailed(RuntimeError):
    """grep stopped with an error (out of memory on a giant line): scan again through the pipe."""


def _limit_grep_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (GREP_MEMORY, GREP_MEMORY))


def scan_grep(read: Reader, counts: Counts, exe: str, fd: int | None = None) -> Iterator[Candidate]:
    """grep engine: grep finds the hit lines and their neighbours; Python parses its output.

    Through a pipe (stdin, devices, files over the input cap) a thread feeds grep the bounded
    stream (lines cut, input capped), so grep's memory stays small even on one endless line.
    A regular file (`fd`) grep reads itself, under an address-space limit, while a thread reads
    it in parallel (pread) to count lines and keep the head: the fast path. A line too long for
    that limit makes grep fail; the caller then scans again through the pipe (GrepFailed).
    """
    proc = subprocess.Popen(
        [exe, "-a", "-n", "-i", "-E", "-B1", "-A1", prefilter_pattern()],
        stdin=fd if fd is not None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_grep_env(),
        preexec_fn=_limit_grep_memory if fd is not None else None,  # noqa: PLW1509
    )
    errors: list[BaseException] = []
    feeder = threading.Thread(target=_feed, args=(read, proc.stdin, counts, errors), daemon=True)
    feeder.start()
    emit = _Emitter()
    done = False
    try:
        for line in capped_lines(proc.stdout.read):
            if line == b"--":
                continue
            i = 0
            while i < len(line) and 48 <= line[i] <= 57:
                i += 1
            if i == 0 or i >= len(line) or line[i] not in b":-":
                continue
            emit.add(int(line[:i]), line[i + 1 :], line[i] == 58)
            if len(emit.out) >= 1024:
                yield from emit.drain()
        yield from emit.drain()
        done = True  # grep closed its output: let it exit by itself (a kill would read as failure)
    finally:
        if not done and proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.wait()
        # reading a file to count it always ends; a pipe's reader may wait on its input
        feeder.join(timeout=None if done and fd is not None else 5)
    if errors:
        raise errors[0]
    if done and fd is not None and proc.returncode not in (0, 1):
        raise GrepFailed(f"grep exited {proc.returncode}")


def _pread_reader(fd: int) -> Reader:
    """Read a file from its start without moving the descriptor's offset (grep shares it)."""
    offset = 0

    def read(n: int) -> bytes:
        nonlocal offset
        data = os.pread(fd, n, offset)
        offset += len(data)
        return data

    return read


def regular_file_at_start(stream: object) -> int | None:
    """The descriptor of a regular file positioned at its start, else None (ask before any
    read or peek moves the offset)."""
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and os.lseek(fd, 0, os.SEEK_CUR) == 0:
            return fd
    except (AttributeError, OSError, ValueError):
        pass
    return None


def scan(
    read: Reader,
    counts: Counts,
    engine: str = "auto",
    max_bytes: int | None = None,
    fd: int | None = None,
    direct: bool = True,
) -> tuple[str, Iterator[Candidate]]:
    """Pick an engine ("auto", "grep" or "python") and return its name and candidates.
    `fd`: a regular file, read from its start with pread (whatever a buffered reader did to its
    offset); grep reads it itself when `direct` and it fits the input cap."""
    limit = max_bytes or MAX_INPUT
    if fd is not None:
        read = _pread_reader(fd)
    if engine in ("auto", "grep"):
        exe = _grep()
        if exe is not None:
            if fd is not None and direct and os.fstat(fd).st_size <= limit:
                os.lseek(fd, 0, os.SEEK_SET)  # grep reads through the shared offset
                return "grep", scan_grep(bounded(read, counts, limit), counts, exe, fd)
            return "grep", scan_grep(bounded(read, counts, limit), counts, exe)
    return "python", scan_python(bounded(read, counts, limit), counts)
