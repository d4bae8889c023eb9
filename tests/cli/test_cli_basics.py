"""The CLI's contract for bad input: one line on stderr, exit 2, never a traceback; internal
errors: exit 3 with a short message, the traceback only with --debug."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ddpdoctor import cli


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ddpdoctor", *args], capture_output=True, text=True, timeout=60
    )


def test_help_lists_commands_and_is_fast() -> None:
    t0 = time.monotonic()
    r = run_cli("--help")
    assert r.returncode == 0
    for cmd in ("check", "lint", "explain", "env", "problems", "report"):
        assert cmd in r.stdout
    r2 = run_cli("check", "--help")
    assert r2.returncode == 0 and "--nproc" in r2.stdout and "--fail-on" in r2.stdout
    assert time.monotonic() - t0 < 20  # a sanity bound; the real guard is the next test


def test_cli_start_does_not_import_torch() -> None:
    code = "import sys, ddpdoctor.cli; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False"


BAD = [
    (["check", "--no-such-option"], "No such option"),
    (["check", "--nproc", "0"], "--nproc must be between 1 and 1024"),
    (["check", "--nproc", "abc"], "Invalid value for '--nproc'"),
    (["check", "--nproc", "-3"], "--nproc must be between 1 and 1024"),
    (["check", "--timeout", "0"], "--timeout must be a positive number"),
    (["check", "--timeout", "-5"], "--timeout must be a positive number"),
    (["check", "--timeout", "nan"], "--timeout must be a positive number"),
    (["check", "--only", "envv"], "unknown check id envv in --only"),
    (["check", "--skip", "env,bogus"], "unknown check id bogus in --skip"),
    (["check", "--only", ","], "--only needs at least one check id"),
    (["check", "--backend", "mpi"], "--backend must be one of auto, nccl, gloo"),
    (["check", "--backend", "nccl"], "--backend nccl needs GPUs"),
    (["check", "--fail-on", "error"], "--fail-on must be warn or fail"),
    (["check", "--json", "/nonexistent-dir/x.json"], "folder /nonexistent-dir does not exist"),
    (["check", "--json", "/"], "is a directory"),
    (["check", "--master-port", "70000"], "--master-port must be in 1..65535"),
    (["check", "--nnodes", "2", "--node-rank", "2"], "--node-rank must be in 0..1"),
    (["check", "--run-dir", "/proc/nope"], "cannot use --run-dir"),
    (["report", "/nonexistent-run"], "/nonexistent-run is not a folder"),
    (["report", "/"], "holds no readable spec.json: not a run folder"),
    (["report", "/tmp", "--fail-on", "x"], "--fail-on must be warn or fail"),
    (["nosuchcommand"], "No such command"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    r = run_cli(*args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("ddpdoctor: error: ")
    assert message in lines[0]


def test_internal_error_is_short_exit_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from ddpdoctor.job import command as check_command

    def boom(_args: object) -> int:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(check_command, "run", boom)
    with pytest.raises(SystemExit) as exc:
        cli.main(["check"])
    assert exc.value.code == 3
    err = capsys.readouterr().err
    assert (
        err.strip()
        == "ddpdoctor: internal error: RuntimeError: simulated bug (rerun with --debug for the traceback)"
    )
    with pytest.raises(RuntimeError):
        cli.main(["check", "--debug"])


def test_problems_lists_the_catalog() -> None:
    r = run_cli("problems", "--json", "-")
    assert r.returncode == 0
    import json

    doc = json.loads(r.stdout)
    codes = [p["code"] for p in doc["probes"]]
    assert {p["code"][:3] for p in doc["lint"]} == {"DDL"} and {
        p["code"][:3] for p in doc["signatures"]
    } == {"DDX"}
    assert codes[:3] == ["DDP101", "DDP102", "DDP103"] and len(codes) == len(set(codes))
    node = [p["code"] for p in doc["node"]]
    assert node and {c[:3] for c in node} == {"DDN"} and len(node) == len(set(node))
