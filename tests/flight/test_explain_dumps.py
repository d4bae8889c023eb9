"""`ddpdoctor explain PATH` on flight-recorder dumps and NCCL RAS text: the findings, the JSON
document (validated against its schema), and untrusted pickles that must not run anything."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ddpdoctor.flight import explain as flight_explain
from ddpdoctor.flight import safe_pickle
from ddpdoctor.report import schema

DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "flight"


def explain(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ddpdoctor", "explain", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def as_json(path: str) -> tuple[int, dict]:
    """`explain PATH --json -` in this process (the CLI's own path is tested above and below)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = flight_explain.explain(path, "-", ascii_only=True)
    doc = json.loads(out.getvalue())
    jsonschema.validate(doc, schema.schema_for("flight"))
    return code, doc


def test_a_run_folder_names_the_rank_that_never_joined() -> None:
    r = explain(str(DUMPS / "uneven_batches"), "--ascii")
    assert r.returncode == 0, r.stderr
    assert "flight recorder · dumps of 2 rank(s)" in r.stdout
    assert "[x] DDP701 rank 1 (vm, pid 13272) never joined all_reduce #10 of group 0" in r.stdout
    assert "uneven_batches.py:20" in r.stdout


def test_torchs_pickles_are_read_safely_and_give_the_same_answer() -> None:
    code, doc = as_json(str(DUMPS / "torch_pickle"))
    assert code == 0 and doc["status"] == "fail"
    assert doc["input"]["kind"] == "flight-recorder"
    (f,) = doc["findings"]
    assert f["code"] == "DDP701" and f["ranks"] == [1] and f["data"]["seq"] == 5
    assert doc["analysis"]["groups"][0]["last_completed_by_all"] == 4


def test_one_pickle_file_alone_is_read() -> None:
    code, doc = as_json(str(DUMPS / "torch_pickle" / "fr_trace_rank_0"))
    assert code == 0
    assert doc["analysis"]["ranks_with_dump"] == [0]
    (f,) = doc["findings"]
    assert f["code"] == "DDP703" and f["data"]["seq"] == 5
    assert "only this rank's dump was given" in f["message"]


class _Touch:
    """Unpickling this runs `touch PATH` through os.system: what a hostile ticket would do."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):  # noqa: ANN204
        return (os.system, (f"touch {self.path}",))


def test_a_malicious_pickle_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    evil = tmp_path / "fr_trace_rank_0"
    evil.write_bytes(pickle.dumps({"entries": [_Touch(planted)], "version": "2.10"}))
    r = explain(str(evil))
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("ddpdoctor: error: ") and "refused, it would run code" in line
    assert "nothing in it was run" in line
    assert not planted.exists()
    # in a folder beside a good dump: the good one is read, the bad one listed, nothing runs
    (tmp_path / "fr_json_1.json").write_bytes(
        (DUMPS / "torch_json" / "fr_json_1.json").read_bytes()
    )
    code, doc = as_json(str(tmp_path))
    assert doc["analysis"]["ranks_with_dump"] == [1]
    assert len(doc["input"]["refused"]) == 1 and "refused" in doc["input"]["refused"][0]
    assert not planted.exists()


@pytest.mark.parametrize(
    "payload",
    [
        pickle.dumps(_Touch(Path("/nonexistent/x"))),
        b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.",  # GLOBAL, REDUCE
        pickle.dumps(Path("/tmp")),  # a class, even a harmless one
        b"\x80\x04\x95",  # truncated
    ],
)
def test_the_safe_loader_refuses_anything_but_plain_data(payload: bytes) -> None:
    with pytest.raises(safe_pickle.UnsafePickle):
        safe_pickle.loads(payload)


def test_the_safe_loader_keeps_plain_data() -> None:
    data = {"a": [1, 2.5, None, True], "b": ("x", "y"), "c": {"d": -3}}
    assert safe_pickle.loads(pickle.dumps(data, protocol=2)) == data  # torch's dumps: protocol 2
    data["e"] = b"bytes"  # protocol 2 pickles bytes through a global (_codecs.encode): refused
    assert safe_pickle.loads(pickle.dumps(data, protocol=4)) == data


def test_ncclras_count_mismatch_names_the_straggler() -> None:
    code, doc = as_json(str(DUMPS / "ras_mismatch.txt"))
    assert code == 0 and doc["input"]["kind"] == "ncclras"
    (f,) = doc["findings"]
    assert f["code"] == "DDP707" and f["ranks"] == [5]
    assert "7 up to operation 212, 1 up to operation 211" in f["message"]
    assert "never called #212" in f["message"] and "pid 40417 on 10.0.0.12" in f["message"]


def test_ncclras_missing_rank_is_named() -> None:
    code, doc = as_json(str(DUMPS / "ras_incomplete.txt"))
    (f,) = doc["findings"]
    assert f["code"] == "DDP706" and f["ranks"] == [3]
    assert "no data from 1 rank(s): rank 3 (GPU 1, pid 7311 on 10.0.0.21)" in f["message"]


def test_a_folder_without_dumps_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    r = explain(str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"ddpdoctor: error: no flight-recorder dump in {tmp_path} (JSON or pickle, one file per rank)"
    )


def test_a_log_is_still_read_as_a_log(tmp_path: Path) -> None:
    log = tmp_path / "crash.log"
    log.write_text("RuntimeError: Default process group has not been initialized\n")
    r = explain(str(log), "--json", "-")
    assert json.loads(r.stdout)["schema"] == "ddpdoctor.explain/1"
