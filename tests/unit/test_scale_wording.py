"""How groups of ranks, hosts and findings read at any size: ranges, Slurm host lists, counts of
what is left out, and a report of a few dozen lines whatever N is (crafted reports: no ranks)."""

from __future__ import annotations

import io

from rich.console import Console

from ddpdoctor.report import problems, render
from ddpdoctor.report.model import CheckResult, RankState, Report
from ddpdoctor.report.ranks import fmt_ranks, hosts_txt, ranks_txt, spread


def test_rank_lists_are_ranges_and_capped_with_a_count() -> None:
    assert fmt_ranks([0, 1, 2, 5]) == "0-2,5"
    assert ranks_txt(range(4096)) == "ranks 0-4095"
    every_other = fmt_ranks(range(0, 100, 2))
    assert every_other.startswith("0,2,4,") and every_other.endswith("… and 38 more")
    assert every_other.count(",") == 12  # 12 named, then the count


def test_host_lists_are_slurm_style_and_capped() -> None:
    assert hosts_txt(["node-0417", "node-0588", "node-0418"]) == "node-[0417-0418,0588]"
    many = hosts_txt([f"n{i}" for i in range(0, 300, 3)])
    assert many.endswith("… and 88 more") and len(many) < 80


def test_spread_counts_the_majority_and_names_the_odd_nodes() -> None:
    hosts = {r: f"node-{r // 8:04d}" for r in range(8192)}
    values = {r: "2.19.3" if r // 8 in (417, 588) else "2.21.5" for r in range(8192)}
    text = spread(values, hosts)
    assert text.startswith("2.21.5 on 1,022 hosts (ranks 0-3335,")
    assert "2.19.3 on node-[0417,0588] (ranks 3336-3343,4704-4711)" in text


def test_findings_of_one_code_are_capped_in_the_text() -> None:
    findings = [
        problems.LOCAL_RANK_DEVICE_MISMATCH.finding(f"rank {r} computes elsewhere", [r])
        for r in range(5000)
    ]
    check = CheckResult("rank_device", "Rank ↔ device", "fail", "bad", findings)
    rep = Report(
        status="fail",
        world_size=5000,
        nnodes=625,
        backend="nccl",
        backend_reason="",
        duration_s=1.0,
        checks=[check],
        ranks=[RankState(rank=r, host=f"n{r // 8}") for r in range(5000)],
    )
    buf = io.StringIO()
    render.report(rep, ascii_only=True, console=Console(file=buf, width=120, no_color=True))
    text = buf.getvalue()
    assert text.count("DDP302") == 4  # three shown, then one line that counts the rest
    assert "... and 4,997 more DDP302 (ranks 3-4999; all in --json)" in text
    assert len(text.splitlines()) < 30


def test_progress_is_a_line_per_rank_on_one_node_and_a_bar_beyond() -> None:
    from ddpdoctor.runfiles import Heartbeat

    def beat(r: int, check: str | None, finished: bool = False, t: float = 100.0) -> Heartbeat:
        return Heartbeat(
            rank=r, host="n1", check=check, phase="running", t_phase=t, finished=finished
        )

    few = {r: beat(r, "allreduce") for r in range(4)}
    assert len(render.progress_lines(few, now=101.0)) == 4
    many = {r: beat(r, None, finished=True) for r in range(4096)}
    many[17] = beat(17, "rank_device", t=90.0)  # the furthest behind
    many[18] = beat(18, "allreduce", t=50.0)
    (line,) = render.progress_lines(many, now=100.0)
    assert "24,569/24,576" in line  # 6 checks x 4096 ranks, rank 17 at 2 of 6 and 18 at 3 of 6
    assert "slowest: rank 17 (n1) in rank_device (running) for 10.0 s" in line


def test_one_run_of_ranks_reads_as_the_walk_would_write_it() -> None:
    # the short cut for a single run of ranks must agree with the general walk
    assert [fmt_ranks(rs) for rs in ([7], [3, 4], range(5, 10), [9, 8, 7, 7])] == [
        "7",
        "3,4",
        "5-9",
        "7-9",
    ]
    assert fmt_ranks(range(16384), limit=None) == "0-16383"
