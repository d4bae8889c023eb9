"""The per-rank record: round trip, atomic files, tolerant reads, bounded sketches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpdoctor.trace import record as R
from ddpdoctor.trace.digest import ItemSketch, distinct_estimate, overlap_share, union
from ddpdoctor.trace.record import (
    Collective,
    DataPass,
    Event,
    Exit,
    Fingerprint,
    TraceRecord,
    Write,
    read_records,
)  # fmt: skip
from ddpdoctor.trace.sites import Site


def full_record(rank: int = 1) -> TraceRecord:
    here = Site("train.py", 12)
    return TraceRecord(
        rank=rank, world_size=2, local_rank=rank, host="node-a", pid=4242, script="train.py",
        argv=["train.py", "--lr", "1"], steps=7, backend="gloo",
        events=[Event(R.INIT, here, 0, 1.5, 1, {"backend": "gloo"})],
        passes=[DataPass(0, 0, here, Site("train.py", 20), sampler="DistributedSampler",
                         distributed=True, shuffle=True, set_epoch=0, dataset_len=10, batches=3,
                         items=5, complete=True, order_digest="ab", set_digest="cd:5", sketch=[1, 2])],
        collectives=[Collective("all_reduce", "float32", [2, 3], "world", here)],
        collective_count=1, collective_digest="ff", fingerprint_names=["w"],
        fingerprints=[Fingerprint(1, [[1.0, 2.0]], "nd", here)], scales={1: 1024.0},
        skipped_steps=[2], skipped_count=1, writes=[Write("/tmp/x.pt", "torch.save", here, 2)],
        step_s=[0.1], data_s=[0.01], forward_s=[0.02],
        exit=Exit("exception", 1, "ValueError", "boom", here, ["line"]),
    )  # fmt: skip


def test_round_trip_is_lossless_through_json() -> None:
    rec = full_record()
    again = TraceRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert again == rec
    assert rec.to_json()["schema"] == "ddpdoctor.trace/1"


def test_from_json_refuses_other_documents() -> None:
    with pytest.raises(ValueError, match="not a ddpdoctor.trace/1 record"):
        TraceRecord.from_json({"schema": "ddpdoctor.report/1"})


def test_write_is_atomic_and_read_records_skips_garbage(tmp_path: Path) -> None:
    full_record(0).write(tmp_path)
    full_record(1).write(tmp_path)
    (tmp_path / "trace-2.json").write_text("{half a fi")
    (tmp_path / "trace-3.json").write_text(json.dumps({"schema": "other"}))
    assert sorted(read_records(tmp_path)) == [0, 1]
    assert not list(tmp_path.glob(".*.tmp"))


def test_spawner_records_are_not_ranks(tmp_path: Path) -> None:
    rec = full_record(0)
    rec.role = "spawner"
    rec.write(tmp_path)
    assert (tmp_path / "spawner-4242.json").exists()
    assert read_records(tmp_path) == {}


def test_sketch_is_exact_below_k_and_bounded_above() -> None:
    a, b = ItemSketch(), ItemSketch()
    a.add_many(range(100))
    b.add_many(reversed(range(100)))
    assert a.set_digest == b.set_digest and a.order_digest != b.order_digest
    assert distinct_estimate(a.sketch()) == 100.0
    big = ItemSketch()
    big.add_many(range(200_000))
    assert len(big.sketch()) == 512  # memory stays at k however long the epoch
    assert 180_000 < distinct_estimate(big.sketch()) < 220_000


def test_overlap_and_union_estimates() -> None:
    half, other = ItemSketch(), ItemSketch()
    half.add_many(range(0, 10_000))
    other.add_many(range(5_000, 15_000))
    assert 0.4 < overlap_share(half.sketch(), other.sketch()) < 0.6
    assert 13_000 < distinct_estimate(union([half.sketch(), other.sketch()])) < 17_000
    disjoint = ItemSketch()
    disjoint.add_many(range(20_000, 30_000))
    assert overlap_share(half.sketch(), disjoint.sketch()) == 0.0
