"""`ddpdoctor node` end to end, for real on this machine (no GPU here: the GPU rows say so and
the host part and the CPU test run), the JSON against its shipped schema, expectations and the
baseline, and bad input as one line with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from ddpdoctor import cli
from ddpdoctor.node import expect, perf
from ddpdoctor.report import schema


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ddpdoctor", "node", *args],
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    path = tmp_path_factory.mktemp("node") / "node.json"
    r = run_cli("--json", str(path), "--ascii", "--timeout", "40")
    return r, json.loads(path.read_text())


def test_a_real_run_here_reports_every_row_and_validates(plain) -> None:
    r, doc = plain
    assert r.returncode == 0, r.stdout + r.stderr
    jsonschema.validate(doc, schema.schema_for("node"))
    rows = {row["id"]: row for row in doc["rows"]}
    assert list(rows) == [
        "gpus",
        "gpu_memory",
        "gpu_links",
        "gpu_clocks",
        "software",
        "rdma",
        "host",
        "speed",
    ]
    assert rows["gpus"]["status"] == "skip" and rows["gpus"]["findings"][0]["code"] == "DDN104"
    assert rows["host"]["status"] in ("pass", "warn") and "/dev/shm" in rows["host"]["summary"]
    cpu = doc["facts"]["perf"][0]
    assert cpu["device"] == "cpu" and cpu["gemm_gflops"] > 0 and cpu["copy_gbps"] > 0
    assert doc["facts"]["versions"]["torch"].startswith("2.")
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"ddpdoctor node | {doc['node']} | ")
    assert "[-] GPUs - no GPU" in lines
    assert any(line.startswith("[+] Compute and memory bandwidth - cpu ") for line in lines)
    assert lines[-1].endswith(f"in 8 checks ({doc['duration_s']:.1f} s).")


def test_expectations_fail_the_node_and_a_baseline_records_it(tmp_path) -> None:
    wanted = tmp_path / "cluster.json"
    wanted.write_text(json.dumps({"gpu_count": 8}))
    base = tmp_path / "base.toml"
    r = run_cli("--expect", str(wanted), "--save-baseline", str(base), "--json", "-", "--no-perf")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)  # --json -: nothing but JSON on stdout
    codes = [f["code"] for row in doc["rows"] for f in row["findings"]]
    assert "DDN102" in codes  # 8 GPUs expected, no NVML here
    assert doc["expect"]["gpu_count"] == 8
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    saved = tomllib.loads(base.read_text())
    assert saved["torch"] == doc["facts"]["versions"]["torch"] and "gpu_count" not in saved
    assert "failed its checks" in r.stderr


def test_the_cpu_test_measures_for_real_and_a_baseline_keeps_a_margin() -> None:
    r = perf.cpu(budget_s=0.3)
    assert r.error is None and r.gemm_gflops > 0 and r.copy_gbps > 0
    floors = expect.baseline({"cpu_gemm_gflops": r.gemm_gflops, "torch": "2.13.0"})
    assert floors == {"cpu_gemm_gflops": round(r.gemm_gflops * 0.85, 2), "torch": "2.13.0"}


BAD = [
    (["--timeout", "0"], "--timeout must be a positive number"),
    (["--timeout", "nan"], "--timeout must be a positive number"),
    (["--fail-on", "error"], "--fail-on must be warn or fail"),
    (["--expect", "/nonexistent/x.json"], "cannot read /nonexistent/x.json"),
    (["--out", "/nonexistent"], "--out /nonexistent: not a folder"),
    (["--collect", "/nonexistent"], "--collect /nonexistent: not a folder"),
    (["--hosts", "n[1-2]"], "--hosts names the nodes that should have reported"),
    (["--json", "/nonexistent-dir/x.json"], "folder /nonexistent-dir does not exist"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["node", *args])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_bad_files_are_usage_errors_too(tmp_path, capsys, monkeypatch) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"gpu_count": 8, "drivr": "550"}')
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, message in (
        (["--expect", str(bad)], "unknown key 'drivr'"),
        (["--collect", str(empty)], "no node reports"),
        (["--collect", str(empty), "--hosts", "gpu[1-"], "unbalanced brackets"),
    ):
        with pytest.raises(SystemExit) as e:
            cli.main(["node", *args])
        err = capsys.readouterr().err
        assert e.value.code == 2 and message in err, err
    monkeypatch.setenv("SLURM_NTASKS", "16")
    monkeypatch.setenv("SLURM_NNODES", "2")
    with pytest.raises(SystemExit) as e:
        cli.main(["node", "--no-perf"])
    assert e.value.code == 2 and "run one per node" in capsys.readouterr().err


def test_under_srun_each_node_writes_its_own_report_by_its_slurm_name(
    tmp_path, capsys, monkeypatch
) -> None:
    """The srun path in-process: SLURMD_NODENAME names the file, one line is printed."""
    for key, value in {"SLURM_JOB_ID": "77", "SLURM_NTASKS": "2", "SLURM_NNODES": "2"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SLURMD_NODENAME", "gpu042")
    with pytest.raises(SystemExit) as e:
        cli.main(["node", "--out", str(tmp_path), "--no-perf", "--rdma-interval", "0"])
    assert e.value.code == 0
    out = capsys.readouterr().out.strip()
    status = json.loads((tmp_path / "gpu042.json").read_text())["status"]
    assert status in ("pass", "warn")  # a container's small /dev/shm is a warning, not a failure
    assert out == f"gpu042: {status} (0 failures) → {tmp_path / 'gpu042.json'}"
    doc = json.loads((tmp_path / "gpu042.json").read_text())
    assert doc["node"] == "gpu042" and doc["facts"]["node"] == "gpu042"
