"""The judges on crafted records: each finding by its exact code, ranks and line, and the
healthy counterpart of each silent. Device facts for GPUs are written by hand here (no GPU on
this machine); the tracer records them the same way from DDP's constructor."""

from __future__ import annotations

from ddpdoctor.report.model import Level
from ddpdoctor.trace import catalog as C
from ddpdoctor.trace import record as R
from ddpdoctor.trace.digest import ItemSketch
from ddpdoctor.trace.judges import judge
from ddpdoctor.trace.record import (
    Collective,
    DataPass,
    Event,
    Exit,
    Fingerprint,
    TraceRecord,
    Write,
)
from ddpdoctor.trace.sites import Site


def at(line: int) -> Site:
    return Site("train.py", line)


def recs(n: int = 2, **fields: object) -> dict[int, TraceRecord]:
    return {
        r: TraceRecord(rank=r, world_size=n, local_rank=r, host="node-a", **fields)
        for r in range(n)
    }  # type: ignore[arg-type]


def codes(records: dict[int, TraceRecord], **kw: object) -> list[tuple[str, list[int], int | None]]:
    return [
        (f.code, f.ranks, f.where.line if f.where else None)
        for f in judge(records, len(records), **kw)
    ]  # type: ignore[arg-type]


def a_pass(items: range | list[int], *, epoch: int = 0, complete: bool = True, batches: int = 4,
           distributed: bool = True, shuffle: bool = True, n: int = 16) -> DataPass:  # fmt: skip
    s = ItemSketch()
    s.add_many(items)
    return DataPass(0, epoch, at(10), at(20), sampler="DistributedSampler" if distributed else "RandomSampler",
                    distributed=distributed, shuffle=shuffle, sampler_site=at(9), dataset_len=n,
                    batches=batches, items=s.count, complete=complete, order_digest=s.order_digest,
                    set_digest=s.set_digest, sketch=s.sketch())  # fmt: skip


def test_healthy_records_say_nothing() -> None:
    r = recs()
    for rank, rec in r.items():
        rec.passes = [a_pass(range(rank, 16, 2), epoch=e) for e in range(2)]
        rec.passes[1] = a_pass(list(reversed(range(rank, 16, 2))), epoch=1)
        rec.events = [
            Event(R.INIT, at(3)),
            Event(R.DESTROY, at(30), data={"after_barrier": True, "stopping": None}),
        ]
        rec.collectives = [Collective("all_reduce", "float32", [4], "world", at(25))]
        rec.fingerprints = [Fingerprint(1, [[1.0, 2.0]], "d", at(22))]
        rec.fingerprint_names = ["w"]
        rec.scales = {1: 1024.0}
        rec.exit = Exit("returned", 0)
    assert codes(r) == []


def test_same_samples_on_every_rank_is_ddl002_at_the_loader() -> None:
    r = recs()
    for rec in r.values():
        rec.passes = [a_pass(range(16), distributed=False)]
    assert codes(r) == [("DDL002", [0, 1], 10)]


def test_same_order_two_epochs_is_ddl003_at_the_sampler() -> None:
    r = recs()
    for rank, rec in r.items():
        rec.passes = [a_pass(range(rank, 16, 2), epoch=e) for e in range(2)]
    [f] = judge(r, 2)
    assert (f.code, f.ranks, f.where) == ("DDL003", [0, 1], at(9))
    assert "never called" in f.message


def test_uneven_batches_names_ranks_and_counts_even_while_one_is_stuck() -> None:
    r = recs()
    r[0].passes = [a_pass(range(0, 10, 2), batches=5, complete=False)]
    r[1].passes = [a_pass(range(1, 8, 2), batches=4)]
    [f] = judge(r, 2)
    assert (f.code, f.level, f.where) == ("DDR301", Level.FAIL, at(20))
    assert f.data["batches"] == {"0": 5, "1": 4}
    assert "rank 0: 5 (still in the loop)" in f.message


def test_a_pass_cut_by_the_step_limit_is_not_uneven() -> None:
    r = recs()
    r[0].passes = [a_pass(range(0, 6, 2), batches=3, complete=False)]
    r[1].passes = [a_pass(range(1, 16, 2), batches=8)]
    assert codes(r) == []


