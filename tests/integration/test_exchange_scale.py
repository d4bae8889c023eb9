"""The result exchange's cost per rank does not grow with N: real `ddpdoctor check` runs of 2, 4
and 8 ranks on gloo (one launch each, shared by every assertion here). Rank 0 receives every
rank's results; every other rank receives the same 24 bytes per check whatever N is."""

from __future__ import annotations

import pytest
from harness import Run, run_check

from ddpdoctor.runfiles import RunFolder

pytestmark = pytest.mark.slow
SIZES = (2, 4, 8)
CHECKS = "env,process_group,sampler"  # cheap checks: 8 ranks share 2 cores here


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Run]:
    return {
        n: run_check(
            tmp_path_factory.mktemp(f"x{n}") / "run",
            "--nproc",
            str(n),
            "--only",
            CHECKS,
            "--timeout",
            "60",
            "-v",
            "--ascii",
        )
        for n in SIZES
    }


def _bytes(run: Run) -> dict[int, dict[str, int]]:
    return {r: d.exchange_bytes for r, d in RunFolder(run.run_dir).read_ranks().items()}


def test_every_run_passes_and_joins_every_rank(runs: dict[int, Run]) -> None:
    for n, run in runs.items():
        assert run.report is not None, run.stdout + run.stderr
        assert [r["state"] for r in run.report["ranks"]] == ["ok"] * n
        assert run.check("sampler")["status"] == "pass", run.stdout
        assert sorted(run.check("sampler")["ranks"]) == sorted(str(r) for r in range(n))


def test_what_a_non_zero_rank_receives_is_flat_in_n(runs: dict[int, Run]) -> None:
    per_n = {n: _bytes(run) for n, run in runs.items()}
    exchanges = {b["exchanges"] for got in per_n.values() for b in got.values()}
    assert exchanges == {3}  # env, process_group, sampler: one exchange each, on every rank
    received = {b["received"] for got in per_n.values() for r, b in got.items() if r != 0}
    assert received == {3 * 24}  # the 3-int64 decision per check, at 2, 4 and 8 ranks alike
    # what a non-zero rank sends is its own results: about the same size at every N
    sent = {n: max(b["sent"] for r, b in got.items() if r != 0) for n, got in per_n.items()}
    assert max(sent.values()) < 1.5 * min(sent.values()), sent
    # rank 0 receives every other rank's results: that part grows with N
    zero = [per_n[n][0]["received"] for n in SIZES]
    assert zero[0] < zero[1] < zero[2], zero
    assert zero[2] >= 7 * min(sent.values()) // 2


def test_verbose_report_shows_the_exchange_bytes(runs: dict[int, Run]) -> None:
    out = runs[4].stdout
    assert "Result exchange: rank 0 received" in out and "in 3 exchanges" in out
    assert "other ranks here at most" in out and "72 B received" in out
    assert runs[4].report["launch"]["exchange_bytes"]["3"]["received"] == 72
