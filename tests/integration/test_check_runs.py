"""`ddpdoctor check` through real torchrun on gloo: healthy runs pass with every check, the JSON
matches its schema, and real wrong behaviour on one rank fails the right checks."""

from __future__ import annotations

import json
import os

import jsonschema
import pytest
from harness import Run

from ddpdoctor.report import schema

pytestmark = pytest.mark.slow
CHECKS = ["env", "process_group", "rank_device", "allreduce", "sampler", "gradscaler"]


@pytest.mark.parametrize("fixture,n", [("healthy2", 2), ("healthy4", 4)])
def test_healthy_run_passes(request: pytest.FixtureRequest, fixture: str, n: int) -> None:
    run: Run = request.getfixturevalue(fixture)
    rep = run.report
    expected = dict.fromkeys(CHECKS, "pass")
    if n > len(os.sched_getaffinity(0)):  # more CPU ranks than cores: a real warning on small hosts
        expected["rank_device"] = "warn"
        assert run.codes("rank_device") == ["DDP304"]
        assert "fewer cores than ranks" in run.check("rank_device")["findings"][0]["message"]
    # healthy4 runs with --fail-on warn: a warning then exits 1, a clean run 0
    warned = fixture == "healthy4" and "warn" in expected.values()
    assert run.returncode == (1 if warned else 0), run.stdout + run.stderr
    assert {c["id"]: c["status"] for c in rep["checks"]} == expected
    assert rep["status"] == ("pass" if set(expected.values()) == {"pass"} else "warn")
    assert rep["world_size"] == n and rep["backend"] == "gloo" and rep["nnodes"] == 1
    assert [r["state"] for r in rep["ranks"]] == ["ok"] * n
    assert rep["root_cause"] is None
    for c in rep["checks"]:
        assert sorted(c["ranks"]) == [str(r) for r in range(n)], c["id"]
    jsonschema.validate(rep, schema.schema_for("report"))


def test_json_dash_prints_only_json(healthy4: Run) -> None:
    assert json.loads(healthy4.stdout)["schema"] == "ddpdoctor.report/1"  # nothing else on stdout
    assert "ddpdoctor check ·" not in healthy4.stdout + healthy4.stderr


def test_healthy_report_text(healthy2: Run) -> None:
    out = healthy2.stdout
    assert "ddpdoctor check · gloo (auto: no GPU visible" in out
    assert "[✓] all_reduce — gloo, 2 ranks, busbw" in out
    assert "all values exact" in out
    assert "No problems: 0 failures, 0 warnings" in out
    assert "torchrun command:" in out and "--nproc-per-node 2" in out  # -v shows the command


def test_healthy_facts(healthy2: Run) -> None:
    rows = healthy2.check("allreduce")["metrics"]["rows"]
    assert [r["bytes"] for r in rows] == [4096, 1 << 20, 4 << 20]
    assert all(r["wrong"] == 0 and r["busbw_gbps"] > 0 for r in rows)
    sampler = healthy2.check("sampler")
    assert sampler["metrics"] == {"padding": 1, "overlap": 0}
    assert "_epoch0" not in sampler["ranks"]["0"]  # raw material stays out of the report
    env0 = healthy2.check("env")["ranks"]["0"]
    assert env0["vars"]["WORLD_SIZE"] == "2" and env0["vars"]["OMP_NUM_THREADS"] == "1"
    assert healthy2.rank(1)["pid"] and healthy2.rank(1)["device"] == "cpu"


def test_real_faults_fail_the_right_checks(broken2: Run) -> None:
    assert broken2.returncode == 1
    rep = broken2.report
    assert rep["status"] == "fail"
    jsonschema.validate(rep, schema.schema_for("report"))
    status = {c["id"]: c["status"] for c in rep["checks"]}
    assert status == {
        "env": "warn",
        "process_group": "pass",
        "rank_device": "warn",
        "allreduce": "fail",
        "sampler": "fail",
        "gradscaler": "fail",
    }
    assert broken2.codes("env") == ["DDP106", "DDP110"]
    assert "ran its probes with INFO" in broken2.check("env")["findings"][1]["message"]
    assert broken2.codes("rank_device") == ["DDP304"]
    assert broken2.codes("allreduce") == ["DDP401"]
    assert broken2.check("allreduce")["findings"][0]["rank"] == 1
    assert broken2.codes("sampler") == ["DDP501", "DDP502"]
    assert broken2.codes("gradscaler") == ["DDP601", "DDP602", "DDP603"]
    assert [r["state"] for r in rep["ranks"]] == ["ok", "ok"]
    assert "Problems found" in broken2.stdout and "Rank files and logs" in broken2.stdout


def test_report_rejudges_a_kept_run_folder(broken2: Run) -> None:
    """`ddpdoctor report RUN_DIR` gives the same verdicts from the files alone."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "ddpdoctor", "report", str(broken2.run_dir), "--json", "-"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stderr
    again = json.loads(done.stdout)
    jsonschema.validate(again, schema.schema_for("report"))

    def verdicts(rep: dict) -> dict:
        return {c["id"]: (c["status"], [f["code"] for f in c["findings"]]) for c in rep["checks"]}

    assert verdicts(again) == verdicts(broken2.report)
    assert [r["state"] for r in again["ranks"]] == [r["state"] for r in broken2.report["ranks"]]


def test_no_secret_reaches_the_report_the_run_folder_or_the_terminal(healthy2: Run) -> None:
    """issue 11 (5): the corpus's secret forms were planted in healthy2's environment."""
    from conftest import secret_needles

    outputs = {"stdout": healthy2.stdout, "stderr": healthy2.stderr}
    outputs["report.json"] = (healthy2.run_dir.parent / f"{healthy2.run_dir.name}.json").read_text()
    for f in healthy2.run_dir.iterdir():
        if f.is_file():
            outputs[f.name] = f.read_text(errors="replace")
    assert "rank-0.json" in outputs and "gathered.json" in outputs
    env_vars = healthy2.check("env")["ranks"]["0"]["vars"]
    assert "TORCH_DB_PASS" in env_vars  # the variable is reported, its value is not
    leaks = [(name, n) for n in secret_needles() for name, text in outputs.items() if n in text]
    assert leaks == []


def test_the_single_node_store_listens_on_loopback_only(healthy2: Run) -> None:
    """torch's TCPStore would listen on every interface; ddpdoctor's single-node run binds it to
    the master address (127.0.0.1) before torchrun reuses it."""
    assert healthy2.listeners, "torchrun's store was never seen listening"
    assert {ip for ip, _ in healthy2.listeners} == {"127.0.0.1"}, healthy2.listeners
