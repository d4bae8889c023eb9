"""`explain` survives anything it is given: empty input, binary garbage, invalid UTF-8, a 50 MB
single line, stdin; unreadable paths are usage errors."""

from __future__ import annotations

import io
import json
import os
import tracemalloc

import pytest
from triage_helpers import run_cli

from ddpdoctor.triage.lines import LINE_CAP
from ddpdoctor.triage.matcher import explain_stream
from ddpdoctor.triage.scan import capped_lines

OOM = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"


@pytest.mark.parametrize("engine", ["grep", "python"])
@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"", 0),
        (b"\n\n\n", 3),
        (bytes(range(256)) * 64, 65),  # binary garbage: 64 newlines, then an unterminated tail
        (b"\xff\xfe\xfa invalid \xc3\x28 utf-8 \xa0\xa1\n" * 10, 10),
        (b"\x00" * 100_000, 1),
    ],
    ids=["empty", "blank", "binary", "invalid-utf8", "nul"],
)
def test_garbage_gives_no_diagnosis(engine: str, data: bytes, lines: int) -> None:
    d = explain_stream(io.BytesIO(data), engine)
    assert d.matches == [] and d.lines_read == lines and d.bytes_read == len(data)


@pytest.mark.parametrize("engine", ["grep", "python"])
def test_signature_inside_invalid_utf8_and_binary(engine: str) -> None:
    data = bytes(range(256)) + b"\n\xff\xfe " + OOM + b" \xc3\x28\n" + bytes(range(256))
    d = explain_stream(io.BytesIO(data), engine)
    assert [m.signature.root_cause for m in d.matches] == ["OOM"]
    assert d.matches[0].first_line == 3  # byte 10 inside range(256) ends line 1


@pytest.mark.parametrize("engine", ["grep", "python"])
def test_50mb_single_line_is_bounded(tmp_path, engine: str) -> None:
    """One 50 MB line (a progress bar without newlines) with an error at its start: found, and
    the matcher holds only a capped piece of it."""
    path = tmp_path / "oneline.log"
    with open(path, "wb") as fh:
        fh.write(OOM + b" ")
        block = b"x" * (1 << 20)
        for _ in range(50):
            fh.write(block)
        fh.write(b"\nafter the long line\n" + OOM + b"\n")
    tracemalloc.start()
    with open(path, "rb") as fh:
        d = explain_stream(fh, engine)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert d.lines_read == 3
    assert d.matches[0].signature.root_cause == "OOM"
    assert d.matches[0].count == 2
    assert peak < 40 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"


def test_utf16_log_from_powershell(tmp_path) -> None:
    path = tmp_path / "ps.log"
    path.write_bytes(("noise\r\n" + OOM.decode() + "\r\n").encode("utf-16"))
    for engine in ("grep", "python"):
        with open(path, "rb") as fh:
            d = explain_stream(fh, engine)
        assert [(m.signature.root_cause, m.first_line) for m in d.matches] == [("OOM", 2)]


def test_capped_lines_cuts_long_lines() -> None:
    data = b"a" * (LINE_CAP * 3) + b"\nshort\n" + b"b" * (LINE_CAP + 5)
    out = list(capped_lines(io.BytesIO(data).read))
    assert [len(x) for x in out] == [LINE_CAP, 5, LINE_CAP]


def test_engines_agree_on_every_chunk_boundary() -> None:
    """Lines that straddle the scanner's chunks keep their numbers and their neighbours."""
    import ddpdoctor.triage.scan as scan

    lines = [f"noise line {i}".encode() for i in range(500)]
    lines[137] = (
        b"[rank2]: RuntimeError: Expected to have finished reduction in the prior iteration"
    )
    lines[138] = b"[rank2]: before starting a new one."
    lines[400] = OOM
    data = b"\n".join(lines) + b"\n"
    old = scan.CHUNK
    try:
        for chunk in (7, 64, 1000, 1 << 20):
            scan.CHUNK = chunk
            for engine in ("grep", "python"):
                d = explain_stream(io.BytesIO(data), engine)
                got = [(m.signature.root_cause, m.first_line) for m in d.matches]
                assert got == [("UNUSED_PARAMETERS", 138), ("OOM", 401)], (chunk, engine)
                assert d.lines_read == 500
    finally:
        scan.CHUNK = old


def test_stdin_and_exit_codes() -> None:
    r = run_cli("explain", "-", stdin=b"[rank0]: " + OOM + b"\n")
    assert r.returncode == 0 and b"OOM" in r.stdout
    r = run_cli("explain", stdin=b"all good here\n")
    assert r.returncode == 1
    assert b"NCCL_DEBUG=INFO" in r.stderr and b"TORCH_DISTRIBUTED_DEBUG=DETAIL" in r.stderr
    assert b"ddpdoctor env" in r.stderr
    r = run_cli("explain", "--json", "-", stdin=b"")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["matches"] == [] and doc["advice"]


def test_unreadable_paths_are_usage_errors(tmp_path) -> None:
    for path in (tmp_path / "missing.log", tmp_path):
        r = run_cli("explain", str(path))
        assert r.returncode == 2
        assert len(r.stderr.decode().strip().splitlines()) == 1 and b"Traceback" not in r.stderr
    locked = tmp_path / "locked.log"
    locked.write_text("x")
    os.chmod(locked, 0)
    if not os.access(locked, os.R_OK):  # root reads anything
        assert run_cli("explain", str(locked)).returncode == 2
