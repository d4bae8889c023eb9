"""Pure judges over the software versions, the RDMA ports, the host settings and the speed test.
Same shape as the GPU judges: facts in, (summary, findings) out."""

from __future__ import annotations

import statistics

from ddpdoctor.node import codes
from ddpdoctor.node.envinfo import SHM_WARN_BYTES
from ddpdoctor.node.expect import Expectations
from ddpdoctor.node.host import HostFacts
from ddpdoctor.node.nvml import GpuInventory
from ddpdoctor.node.perf import PerfResult
from ddpdoctor.node.rdma import RdmaPort
from ddpdoctor.report.model import Finding, Level

Verdict = tuple[str, list[Finding]]
PEER_RATIO = 0.7  # a GPU below 70 % of its node's median is sick (NCCL's diagnostics use 30 %)


def _version_ok(actual: str, wanted: str) -> bool:
    """'550' accepts '550.54.15'; '2.13.0' accepts '2.13.0+cu124'; '12.4' refuses '12.40'."""
    base = actual.split("+")[0]
    return any(v == wanted or v.startswith(wanted + ".") for v in (actual, base))


def _tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def software(inv: GpuInventory, versions: dict[str, str | None], expect: Expectations) -> Verdict:
    """Driver, CUDA, NCCL and torch: against the --expect file, and torch's CUDA against what
    the driver supports (a torch built for a newer CUDA than the driver cannot start CUDA)."""
    have = {
        "driver": inv.driver,
        "cuda": inv.cuda_driver,
        "nccl": versions.get("nccl"),
        "torch": versions.get("torch"),
    }
    found: list[Finding] = []
    for key, actual in have.items():
        wanted = getattr(expect, key)
        if wanted is None:
            continue
        if actual is None:
            found.append(
                codes.VERSION.finding(
                    f"{key} {wanted} expected, but this node's {key} version cannot be read",
                    level=Level.WARN,
                    what=key,
                    expected=wanted,
                )
            )
        elif not _version_ok(actual, wanted):
            found.append(
                codes.VERSION.finding(
                    f"{key} {actual}, expected {wanted}", what=key, found=actual, expected=wanted
                )
            )
    built = versions.get("torch_cuda")
    if built and inv.cuda_driver and _tuple(built)[:2] > _tuple(inv.cuda_driver)[:2]:
        found.append(
            codes.VERSION.finding(
                f"torch is built for CUDA {built}, the driver supports CUDA {inv.cuda_driver} at most",
                what="cuda",
                found=inv.cuda_driver,
                expected=built,
                hint="Upgrade the driver, or install a torch wheel built for the driver's CUDA.",
            )
        )
    shown = [f"{k} {v}" for k, v in have.items() if v]
    cuda_build = f" (built for CUDA {built})" if built else ""
    return ", ".join(shown) + cuda_build if shown else "no version readable", found


