"""A short compute and memory-bandwidth test per device, so a slow device is found even when
its links are fine: a float32 matmul and a tensor copy on the CPU, a half-precision GEMM and a
device-to-device copy on each GPU. Each is bounded by a time budget and reports its best
repetition (the one least disturbed by neighbours, as STREAM does). Copy bandwidth counts the
bytes read and written (2 x the buffer), as STREAM's copy does."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CPU_GEMM_N = 512
CPU_COPY_BYTES = 64 << 20
GPU_GEMM_N = 8192
GPU_COPY_BYTES = 1 << 30
MIN_REPS = 3


@dataclass
class PerfResult:
    device: str  # "cpu", "cuda:0", ...
    name: str | None = None
    gemm_gflops: float | None = None
    copy_gbps: float | None = None
    seconds: float = 0.0
    error: str | None = None


def _best_rate(run: Callable[[], float], work: float, budget_s: float) -> float:
    """Repeat `run` (which returns its own duration) until the budget is spent, at least
    MIN_REPS times; work / the fastest duration."""
    best = float("inf")
    start = time.perf_counter()
    reps = 0
    while reps < MIN_REPS or time.perf_counter() - start < budget_s:
        best = min(best, run())
        reps += 1
    return work / best


def cpu(budget_s: float = 1.0) -> PerfResult:
    """The CPU's float32 matmul GFLOP/s and copy GB/s with torch's threads as configured."""
    try:
        import torch
    except ImportError as e:
        return PerfResult("cpu", error=f"cannot import torch: {e}")
    t0 = time.perf_counter()
    try:
        a = torch.randn(CPU_GEMM_N, CPU_GEMM_N)
        b = torch.randn(CPU_GEMM_N, CPU_GEMM_N)
        src = torch.ones(CPU_COPY_BYTES // 4)
        dst = torch.empty_like(src)
        torch.mm(a, b)  # warm-up: thread pool and first-touch of the pages
        dst.copy_(src)

        def gemm() -> float:
            s = time.perf_counter()
            torch.mm(a, b)
            return time.perf_counter() - s

        def copy() -> float:
            s = time.perf_counter()
            dst.copy_(src)
            return time.perf_counter() - s

        flops = 2.0 * CPU_GEMM_N**3
        gflops = _best_rate(gemm, flops, budget_s / 2) / 1e9
        gbps = _best_rate(copy, 2.0 * CPU_COPY_BYTES, budget_s / 2) / 1e9
        return PerfResult(
            "cpu",
            f"{torch.get_num_threads()} threads",
            round(gflops, 1),
            round(gbps, 2),
            round(time.perf_counter() - t0, 3),
        )
    except Exception as e:  # noqa: BLE001 - a failed test is a result, not an abort
        return PerfResult("cpu", error=f"{type(e).__name__}: {e}", seconds=time.perf_counter() - t0)


def _gpu_one(torch: Any, index: int, budget_s: float) -> PerfResult:
    t0 = time.perf_counter()
    dev = torch.device("cuda", index)
    name = torch.cuda.get_device_name(index)
    try:
        with torch.cuda.device(index):
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            a = torch.randn(GPU_GEMM_N, GPU_GEMM_N, device=dev, dtype=dtype)
            b = torch.randn(GPU_GEMM_N, GPU_GEMM_N, device=dev, dtype=dtype)
            src = torch.ones(GPU_COPY_BYTES // 4, device=dev)
            dst = torch.empty_like(src)

            def timed(fn: Callable[[], Any]) -> Callable[[], float]:
                def run() -> float:
                    start, end = (
                        torch.cuda.Event(enable_timing=True),
                        torch.cuda.Event(enable_timing=True),
                    )
                    start.record()
                    fn()
                    end.record()
                    end.synchronize()
                    return start.elapsed_time(end) / 1000.0

                return run

            gemm = timed(lambda: torch.mm(a, b))
            copy = timed(lambda: dst.copy_(src))
            gemm(), copy()  # warm-up: cuBLAS heuristics, clocks up
            tflops = _best_rate(gemm, 2.0 * GPU_GEMM_N**3, budget_s / 2) / 1e12
            gbps = _best_rate(copy, 2.0 * GPU_COPY_BYTES, budget_s / 2) / 1e9
        return PerfResult(
            f"cuda:{index}",
            name,
            round(tflops * 1000, 1),
            round(gbps, 1),
            round(time.perf_counter() - t0, 3),
        )
    except Exception as e:  # noqa: BLE001 - one sick GPU must not hide the others
        return PerfResult(
            f"cuda:{index}",
            name,
            error=f"{type(e).__name__}: {e}",
            seconds=time.perf_counter() - t0,
        )


def gpus(budget_s: float = 4.0) -> list[PerfResult] | None:
    """Every visible GPU in turn; None where torch sees no CUDA device."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        count = torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no CUDA build / no driver: nothing to measure
        return None
    per = budget_s / max(count, 1)
    return [_gpu_one(torch, i, per) for i in range(count)]