def test_low_coverage() -> None:
    r = recs()
    for rank, rec in r.items():
        rec.passes = [a_pass(range(rank, 8, 2), n=16)]
    assert codes(r) == [("DDR302", [0, 1], 9)]


def test_before_init_crash_and_alive_group() -> None:
    r = recs()
    for rec in r.values():
        rec.events = [Event(R.BEFORE_INIT, at(5), data={"what": "ddp"})]
        rec.exit = Exit(
            "exception", 1, "ValueError", "Default process group has not been initialized", at(5)
        )
    r[1].events.append(Event(R.GROUP_ALIVE))
    assert codes(r) == [("DDL001", [0, 1], 5), ("DDR102", [0, 1], 5), ("DDL007", [1], None)]


def test_destroy_without_barrier_is_a_note_until_the_rank_aborts() -> None:
    r = recs()
    for rec in r.values():
        rec.events = [Event(R.DESTROY, at(30), data={"after_barrier": False, "stopping": None})]
    [note] = judge(r, 2)
    assert (note.code, note.level) == ("DDR101", Level.INFO)
    [warn] = judge(r, 2, exit_codes={0: 0, 1: -6})
    assert warn.level == Level.WARN and "rank 1 then aborted" in warn.message


def test_unfinished_rank_named_with_its_line_from_the_stack_dump() -> None:
    r = recs()
    r[0].exit = Exit("steps", 0)
    r[0].steps = 50
    r[1].steps = 37
    dump = 'Current thread 0x1 (most recent call first):\n  File "train.py", line 44 in step\n'
    assert codes(r, stacks={1: dump}) == [("DDR103", [1], None), ("DDR104", [1], 44)]


def test_scaler_order_problems_keep_lint_code() -> None:
    r = recs()
    for rec in r.values():
        rec.events = [
            Event(R.CLIP_SCALED, at(14), data={"api": "clip_grad_norm_"}),
            Event(R.ZERO_GRAD_BEFORE_STEP, at(15), data={"scaler": True}),
            Event(R.STEP_WITHOUT_UPDATE, at(16)),
            Event(R.SCALER_CREATED, at(11), count=4, data={"after_steps": 0}),
        ]
    assert codes(r) == [
        ("DDL005", [0, 1], 14),
        ("DDL005", [0, 1], 15),
        ("DDL005", [0, 1], 16),
        ("DDL005", [0, 1], 11),
    ]
    assert all(p is C.BY_CODE[p.code] for p in C.ALL)


def test_zero_grad_without_scaler_scale_and_skips_across_ranks() -> None:
    r = recs()
    r[0].events = [Event(R.ZERO_GRAD_BEFORE_STEP, at(15), data={"scaler": False}),
                   Event(R.SCALER_CREATED, at(8))]  # fmt: skip
    r[0].scales, r[1].scales = {1: 1024.0, 10: 2048.0}, {1: 1024.0, 10: 1024.0}
    r[0].steps, r[1].steps = 10, 9
    r[0].skipped_count, r[1].skipped_count = 0, 1
    assert codes(r) == [("DDR401", [0], 15), ("DDR402", [0, 1], 8), ("DDR403", [0, 1], 8)]


def test_replicas_diverged_names_first_step_and_parameter() -> None:
    r = recs()
    for rank, rec in r.items():
        rec.fingerprint_names = ["layer.weight", "layer.bias"]
        rec.fingerprints = [
            Fingerprint(1, [[1.0, 1.0], [0.5, 0.5]], "d", at(18)),
            Fingerprint(10, [[1.0, 1.0], [0.5 + rank, 0.5]], "d", at(18)),
        ]
    [f] = judge(r, 2)
    assert (f.code, f.ranks, f.where, f.data["step"], f.data["parameter"]) == (
        "DDR501",
        [1],
        at(18),
        10,
        "layer.bias",
    )


