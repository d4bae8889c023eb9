"""Every fixture in tests/fixtures/run through `ddpdoctor run --nproc 2` (the user's path: CLI,
launcher, torchrun, the tracer on every rank, real gloo), asserting the exact (code, line) pairs
of the `# expect:` comments; the clean ones report nothing at warn or above. Then `ddpdoctor
lint` on the same files: where lint sees the mistake, it names the same code on the same line.
The runs are shared with the end-to-end assertions of tests/integration/test_run_command.py's
topics (output, rows, schema, crash and hang lines, no process left behind)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from cli_runs import CliRun, Job, cli_runs
from trace_harness import FIXTURES, ROOT, expected

sys.path.insert(0, str(ROOT / "tests" / "integration"))
from harness import leftovers  # noqa: E402  (processes whose command line names the run folder)

from ddpdoctor.report import schema

pytestmark = pytest.mark.slow

ALL = sorted(p.name for p in FIXTURES.glob("*.py"))
CLEAN = [n for n in ALL if n.startswith("clean_")]
NEEDS_OUT_DIR = {"every_rank_save.py", "clean_trainer_class.py", "clean_launch_echo.py"}
HANGS = {"uneven_batches.py": "10", "spin_rank.py": "10"}  # --timeout: stacks, then the kill
LAUNCHES_ITSELF = {"clean_spawn.py"}  # mp.spawn: one launcher process starts the 2 ranks
LONG = {"clean_long_loop.py": ("--steps", "6")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CliRun]:
    jobs = {}
    for name in ALL:
        folder = tmp_path_factory.mktemp(name.removesuffix(".py"))
        options = LONG.get(name, ())
        if name in HANGS:
            options = ("--timeout", HANGS[name])
        jobs[name] = Job(
            FIXTURES / name, folder,
            nproc=1 if name in LAUNCHES_ITSELF else 2,
            options=options,
            args=(str(folder),) if name in NEEDS_OUT_DIR else (),
        )  # fmt: skip
    return cli_runs(jobs, alone=set(HANGS))  # their verdicts need the deadline, not more CPU


@pytest.mark.parametrize("name", ALL)
def test_exact_codes_and_lines(runs: dict[str, CliRun], name: str) -> None:
    run = runs[name]
    assert run.codes_at(FIXTURES / name) == expected(FIXTURES / name), (
        run.returncode,
        run.output[-3000:],
    )


def test_every_report_is_valid_json_of_the_run_mode_and_leaves_nothing_behind(
    runs: dict[str, CliRun],
) -> None:
    validator = schema.schema_for("report")
    for name, run in runs.items():
        jsonschema.validate(run.report, validator)
        assert run.report["mode"] == "run", name
        assert leftovers(run.run_dir) == [], name


@pytest.mark.parametrize("name", CLEAN)
def test_clean_scripts_report_nothing_at_warn_or_above(runs: dict[str, CliRun], name: str) -> None:
    run = runs[name]
    assert run.loud() == []
    assert run.returncode == 0, run.output[-3000:]
    launched = 1 if name in LAUNCHES_ITSELF else 2  # torchrun's processes; spawned ones record
    assert [r["state"] for r in run.report["ranks"]] == ["ok"] * launched
    assert len(run.records) == 2
    assert name == "clean_launch_echo.py" or all(r.steps > 0 for r in run.records.values())
    assert all(r.exit.kind in ("returned", "steps") for r in run.records.values())


def test_the_seed_pitfall_is_named_at_the_users_line(runs: dict[str, CliRun]) -> None:
    run = runs["no_sampler.py"]
    assert run.returncode == 1, run.output
    assert run.report["status"] == "fail"
    (f,) = [f for f in run.findings if f["code"] == "DDL002"]
    assert f["symbol"] == "sampler-missing" and f["ranks"] == [0, 1]
    rows = [c["id"] for c in run.report["checks"]]
    assert rows == [
        "group", "devices", "data", "gradscaler", "replicas", "collectives", "writes", "timing",
    ]  # fmt: skip
    assert "ddpdoctor run no_sampler.py" in run.output and "DDL002" in run.output


def test_rank_0s_output_is_shown_live(runs: dict[str, CliRun]) -> None:
    run = runs["clean_launch_echo.py"]
    logs = sorted(p.name for p in run.run_dir.glob("rank-*.log"))
    assert logs == ["rank-0.log", "rank-1.log"]  # every rank's output is kept
    assert "rank 1 saw its launch" in (run.run_dir / "rank-1.log").read_text()
    assert "rank 0 saw its launch" in run.output
    assert "rank 1 saw its launch" not in run.output


def test_spawned_workers_are_traced_as_the_ranks(runs: dict[str, CliRun]) -> None:
    recs = runs["clean_spawn.py"].records
    assert sorted(recs) == [0, 1]
    assert all(r.spawned and r.backend == "gloo" and len(r.passes) == 2 for r in recs.values())
    assert len(list(runs["clean_spawn.py"].run_dir.glob("spawner-*.json"))) == 1


def test_steps_limit_stops_every_rank_after_the_same_step(runs: dict[str, CliRun]) -> None:
    run = runs["clean_long_loop.py"]
    assert run.returncode == 0 and run.report["launch"]["verdict"] == "finished"
    assert [(r.steps, r.exit.kind, r.exit.code) for r in run.records.values()] == [
        (6, "steps", 0)
    ] * 2


def test_crash_names_exception_and_line(runs: dict[str, CliRun]) -> None:
    run = runs["ddp_before_init.py"]
    assert run.returncode == 1
    assert run.report["root_cause"]["where"]["line"] == 8
    for rec in run.records.values():
        assert rec.exit.exception == "ValueError"
        assert "Default process group has not been initialized" in rec.exit.message
        assert rec.exit.where is not None and rec.exit.where.line == 8
    assert "Traceback" in run.output  # the user still sees their traceback


def test_hang_is_named_with_each_ranks_line(runs: dict[str, CliRun]) -> None:
    run = runs["uneven_batches.py"]
    assert run.returncode == 1
    assert "hung" in {r["state"] for r in run.report["ranks"]}
    assert all(r["stack"] for r in run.report["ranks"])  # taken before the kill
    [uneven] = [f for f in run.findings if f["code"] == "DDR301"]
    assert uneven["data"]["batches"] == {"0": 5, "1": 4}
    # the flight recorder: rank 1 never joined the gradient all_reduce of rank 0's extra batch
    seq = never_joined(run, rank=1, at="uneven_batches.py:22")
    (group,) = run.report["launch"]["flight"]["groups"]
    assert group["last_enqueued"] == {"0": seq, "1": seq - 1}
    assert f"called at {FIXTURES / 'uneven_batches.py'}:20" in finding(run, "DDP701")["message"]


def finding(run: CliRun, code: str) -> dict:
    (f,) = [f for f in run.findings if f["code"] == code]
    return f


def never_joined(run: CliRun, rank: int, at: str) -> int:
    """The DDP701 finding: `rank` (host, pid) never joined all_reduce #N (returned), its stack
    puts it at `at` (a fixture's file:line); the others wait in #N; all completed #N-1."""
    f = finding(run, "DDP701")
    me = run.rank(rank)
    seq = f["data"]["seq"]
    assert f["ranks"] == [rank] and f["data"]["last_completed_by_all"] == seq - 1
    assert f["message"].startswith(
        f"rank {rank} ({me['host']}, pid {me['pid']}) never joined all_reduce #{seq} of group 0"
    )
    script, line = at.split(":")
    assert f"it is at {FIXTURES / script}:{line} " in f["message"]
    return seq


def test_a_rank_spinning_in_python_is_named_at_its_line(runs: dict[str, CliRun]) -> None:
    run = runs["spin_rank.py"]
    assert run.returncode == 1, run.output
    r1 = run.rank(1)
    assert r1["state"] == "hung" and "busy on the CPU" in r1["detail"]
    assert any("spin_rank.py:15" in frame for frame in r1["stack"])
    # its flight recorder stops before the all_reduce rank 0 waits in
    never_joined(run, rank=1, at="spin_rank.py:15")


def test_the_flight_recorder_names_the_collective_whose_shapes_differ(
    runs: dict[str, CliRun],
) -> None:
    run = runs["collective_mismatch.py"]  # it ends normally: the ranks dump at the end
    f = finding(run, "DDP702")
    assert f["ranks"] == [0, 1] and f["data"]["seq"] == 1
    line = f"{FIXTURES / 'collective_mismatch.py'}:10 (<module>)"
    assert f["message"] == (
        "collective #1 of group 0 (default_pg) differs across ranks: "
        f"rank 0 all_reduce [2x3] Float at {line}; rank 1 all_reduce [6] Float at {line}"
    )
    assert run.report["launch"]["flight"]["groups"][0]["mismatch_at"] == 1


@pytest.mark.parametrize("name", [n for n in CLEAN if n not in LAUNCHES_ITSELF])
def test_clean_scripts_leave_flight_recorders_in_step(runs: dict[str, CliRun], name: str) -> None:
    flight = runs[name].report["launch"]["flight"]
    assert flight["ranks_with_dump"] == [0, 1]
    assert all(g["parted_at"] is None and g["mismatch_at"] is None for g in flight["groups"])


def test_lint_agrees_where_the_mistake_is_visible_statically() -> None:
    """Today's lint sees these; `run` must name the same code on the same line."""
    files = [str(FIXTURES / n) for n in ALL]
    proc = subprocess.run([sys.executable, "-m", "ddpdoctor", "lint", *files, "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    lint = {
        (Path(f["path"]).name, f["code"], f["line"]) for f in json.loads(proc.stdout)["findings"]
    }
    run_side = {
        (n, code, line)
        for n in ALL
        for code, line in expected(FIXTURES / n)
        if code.startswith("DDL")
    }
    static = {
        "ddp_before_init.py", "no_sampler.py", "no_set_epoch.py", "scaler_per_step.py",
        "zero_grad_before_step.py", "clip_scaled.py", "step_without_update.py",
        "every_rank_save.py", "no_destroy.py", "sampler_before_init.py",
    }  # fmt: skip
    # collective_before_init.py: lint names the helper's call (line 10, "reaches dist.barrier()
    # (line 7)"), the run names the barrier itself (line 7): the same code, one frame apart.
    assert ("collective_before_init.py", "DDL001", 10) in lint
    assert {x for x in run_side if x[0] in static} <= lint
    assert not {x for x in lint if x[0] in CLEAN}  # lint and run agree the clean ones are clean


def test_every_record_matches_the_trace_schema(runs: dict[str, CliRun]) -> None:
    from ddpdoctor.trace import record as R

    schema = json.loads((Path(R.__file__).parent / "trace-1.schema.json").read_text())
    for run in runs.values():
        for path in run.run_dir.glob("trace-*.json"):
            jsonschema.validate(json.loads(path.read_text()), schema)
