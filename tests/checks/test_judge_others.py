"""process_group, rank_device, allreduce, sampler and gradscaler judges on crafted per-rank data.
GPU facts are crafted here because this machine has no GPU (the NVML/CUDA paths run for real
only on a GPU host)."""

from __future__ import annotations

from typing import Any

from ddpdoctor.checks import allreduce, gradscaler, process_group, rank_device, sampler
from judge_data import codes, world


def pg_rank(r: int, barrier_ms: float = 0.3) -> dict[str, Any]:
    return {
        "backend": "gloo",
        "world_size": 2,
        "rank": r,
        "init_s": 0.02,
        "barrier_ms": barrier_ms,
        "device": "cpu",
    }


def test_process_group_healthy_and_slow_barrier() -> None:
    assert codes(process_group.judge({0: pg_rank(0), 1: pg_rank(1)}, world())) == []
    j = process_group.judge({0: pg_rank(0), 1: pg_rank(1, barrier_ms=120.0)}, world())
    assert codes(j) == ["DDP203"]
    assert j.findings[0].ranks == [1]


def cpu_rank(
    r: int, threads: int = 1, affinity: tuple[int, ...] = (0, 1), host: str = "node-a"
) -> dict[str, Any]:
    return {
        "host": host,
        "local_rank": r,
        "local_world_size": 2,
        "cuda_visible_devices": None,
        "cpu_count": 2,
        "affinity": list(affinity),
        "threads": threads,
        "omp_num_threads": str(threads),
        "device_type": "cpu",
    }


def gpu_rank(
    r: int, index: int, uuid: str, count: int = 8, lws: int = 8, cvd: str | None = None
) -> dict[str, Any]:
    return {
        "host": "node-a",
        "local_rank": r,
        "local_world_size": lws,
        "cuda_visible_devices": cvd,
        "cpu_count": 64,
        "affinity": list(range(64)),
        "threads": 1,
        "device_type": "cuda",
        "device_index": index,
        "device_count": count,
        "uuid": uuid,
        "pci_bus_id": f"0000:{index:02x}:00",
        "nvml": {},
    }


def test_cpu_oversubscription_and_overlapping_pins() -> None:
    assert codes(rank_device.judge({0: cpu_rank(0), 1: cpu_rank(1)}, world())) == []
    j = rank_device.judge({0: cpu_rank(0, threads=2), 1: cpu_rank(1, threads=2)}, world())
    assert codes(j) == ["DDP304"]
    assert "run 4 threads on 2 cores" in j.findings[0].message
    pinned = {0: cpu_rank(0, affinity=(0, 1)), 1: cpu_rank(1, affinity=(0, 1))}
    pinned[0]["cpu_count"] = pinned[1]["cpu_count"] = 4
    assert codes(rank_device.judge(pinned, world())) == ["DDP305"]


def test_two_ranks_on_one_gpu() -> None:
    data = {0: gpu_rank(0, 0, "GPU-aaa"), 1: gpu_rank(1, 0, "GPU-aaa")}
    j = rank_device.judge(data, world(backend="nccl"))
    assert codes(j) == ["DDP301", "DDP302"]
    assert j.findings[0].ranks == [0, 1]
    assert j.findings[1].message == "rank 1 has LOCAL_RANK=1 but computes on cuda:0"


def test_per_rank_visible_devices_is_not_a_mismatch() -> None:
    data = {r: gpu_rank(r, 0, f"GPU-{r}", count=1, lws=2, cvd=str(r)) for r in range(2)}
    assert codes(rank_device.judge(data, world(backend="nccl"))) == []


def test_more_ranks_than_gpus() -> None:
    data = {r: gpu_rank(r, r % 2, f"GPU-{r % 2}", count=2, lws=3) for r in range(3)}
    assert "DDP303" in codes(rank_device.judge(data, world(3, backend="nccl")))


def ar_rank(wrong: int = 0, time_s: float = 0.004) -> dict[str, Any]:
    return {"sizes": [{"bytes": 4 << 20, "count": 1 << 20, "time_s": time_s, "wrong": wrong}]}