def rdma(
    ports: list[RdmaPort] | None,
    growth: dict[str, dict[str, int]],
    interval_s: float | None,
    expect: Expectations,
) -> Verdict:
    """Port state, links that went down while we watched, error counters, rates."""
    if ports is None:
        return "sysfs not readable", []
    found: list[Finding] = []
    active = [p for p in ports if p.state == "ACTIVE"]
    for p in ports:
        if p.state != "ACTIVE":
            found.append(
                codes.RDMA_DOWN.finding(
                    f"{p.name} is {p.state or 'unknown'} ({p.phys_state or 'physical state unknown'})",
                    port=p.name,
                )
            )
    if expect.rdma_ports is not None and len(active) < expect.rdma_ports:
        found.append(
            codes.RDMA_DOWN.finding(
                f"{len(active)} active RDMA ports, expected {expect.rdma_ports}",
                active=len(active),
                expected=expect.rdma_ports,
            )
        )
    window = f" in {interval_s:.1f} s" if interval_s else ""
    for name, grew in sorted(growth.items()):
        downs = grew.get("link_downed", 0)
        if downs:
            found.append(
                codes.RDMA_FLAPPING.finding(
                    f"{name} went down {downs} times{window}", port=name, link_downed=downs
                )
            )
        others = {k: v for k, v in grew.items() if k != "link_downed"}
        if others:
            text = ", ".join(f"{k} +{v}" for k, v in sorted(others.items()))
            found.append(codes.RDMA_ERRORS.finding(f"{name}: {text}{window}", port=name, **others))
    rates = [p.rate_gbps for p in active if p.rate_gbps]
    floor = max([*rates, 0.0]) if expect.rdma_rate_gbps is None else expect.rdma_rate_gbps
    for p in active:
        if p.rate_gbps and p.rate_gbps < floor:
            found.append(
                codes.RDMA_RATE.finding(
                    f"{p.name} runs at {p.rate_gbps:g} Gb/s, the others at {floor:g} Gb/s"
                    if expect.rdma_rate_gbps is None
                    else f"{p.name} runs at {p.rate_gbps:g} Gb/s, expected {floor:g} Gb/s",
                    port=p.name,
                    rate_gbps=p.rate_gbps,
                )
            )
    if not ports:
        return "no RDMA device", found
    speeds = sorted({f"{r:g} Gb/s" for r in rates})
    watched = f", counters watched{window}" if interval_s else ""
    return (
        f"{len(active)} of {len(ports)} ports active ({', '.join(speeds) or 'rate unknown'}){watched}",
        found,
    )


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def host(facts: HostFacts, has_rdma: bool) -> Verdict:
    """/dev/shm, the locked-memory limit (only matters with RDMA), the CPU governor."""
    found: list[Finding] = []
    parts = []
    if facts.shm_total_bytes is not None:
        parts.append(f"/dev/shm {_gib(facts.shm_total_bytes)}")
        if facts.shm_total_bytes < SHM_WARN_BYTES:
            found.append(
                codes.SHM_SMALL.finding(
                    f"/dev/shm is {_gib(facts.shm_total_bytes)}", bytes=facts.shm_total_bytes
                )
            )
    soft = facts.memlock_soft_bytes
    if soft is not None:
        parts.append("memlock unlimited" if soft == -1 else f"memlock {_gib(soft)}")
        if soft != -1 and has_rdma:
            found.append(
                codes.MEMLOCK.finding(
                    f"ulimit -l is {soft // 1024} KiB on a node with RDMA ports", bytes=soft
                )
            )
    slow = {g: n for g, n in facts.governors.items() if g != "performance"}
    parts.append(
        "governor " + ", ".join(sorted(facts.governors))
        if facts.governors
        else "governor not exposed"
    )
    if slow:
        text = ", ".join(f"{n} CPUs on {g}" for g, n in sorted(slow.items()))
        found.append(codes.GOVERNOR.finding(f"CPU governor: {text}", governors=slow))
    return ", ".join(parts) or "host settings not readable", found


def _fmt(r: PerfResult) -> str:
    if r.error:
        return f"{r.device} failed"
    if r.device == "cpu":
        return f"cpu {r.gemm_gflops:g} GFLOP/s, {r.copy_gbps:g} GB/s"
    return f"{r.device} {(r.gemm_gflops or 0) / 1000:.0f} TFLOP/s, {r.copy_gbps:g} GB/s"


def speed(results: list[PerfResult], expect: Expectations) -> Verdict:
    """Each device against its floor, and each GPU against the median of this node's GPUs."""
    found: list[Finding] = []
    for r in results:
        is_cpu = r.device == "cpu"
        if r.error:
            found.append(
                codes.COMPUTE_SLOW.finding(
                    f"{r.device}: the test failed: {r.error}",
                    level=Level.WARN if is_cpu else Level.FAIL,
                    device=r.device,
                )
            )
            continue
        gemm_floor = expect.cpu_gemm_gflops if is_cpu else _giga(expect.gpu_gemm_tflops)
        copy_floor = expect.cpu_copy_gbps if is_cpu else expect.gpu_copy_gbps
        gemm_unit, scale = ("GFLOP/s", 1.0) if is_cpu else ("TFLOP/s", 1000.0)
        for problem, what, value, floor, unit, div in (
            (codes.COMPUTE_SLOW, "GEMM", r.gemm_gflops, gemm_floor, gemm_unit, scale),
            (codes.MEMORY_SLOW, "copy", r.copy_gbps, copy_floor, "GB/s", 1.0),
        ):
            if floor and value is not None and value < floor:
                found.append(
                    problem.finding(
                        f"{r.device}: {what} {value / div:g} {unit}, floor {floor / div:g} {unit}",
                        device=r.device,
                        measured=value,
                        floor=floor,
                    )
                )
    found += _peers([r for r in results if r.device != "cpu" and not r.error])
    return "; ".join(_fmt(r) for r in results) or "not run", found


def _giga(tflops: float | None) -> float | None:
    return None if tflops is None else tflops * 1000.0


def _peers(gpus: list[PerfResult]) -> list[Finding]:
    if len(gpus) < 2:
        return []
    found = []
    for attr, what in (("gemm_gflops", "GEMM"), ("copy_gbps", "copy")):
        values = [getattr(r, attr) for r in gpus if getattr(r, attr)]
        if len(values) < 2:
            continue
        median = statistics.median(values)
        for r in gpus:
            value = getattr(r, attr)
            if value and value < PEER_RATIO * median:
                found.append(
                    codes.SLOWER_THAN_PEERS.finding(
                        f"{r.device}: {what} at {value / median:.2f} of this node's median",
                        device=r.device,
                        ratio=round(value / median, 3),
                    )
                )
    return found
