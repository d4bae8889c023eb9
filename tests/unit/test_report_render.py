"""The report renderer against golden text (fixed width, colour off), and the JSON document's
round trip. The report here is built by hand so the golden file covers every status mark."""

from __future__ import annotations

import io
import os
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from ddpdoctor.job import collect
from ddpdoctor.report import model, problems, render, schema
from ddpdoctor.report.model import CheckResult, RankState, Report
from ddpdoctor.runfiles import Heartbeat

GOLDEN = Path(__file__).parent.parent / "fixtures" / "render"


def sample_report() -> Report:
    hung = problems.RANK_HUNG.finding(
        "rank 1 (node-a, pid 4242) stopped responding in allreduce (all_reduce 1 MiB (timing)) 12.1 s before "
        "the verdict; ranks 0,2,3 waited for it",
        [1],
        host="node-a",
    )
    checks = [
        CheckResult("env", "Environment", "pass", "4 ranks on 1 host, torch 2.13.0, python 3.11.7"),
        CheckResult(
            "rank_device",
            "Rank ↔ device",
            "warn",
            "4 ranks on CPU, 2 thread(s) each, 2 cores per host",
            [
                problems.CPU_OVERSUBSCRIBED.finding(
                    "4 ranks on node-a run 8 threads on 2 cores", [0, 1, 2, 3]
                )
            ],
        ),
        CheckResult("allreduce", "all_reduce", "timeout", "rank 0,2,3 timed out", [hung]),
        CheckResult(
            "gradscaler", "GradScaler + DDP", "skip", "skipped: allreduce failed on rank 0,2,3"
        ),
    ]
    ranks = [
        RankState(
            rank=r,
            local_rank=r,
            host="node-a",
            pid=4240 + r,
            device="cpu",
            state="ok",
            last_check="allreduce",
        )
        for r in range(4)
    ]
    ranks[1].state, ranks[1].detail = "hung", "stopped responding in allreduce"
    return Report(
        status="fail",
        world_size=4,
        nnodes=1,
        backend="gloo",
        backend_reason="auto: no GPU visible",
        duration_s=17.25,
        checks=checks,
        ranks=ranks,
        root_cause={
            "rank": 1,
            "state": "hung",
            "check": "allreduce",
            "host": "node-a",
            "message": "rank 1 hung — stopped responding in allreduce",
        },
        launch={"command": ["python", "-m", "torch.distributed.run", "--nproc-per-node", "4"]},
    )


def rendered(ascii_only: bool, verbose: bool = False) -> str:
    buf = io.StringIO()
    con = Console(
        file=buf, width=100, color_system=None, force_terminal=False, emoji=False, highlight=False
    )
    render.report(sample_report(), verbose=verbose, ascii_only=ascii_only, console=con)
    return buf.getvalue()


@pytest.mark.parametrize("name,ascii_only", [("report.txt", False), ("report-ascii.txt", True)])
def test_golden(name: str, ascii_only: bool) -> None:
    text = rendered(ascii_only)
    path = GOLDEN / name
    if os.environ.get("DDPDOCTOR_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_ascii_output_is_ascii() -> None:
    assert rendered(True).isascii()
    assert not rendered(False).isascii()


def test_verbose_shows_ranks_and_command() -> None:
    text = rendered(False, verbose=True)
    assert "torchrun command: python -m torch.distributed.run --nproc-per-node 4" in text
    assert "hung" in text and "4241" in text


def test_schema_enums_are_the_models_constants() -> None:
    s = schema.schema_for("report")
    assert tuple(s["$defs"]["rank_state"]["enum"]) == model.RANK_STATES
    assert tuple(s["$defs"]["check"]["properties"]["status"]["enum"]) == model.CHECK_STATUSES


def test_json_round_trip_and_schema() -> None:
    doc = collect.to_json(sample_report())
    jsonschema.validate(doc, schema.schema_for("report"))
    assert collect.to_json(collect.from_json(doc)) == doc
    assert doc["checks"][2]["findings"][0]["rank"] == 1
    assert doc["counts"] == {"fail": 1, "warn": 1, "info": 0}


def test_progress_shows_each_rank_on_a_terminal_only() -> None:
    buf = io.StringIO()
    con = Console(file=buf, width=80, force_terminal=True, color_system=None)
    with render.progress(world_size=2, console=con) as tick:
        tick(
            {
                0: Heartbeat(0, check="allreduce", phase="all_reduce 1 MiB (timing)"),
                1: Heartbeat(1, finished=True),
            },
            3.2,
        )
        con.file.flush()
        shown = buf.getvalue()
    assert "ddpdoctor check" in shown and "2/2 ranks reporting" in shown
    assert "rank   0  allreduce: all_reduce 1 MiB (timing)" in shown and "rank   1  done" in shown
    silent = io.StringIO()
    with render.progress(world_size=2, console=Console(file=silent, force_terminal=False)) as tick:
        tick({0: Heartbeat(0, check="env", phase="running")}, 0.1)
    assert silent.getvalue() == ""


def test_progress_shows_the_title_it_was_given() -> None:
    buf = io.StringIO()
    con = Console(file=buf, width=80, force_terminal=True, color_system=None)
    with render.progress(world_size=1, console=con, title="ddpdoctor bench-allreduce") as tick:
        tick({0: Heartbeat(0, check="bench", phase="running")}, 1.0)
        con.file.flush()
    assert "ddpdoctor bench-allreduce" in buf.getvalue()
    assert "ddpdoctor check" not in buf.getvalue()
