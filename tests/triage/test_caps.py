"""explain's input is bounded (issue 11: 9, 10, 14): lines cut to 64 KiB before grep sees them,
at most --max-bytes read, grep reading a file itself falls back to the bounded pipe when a line
is too long for its memory limit, repeated lines are counted, closed stdin is a usage error."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from triage_helpers import run_cli

import ddpdoctor.triage.scan as scan
from ddpdoctor.triage.lines import LINE_CAP
from ddpdoctor.triage.matcher import explain_stream
from ddpdoctor.triage.scan import Counts, LineCapper

OOM = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"


def _spy_on_grep(monkeypatch) -> list[str]:
    """Record how each grep scan reads: the file itself, or the bounded pipe."""
    calls: list[str] = []
    real = scan.scan_grep

    def spy(*args, **kw):
        calls.append("file" if len(args) > 3 and args[3] is not None else "pipe")
        return real(*args, **kw)

    monkeypatch.setattr(scan, "scan_grep", spy)
    return calls


def _feed_all(chunks: list[bytes]) -> tuple[bytes, int]:
    counts = Counts()
    capper = LineCapper(counts, cap=8)
    return b"".join(capper.feed(c) for c in chunks), counts.long_lines


def test_line_capper_cuts_long_lines_and_keeps_newlines() -> None:
    assert _feed_all([b"short\nlines\n"]) == (b"short\nlines\n", 0)
    assert _feed_all([b"0123456789abc\nok\n"]) == (b"01234567\nok\n", 1)
    # a long line across chunks, and a chunk wholly inside it
    assert _feed_all([b"ab", b"cdefghij", b"klmn", b"op\nxy"]) == (b"abcdefgh\nxy", 1)


@pytest.mark.parametrize("engine", ["grep", "python"])
def test_max_bytes_stops_reading_and_says_so(engine: str) -> None:
    data = b"noise\n" * 1000 + OOM + b"\n"
    d = explain_stream(io.BytesIO(data), engine, max_bytes=600)
    assert d.cut_at_bytes == 600 and d.bytes_read == 600 and d.matches == []
    d = explain_stream(io.BytesIO(data), engine, max_bytes=len(data))
    assert d.cut_at_bytes is None and d.matches[0].signature.root_cause == "OOM"


def test_dev_zero_ends_and_the_output_says_it_was_cut() -> None:
    r = run_cli("explain", "/dev/zero", "--max-bytes", str(64 << 20), "--json", "-")
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    assert doc["input"] == {"prose_lines": 0, "long_lines_cut": 1, "cut_at_bytes": 64 << 20}
    r = run_cli("explain", "/dev/zero", "--max-bytes", str(8 << 20), "--ascii")
    assert "reading stopped after 8 MiB" in r.stdout.decode()
    assert run_cli("explain", "/dev/zero", "--max-bytes", "0").returncode == 2


def test_giant_line_in_a_file_falls_back_to_the_bounded_pipe(tmp_path, monkeypatch) -> None:
    """grep reading a file itself runs under an address-space limit; a line beyond it makes
    grep fail, and the scan starts again through the pipe, where lines are cut."""
    monkeypatch.setattr(scan, "GREP_MEMORY", 48 * 1024 * 1024)
    path = tmp_path / "giant.log"
    path.write_bytes(OOM + b" " + b"x" * (80 << 20) + b"\nafter\n" + OOM + b"\n")
    calls = _spy_on_grep(monkeypatch)
    with open(path, "rb") as fh:
        d = explain_stream(fh, "grep")
    assert calls == ["file", "pipe"]
    assert (d.lines_read, d.long_lines_cut) == (3, 1)
    assert d.matches[0].signature.root_cause == "OOM" and d.matches[0].count == 2


def test_grep_reads_an_ordinary_file_itself(tmp_path, monkeypatch) -> None:
    calls = _spy_on_grep(monkeypatch)
    path = tmp_path / "ok.log"
    path.write_bytes(b"noise\n" * 5000 + OOM + b"\n")
    with open(path, "rb") as fh:
        d = explain_stream(fh, "grep")
    assert calls == ["file"] and d.lines_read == 5001 and d.matches[0].first_line == 5001


@pytest.mark.parametrize("engine", ["grep", "python"])
def test_repeats_of_one_signature_are_counted(engine: str) -> None:
    data = b"[rank2]: " + OOM + b"\n" + b"step\n" + (b"[rank3]: " + OOM + b"\n") * 20000
    d = explain_stream(io.BytesIO(data), engine)
    m = d.matches[0]
    assert (m.signature.code, m.count, m.ranks, m.first_line) == ("DDX231", 20001, {2, 3}, 1)


def test_closed_stdin_is_a_usage_error() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "ddpdoctor", "explain"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    assert r.returncode == 1  # an empty stdin is a log with nothing in it
    r = subprocess.run(
        f"{sys.executable} -m ddpdoctor explain <&-", shell=True, capture_output=True
    )
    err = r.stderr.decode().strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and "stdin is closed" in err
    assert LINE_CAP == 64 * 1024  # the documented cap
