"""Real failures captured with torch on CPU (tests/fixtures/triage/make_fixtures.py) are
diagnosed with the right root cause, by both scan engines, through the CLI with valid JSON."""

from __future__ import annotations

import importlib.util
import json

import jsonschema
import pytest
from triage_helpers import FIXTURES, run_cli

from ddpdoctor.report.schema import schema_for
from ddpdoctor.triage.matcher import explain_stream, explain_text


def _expected() -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EXPECTED


EXPECTED = _expected()


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("engine", ["grep", "python"])
def test_real_fixture_root_cause(name: str, engine: str) -> None:
    with open(FIXTURES / "real" / f"{name}.log", "rb") as fh:
        d = explain_stream(fh, engine)
    assert d.matches, name
    assert d.matches[0].signature.root_cause == EXPECTED[name]
    assert d.lines_read == (FIXTURES / "real" / f"{name}.log").read_bytes().count(b"\n")


def test_torchrun_root_cause_block_names_the_rank() -> None:
    with open(FIXTURES / "real" / "torchrun_rank_crash.log", "rb") as fh:
        d = explain_stream(fh)
    assert d.root_cause_rank == 1
    top, second = d.matches[:2]
    assert (top.signature.code, top.ranks, top.in_root_block) == ("DDX202", {1}, True)
    assert second.signature.root_cause == "COLLECTIVE_TIMEOUT"  # rank 0 saw its peer vanish


def test_oom_outranks_the_watchdog_timeouts_it_causes() -> None:
    log = "\n".join(
        [
            "[rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.",
            "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total capacity of 79.15 GiB",
            "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
        ]
    )
    d = explain_text(log)
    assert [m.signature.root_cause for m in d.matches] == ["OOM", "COLLECTIVE_TIMEOUT"]
    assert d.matches[0].ranks == {3}
    assert d.matches[1].ranks == {0, 1} and d.matches[1].count == 2


def test_first_failure_wins_between_two_causes() -> None:
    log = (
        "RuntimeError: Default process group has not been initialized, please make sure to call init_process_group.\n"
        "train.py: error: unrecognized arguments: --local-rank=0\n"
    )
    assert [m.signature.root_cause for m in explain_text(log).matches] == [
        "PG_NOT_INITIALIZED",
        "LAUNCH_ENV",
    ]


def test_cli_json_is_valid_and_exit_0() -> None:
    r = run_cli("explain", str(FIXTURES / "real" / "unused_parameters.log"), "--json", "-")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema_for("explain"))
    m = doc["matches"][0]
    assert (m["root_cause"], m["code"]) == ("UNUSED_PARAMETERS", "DDX171")
    assert (
        m["evidence"][0]["line"] == m["line"] and "finished reduction" in m["evidence"][0]["text"]
    )


def test_cli_terminal_panels() -> None:
    r = run_cli("explain", str(FIXTURES / "real" / "torchrun_rank_crash.log"), "--ascii")
    out = r.stdout.decode()
    assert r.returncode == 0
    assert "ROOT CAUSE: GRADSCALER DDX202" in out
    assert "ddpdoctor check --only gradscaler" in out
    assert "root cause rank 1" in out
