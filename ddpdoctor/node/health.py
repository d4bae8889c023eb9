"""One node's verdict: the judges' findings grouped into the rows of the report (the look of
`check`), with the parts that missed the deadline shown as timed out, not as healthy."""

from __future__ import annotations

from ddpdoctor.node import codes, gpu_health, host_health
from ddpdoctor.node.expect import Expectations
from ddpdoctor.node.facts import NodeFacts
from ddpdoctor.report.model import (
    SKIP,
    TIMEOUT,
    CheckResult,
    Finding,
    Level,
    overall_status,
    status_from,
)

# row id -> (title, the gathered parts it depends on)
ROWS = {
    "gpus": ("GPUs", ("gpu-count", "nvml")),
    "gpu_memory": ("GPU memory (ECC, retired pages, row remapping, Xid)", ("nvml", "host")),
    "gpu_links": ("GPU links (NVLink, PCIe, fabric)", ("nvml",)),
    "gpu_clocks": ("Clocks, temperature, power, modes", ("nvml",)),
    "software": ("Driver, CUDA, NCCL, torch", ("nvml", "versions")),
    "rdma": ("RDMA ports", ("rdma", "rdma-again")),
    "host": ("Host (/dev/shm, memlock, CPU governor)", ("host",)),
    "speed": ("Compute and memory bandwidth", ("gpu-test", "cpu-test")),
}
GPU_ROWS = ("gpu_memory", "gpu_links", "gpu_clocks")


def _verdicts(facts: NodeFacts, expect: Expectations) -> dict[str, tuple[str, list[Finding]]]:
    inv, h = facts.gpus, facts.host
    return {
        "gpus": gpu_health.inventory(inv, expect),
        "gpu_memory": gpu_health.memory(inv, h.kernel_xids, expect),
        "gpu_links": gpu_health.links(inv, h.nvswitch_count, h.fabric_manager_running),
        "gpu_clocks": gpu_health.clocks(inv, expect),
        "software": host_health.software(inv, facts.versions, expect),
        "rdma": host_health.rdma(facts.rdma, facts.rdma_growth, facts.rdma_interval_s, expect),
        "host": host_health.host(h, bool(facts.rdma)),
        "speed": host_health.speed(facts.perf, expect),
    }


def judge(facts: NodeFacts, expect: Expectations) -> list[CheckResult]:
    """The report's rows, in a fixed order."""
    rows = []
    verdicts = _verdicts(facts, expect)
    for row_id, (title, parts) in ROWS.items():
        summary, found = verdicts[row_id]
        for f in found:
            f.host = facts.node
        late = [p for p in parts if p in facts.unfinished]
        for part in (p for p in parts if p in facts.errors):
            found.append(
                codes.PROBE_CRASHED.finding(
                    f"{part} crashed: {facts.errors[part]}", host=facts.node, part=part
                )
            )
        if late:
            found.append(
                codes.PROBE_TIMEOUT.finding(
                    f"{', '.join(late)} did not answer within the deadline",
                    host=facts.node,
                    parts=late,
                )
            )
            status = TIMEOUT
        elif (row_id in GPU_ROWS or row_id == "gpus") and not facts.gpus.available:
            status = SKIP if all(f.level < Level.WARN for f in found) else status_from(found)
        elif row_id == "speed" and not facts.perf:
            status, summary = SKIP, "not run (--no-perf)"
        else:
            status = status_from(found)
        rows.append(
            CheckResult(id=row_id, title=title, status=status, summary=summary, findings=found)
        )
    return rows


def node_status(rows: list[CheckResult]) -> str:
    return overall_status([r.status for r in rows])