def test_allreduce_wrong_values_name_the_rank() -> None:
    j = allreduce.judge({0: ar_rank(), 1: ar_rank(wrong=17)}, world())
    assert codes(j) == ["DDP401"]
    assert j.findings[0].ranks == [1]
    assert "17 wrong elements at 4 MiB" in j.findings[0].message


def test_allreduce_below_floor() -> None:
    j = allreduce.judge({0: ar_rank(time_s=1.0), 1: ar_rank(time_s=2.0)}, world())
    assert codes(j) == ["DDP402"]
    assert j.metrics["busbw_gbps"] == (4 << 20) / 2.0 / 1e9  # slowest rank's time, × 2(n-1)/n = 1


def shard(
    r: int, n: int = 10, world_size: int = 2, indices: list[int] | None = None, **kw: Any
) -> dict[str, Any]:
    base = {
        "dataset_len": n,
        "num_replicas": world_size,
        "perm_digest": "p0",
        "reshuffled": True,
        "_epoch0": indices if indices is not None else list(range(r, n, world_size)),
    }
    return base | kw


def test_sampler_healthy_with_padding() -> None:
    data = {0: shard(0, n=5, indices=[0, 2, 4]), 1: shard(1, n=5, indices=[1, 3, 0])}
    j = sampler.judge(data, world())
    assert codes(j) == []
    assert j.metrics == {"padding": 1, "overlap": 0}


def test_sampler_overlap_incomplete_and_identical_shards() -> None:
    same = list(range(0, 10, 2))
    j = sampler.judge({0: shard(0, indices=same), 1: shard(1, indices=same)}, world())
    assert codes(j) == ["DDP501", "DDP502"]
    assert "identical shards" in j.findings[0].message


def test_sampler_not_judged_when_ranks_disagree_on_the_world_size() -> None:
    """A hand launch with WORLD_SIZE 2 on one rank and 3 on the other: each cut its shard for
    its own world, so overlap and coverage would be false alarms; env's DDP102 names the cause."""
    data = {0: shard(0, n=9, world_size=2), 1: shard(1, n=9, world_size=3)}
    j = sampler.judge(data, world())
    assert codes(j) == []
    assert "disagree on the world size (2 on rank 0; 3 on rank 1)" in j.summary


def test_sampler_permutation_and_set_epoch() -> None:
    data = {0: shard(0), 1: shard(1, perm_digest="other", reshuffled=False)}
    assert codes(sampler.judge(data, world())) == ["DDP504", "DDP503"]


def test_sampler_partial_world_does_not_claim_incomplete() -> None:
    j = sampler.judge({0: shard(0)}, world())
    assert codes(j) == []
    assert "coverage not judged" in j.summary


def scaler_rank(scales: list[float], skipped: list[bool], params: str = "p") -> dict[str, Any]:
    steps = [
        {"scale": s, "growth_tracker": 0, "skipped": k, "params": params}
        for s, k in zip(scales, skipped, strict=True)
    ]
    return {"supported": True, "dtype": "bfloat16", "inf_step": 2, "inf_rank": 1, "steps": steps}


def test_gradscaler_healthy() -> None:
    ok = scaler_rank([1024, 2048, 1024, 1024], [False, False, True, False])
    assert codes(gradscaler.judge({0: ok, 1: ok}, world())) == []


def test_gradscaler_divergence() -> None:
    ok = scaler_rank([1024, 2048, 1024, 1024], [False, False, True, False], params="a")
    bad = scaler_rank([1024, 2048, 2048, 4096], [False, False, False, False], params="b")
    j = gradscaler.judge({0: ok, 1: bad}, world())
    assert codes(j) == ["DDP601", "DDP602", "DDP603"]
    assert j.findings[1].ranks == [1]
    assert j.findings[0].message == "after step 2 the scale is 1024 on rank 0, 2048 on rank 1"


def test_gradscaler_unsupported() -> None:
    assert codes(gradscaler.judge({0: {"supported": False}}, world(1))) == ["DDP604"]