def test_collective_mismatch_first_index_and_both_sides() -> None:
    r = recs()
    for rank, rec in r.items():
        rec.collectives = [Collective("barrier", "", [], "world", at(7)),
                           Collective("all_reduce", "float32", [2, 3] if rank == 0 else [6], "world", at(9))]  # fmt: skip
    [f] = judge(r, 2)
    assert (f.code, f.data["index"], f.where) == ("DDR601", 2, at(9))
    assert (
        "rank 0: all_reduce(float32 2x3)" in f.message
        and "rank 1: all_reduce(float32 6)" in f.message
    )
    r[1].collectives = r[1].collectives[:1]
    [f] = judge(r, 2)
    assert "nothing (no further collective)" in f.message


def test_subgroup_collectives_are_not_compared() -> None:
    r = recs()
    r[0].collectives = [Collective("all_reduce", "float32", [4], "0", at(9))]
    assert codes(r) == []


def test_same_path_from_several_ranks_is_ddl006() -> None:
    r = recs()
    for rank, rec in r.items():
        rec.writes = [
            Write("/ckpt/model.pt", "torch.save", at(40)),
            Write(f"/ckpt/rank{rank}.pt", "torch.save", at(41)),
        ]
    assert codes(r) == [("DDL006", [0, 1], 40)]
    r[1].host = "node-b"  # another host: a local path there is another file
    assert codes(r) == []


def test_straggler_and_data_bottleneck() -> None:
    r = recs()
    for rank, rec in r.items():
        rec.passes = [a_pass(range(rank, 16, 2))]
        rec.step_s = [0.05] * 12
        rec.data_s = [0.001] * 12
        rec.forward_s = [0.040 if rank == 1 else 0.004] * 12
    assert codes(r) == [("DDR801", [1], 20)]
    for rec in r.values():
        rec.data_s = [0.04] * 12
        rec.forward_s = [0.004] * 12
    assert codes(r) == [("DDR802", [0, 1], 10)]


def test_gpu_device_mapping_from_ddp_facts() -> None:
    r = recs(3)
    facts = {"param_devices": ["cuda:0"], "current_device": "cuda:0", "local_rank": 0}
    r[0].events = [Event(R.DDP_BUILT, at(12), data={**facts, "device_ids": ["cuda:0"]})]
    r[1].events = [
        Event(R.DDP_BUILT, at(12), data={**facts, "local_rank": 1, "device_ids": ["cuda:0"]})
    ]
    r[2].events = [Event(R.DDP_BUILT, at(12), data={"param_devices": ["cpu"], "current_device": "cuda:0",
                                                     "local_rank": 2, "device_ids": ["cuda:2"]})]  # fmt: skip
    got = codes(r)
    assert ("DDL004", [1], 12) in got  # device_ids is not LOCAL_RANK
    assert ("DDL004", [2], 12) in got  # the model was not moved before the wrap
    assert ("DDR202", [2], 12) in got  # current device cuda:0, DDP on cuda:2
    assert ("DDR201", [0, 1], 12) in got  # two ranks on cuda:0
    assert len(got) == 4


def test_pruned_passes_are_not_judged_for_coverage() -> None:
    r = recs()
    for rank, rec in r.items():
        rec.passes = [a_pass(range(rank, 16, 2))]
        rec.passes[0].sketch = []  # an older pass keeps its digests only
    assert codes(r) == []


def test_summary_lines_per_area() -> None:
    from ddpdoctor.trace.judges import AREAS, summarize

    r = recs()
    for rank, rec in r.items():
        rec.backend, rec.steps = "gloo", 12
        rec.exit = Exit("steps", 0)
        rec.passes = [a_pass(range(rank, 16, 2), epoch=e) for e in range(3)]
        rec.events = [
            Event(R.DDP_BUILT, at(12), data={"device_ids": None, "param_devices": ["cpu"]})
        ]
        rec.step_s, rec.data_s = [0.01] * 10, [0.001] * 10
    s = summarize(r)
    assert list(s) == list(AREAS)
    assert s["group"] == "gloo, 2 ranks, 12 optimizer steps, ended: steps"
    assert s["data"] == "1 DataLoader, 3 passes on rank 0, 4 batches / 8 samples per epoch"
    assert s["timing"] == "10.0 ms per step (median), 10% waiting for data"
    assert s["devices"] == "DDP on cpu (2 wraps)" and s["gradscaler"] == "no GradScaler"
