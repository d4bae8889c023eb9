"""The flight-recorder analysis on real dumps made here (tests/fixtures/flight/: run folders of
`ddpdoctor run` and `check`, and torch's own JSON and pickle dumps): the collective where the
ranks part, who never joined it, mismatched shapes, a rank without a dump."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ddpdoctor.flight import analysis
from ddpdoctor.flight.dumps import DumpError, read_file, read_path

DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "flight"


def flight(folder: str, world: int | None = None) -> analysis.Flight:
    got = read_path(DUMPS / folder)
    assert got.refused == []
    return analysis.analyze(got.dumps, world)


def default(f: analysis.Flight) -> analysis.Group:
    return next(g for g in f.groups if g.id == "0")


def test_a_rank_that_skipped_the_last_batch_never_joined_its_all_reduce() -> None:
    f = flight("uneven_batches")
    g = default(f)
    assert (g.parted_at, g.never_joined, g.waiting, g.last_all) == (10, [1], [0], 9)
    assert g.op == "all_reduce" and g.site is not None
    assert "tests/fixtures/run/uneven_batches.py:" in g.site  # where the dump was made
    assert ":20 " in g.site  # the backward of the extra batch, the user's line
    (found,) = f.findings()
    assert found.code == "DDP701" and found.ranks == [1]
    assert "never joined all_reduce #10 of group 0 (default_pg)" in found.message
    assert found.data["seq"] == 10 and found.data["last_completed_by_all"] == 9


def test_the_stack_of_the_rank_that_never_joined_is_named_with_it() -> None:
    f = flight("uneven_batches")
    (found,) = f.findings(
        {1: ["train.py:22 (<module>)", "run.py:3 (main)"]}, {1: "rank 1 (h, pid 7)"}
    )
    assert found.message.startswith(
        "rank 1 (h, pid 7) never joined all_reduce #10 of group 0 (default_pg); it is at "
        "train.py:22 (<module>) (called from run.py:3 (main)); rank 0 is stuck in it"
    )


def test_shapes_that_differ_at_one_sequence_number_are_a_mismatch() -> None:
    f = flight("collective_mismatch")
    g = default(f)
    assert g.mismatch_at == 1 and g.parted_at is None
    assert sorted((s.ranks, s.shape) for s in g.sides) == [([0], "[2x3] Float"), ([1], "[6] Float")]
    assert all(s.site and "collective_mismatch.py:10" in s.site for s in g.sides)
    codes = [x.code for x in f.findings()]
    assert codes == ["DDP702"]


def test_a_stopped_rank_without_a_dump_is_named_not_guessed() -> None:
    f = flight("stopped_rank", world=2)
    g = default(f)
    assert g.no_dump == [1] and g.never_joined == []
    assert (g.parted_at, g.waiting, g.last_all) == (6, [0], 5)
    (found,) = f.findings()
    assert found.code == "DDP703" and found.ranks == [0, 1]
    assert "rank 1 gave no dump (stopped or dead)" in found.message
    assert "checks/allreduce.py:29" in found.message  # where rank 0 called it (a probe)


@pytest.mark.parametrize("folder", ["torch_json", "torch_pickle"])
def test_torchs_own_dumps_name_the_rank_from_the_file_name(folder: str) -> None:
    f = flight(folder)
    assert f.dumps == [0, 1]
    g = default(f)
    assert (g.parted_at, g.never_joined, g.waiting, g.last_all_op) == (5, [1], [0], "broadcast")
    (found,) = f.findings()
    assert found.code == "DDP701"
    assert "the last collective every rank completed is #4 (broadcast)" in found.message


def test_ranks_in_step_give_one_note(tmp_path: Path) -> None:
    dump = json.loads((DUMPS / "torch_json" / "fr_json_0.json").read_text())
    dump["entries"] = dump["entries"][:4]
    dump["pg_status"]["0"].update(last_enqueued_collective="4", last_completed_collective="4")
    for r in (0, 1):
        (tmp_path / f"fr_json_{r}.json").write_text(json.dumps(dump))
    (found,) = analysis.analyze(read_path(tmp_path).dumps).findings()
    assert found.code == "DDP704" and "#4 (broadcast)" in found.message


def test_one_rank_of_each_is_kept_and_other_files_are_skipped(tmp_path: Path) -> None:
    shutil.copy(DUMPS / "torch_json" / "fr_json_0.json", tmp_path / "fr_json_0.json")
    shutil.copy(DUMPS / "torch_pickle" / "fr_trace_rank_0", tmp_path / "fr_trace_rank_0")
    (tmp_path / "notes.txt").write_text("not a dump")
    got = read_path(tmp_path)
    assert [d.rank for d in got.dumps] == [0]
    assert got.refused == [
        f"{tmp_path / 'fr_trace_rank_0'}: a second dump of rank 0 (kept {tmp_path / 'fr_json_0.json'})"
    ]


def test_a_file_that_is_no_dump_says_so(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"hello": 1}')
    with pytest.raises(DumpError, match="not a flight-recorder dump"):
        read_file(p)


def test_ranks_that_went_past_a_failed_collective_blame_no_one(tmp_path: Path) -> None:
    """Rank 0 gave up on #5 (an error or a timeout retires it as done), rank 1 never called it:
    no rank waits, so rank 1 is behind as a consequence, not named as the cause."""
    ahead = json.loads((DUMPS / "torch_json" / "fr_json_0.json").read_text())
    ahead["entries"][-1]["retired"] = True
    ahead["pg_status"]["0"]["last_completed_collective"] = "5"
    (tmp_path / "fr_json_0.json").write_text(json.dumps(ahead))
    shutil.copy(DUMPS / "torch_json" / "fr_json_1.json", tmp_path / "fr_json_1.json")
    f = analysis.analyze(read_path(tmp_path).dumps)
    g = default(f)
    assert (g.parted_at, g.waiting, g.never_joined) == (5, [], [])
    assert f.findings() == []


def test_ddpdoctors_own_groups_are_left_out(tmp_path: Path) -> None:
    for r in (0, 1):
        dump = json.loads((DUMPS / "uneven_batches" / f"fr-{r}.json").read_text())
        dump["ddpdoctor_groups"] = ["0"]  # as check's control group is marked
        (tmp_path / f"fr-{r}.json").write_text(json.dumps(dump))
    f = analysis.analyze(read_path(tmp_path).dumps)
    assert f.groups == [] and f.findings() == []


def test_ranks_that_finished_the_parting_collective_are_named_as_gone_on(tmp_path: Path) -> None:
    """Rank 1 stopped late in all_reduce #6: rank 0 still waits in it, but gloo's ring let ranks
    2 and 3 finish it and go on. All four belong to the finding, the last two as gone on (made
    from the stopped_rank dump: ranks 2 and 3 are copies of rank 0 that completed #6)."""
    base = json.loads((DUMPS / "stopped_rank" / "fr-0.json").read_text())
    (tmp_path / "fr-0.json").write_text(json.dumps(base))
    for rank in (2, 3):
        dump = json.loads(json.dumps(base))
        dump["rank"], dump["pid"] = rank, 1000 + rank
        dump["pg_status"]["0"].update(last_completed_collective=6, last_enqueued_collective=7)
        for entry in dump["entries"]:
            if entry["pg_id"] == 0 and entry["collective_seq_id"] == 6:
                entry["state"] = "completed"
        (tmp_path / f"fr-{rank}.json").write_text(json.dumps(dump))
    got = read_path(tmp_path)
    f = analysis.analyze(got.dumps, 4)
    g = default(f)
    assert (g.parted_at, g.waiting, g.ahead, g.no_dump) == (6, [0], [2, 3], [1])
    (found,) = f.findings()
    assert found.code == "DDP703" and found.ranks == [0, 1, 2, 3]
    assert "rank 0 is stuck in all_reduce #6" in found.message
    assert "ranks 2,3 completed it and went on to a later collective" in found.message
    assert found.data["ahead"] == [2, 3] and found.data["no_dump"] == [1]
