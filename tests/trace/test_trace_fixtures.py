"""Every fixture in tests/fixtures/run through the real tracer on 2 gloo ranks (the fork
launcher of trace_forkrun.py: torch imported once, then real rank processes), asserting the exact
(code, line) pairs of the `# expect:` comments; the clean ones report nothing at warn or above.
Then `ddpdoctor lint` on the same files: where lint sees the mistake, it names the same code on
the same line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from trace_forkrun import fork_run, warm_up
from trace_harness import FIXTURES, ROOT, TracedRun, expected

from ddpdoctor.flight import analysis
from ddpdoctor.flight.dumps import read_file
from ddpdoctor.report.model import Level

pytestmark = pytest.mark.slow

ALL = sorted(p.name for p in FIXTURES.glob("*.py"))
CLEAN = [n for n in ALL if n.startswith("clean_")]
NEEDS_OUT_DIR = {"every_rank_save.py", "clean_trainer_class.py", "clean_launch_echo.py"}
HANGS = {"uneven_batches.py": 8.0}  # deadline: then stacks are dumped and the ranks killed
LAUNCHES_ITSELF = {"clean_spawn.py"}  # mp.spawn: one launcher process starts the 2 ranks
LONG = {"clean_long_loop.py": ("--steps", "6")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TracedRun]:
    warm_up()
    out: dict[str, TracedRun] = {}
    for name in ALL:
        run_dir = tmp_path_factory.mktemp(name.removesuffix(".py")) / "run"
        out[name] = fork_run(
            FIXTURES / name, run_dir,
            nproc=1 if name in LAUNCHES_ITSELF else 2,
            args=(str(run_dir.parent),) if name in NEEDS_OUT_DIR else (),
            tracer_args=LONG.get(name, ()),
            deadline=HANGS.get(name, 60.0),
        )  # fmt: skip
    return out


@pytest.mark.parametrize("name", ALL)
def test_exact_codes_and_lines(runs: dict[str, TracedRun], name: str) -> None:
    run = runs[name]
    assert run.codes_at(FIXTURES / name) == expected(FIXTURES / name), (
        run.exit_codes,
        run.output[-3000:],
    )


@pytest.mark.parametrize("name", CLEAN)
def test_clean_scripts_report_nothing_at_warn_or_above(
    runs: dict[str, TracedRun], name: str
) -> None:
    run = runs[name]
    loud = [f.to_json() for f in run.findings if f.level >= Level.WARN]
    assert loud == []
    assert len(run.records) == 2
    assert name == "clean_launch_echo.py" or all(r.steps > 0 for r in run.records.values())
    assert all(r.exit.kind in ("returned", "steps") for r in run.records.values())


def test_spawned_workers_are_traced_as_the_ranks(runs: dict[str, TracedRun]) -> None:
    recs = runs["clean_spawn.py"].records
    assert sorted(recs) == [0, 1]
    assert all(r.spawned and r.backend == "gloo" and len(r.passes) == 2 for r in recs.values())
    assert len(list(runs["clean_spawn.py"].run_dir.glob("spawner-*.json"))) == 1


def test_steps_limit_stops_every_rank_after_the_same_step(runs: dict[str, TracedRun]) -> None:
    run = runs["clean_long_loop.py"]
    assert run.returncode == 0 and not run.timed_out
    assert [(r.steps, r.exit.kind, r.exit.code) for r in run.records.values()] == [
        (6, "steps", 0)
    ] * 2


def test_crash_names_exception_and_line(runs: dict[str, TracedRun]) -> None:
    run = runs["ddp_before_init.py"]
    assert run.returncode == 1
    for rec in run.records.values():
        assert rec.exit.exception == "ValueError"
        assert "Default process group has not been initialized" in rec.exit.message
        assert rec.exit.where is not None and rec.exit.where.line == 8
    assert "Traceback" in run.output  # the user still sees their traceback


def test_hang_is_named_with_each_ranks_line(runs: dict[str, TracedRun]) -> None:
    run = runs["uneven_batches.py"]
    assert run.timed_out and sorted(run.stacks) == [0, 1]
    [uneven] = [f for f in run.findings if f.code == "DDR301"]
    assert uneven.data["batches"] == {"0": 5, "1": 4}


def flight_of(run: TracedRun) -> analysis.Flight:
    """The dumps every traced rank writes into its run folder when the script ends."""
    dumps = [read_file(p) for p in sorted(run.run_dir.glob("fr-*.json"))]
    return analysis.analyze(dumps, 2)


def test_the_flight_recorder_names_the_collective_whose_shapes_differ(
    runs: dict[str, TracedRun],
) -> None:
    f = flight_of(runs["collective_mismatch.py"])
    assert f.dumps == [0, 1]
    (found,) = [x for x in f.findings() if x.level >= Level.WARN]
    assert found.code == "DDP702" and found.ranks == [0, 1] and found.data["seq"] == 1
    line = f"{FIXTURES / 'collective_mismatch.py'}:10 (<module>)"
    assert found.message == (
        "collective #1 of group 0 (default_pg) differs across ranks: "
        f"rank 0 all_reduce [2x3] Float at {line}; rank 1 all_reduce [6] Float at {line}"
    )


@pytest.mark.parametrize("name", [n for n in CLEAN if n not in LAUNCHES_ITSELF])
def test_clean_scripts_leave_flight_recorders_in_step(
    runs: dict[str, TracedRun], name: str
) -> None:
    f = flight_of(runs[name])
    assert f.dumps == [0, 1]
    assert [x.code for x in f.findings()] in (["DDP704"], [])
    assert all(g.parted_at is None and g.mismatch_at is None for g in f.groups)


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


def test_every_record_matches_the_trace_schema(runs: dict[str, TracedRun]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from ddpdoctor.trace import record as R

    schema = json.loads((Path(R.__file__).parent / "trace-1.schema.json").read_text())
    for run in runs.values():
        for path in run.run_dir.glob("trace-*.json"):
            jsonschema.validate(json.loads(path.read_text()), schema)
