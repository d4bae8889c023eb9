"""The `ddpdoctor.node/1` document of one node, and the digest that groups nodes: the facts
that should be identical on every node of a machine type (inventory, versions, link states and
widths, host limits), never the ones that vary by the minute (temperatures, counters, speeds)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ddpdoctor.node.expect import Expectations, as_dict
from ddpdoctor.node.facts import NodeFacts
from ddpdoctor.report import schema
from ddpdoctor.report.model import CheckResult, Finding

KIND = "node"


def digest_fields(facts: NodeFacts) -> dict[str, Any]:
    """What two healthy nodes of one type share, in a JSON-stable form."""
    inv = facts.gpus
    devices = inv.devices
    return {
        "gpu_count": len(devices) if inv.available else None,
        "gpu_models": sorted({g.name or "?" for g in devices}),
        "driver": inv.driver,
        "cuda_driver": inv.cuda_driver,
        "torch": facts.versions.get("torch"),
        "torch_cuda": facts.versions.get("torch_cuda"),
        "nccl": facts.versions.get("nccl"),
        "nvlinks_active": [sum(1 for link in g.nvlinks if link.active) for g in devices],
        "pcie": sorted({f"gen{g.pcie_gen_max} x{g.pcie_width}" for g in devices}),
        "ecc": sorted({str(g.ecc_enabled) for g in devices}),
        "persistence": sorted({str(g.persistence) for g in devices}),
        "mig": sorted({str(g.mig_enabled) for g in devices}),
        "rdma": [f"{p.name} {p.state} {p.rate_gbps}" for p in facts.rdma or []],
        "shm_bytes": facts.host.shm_total_bytes,
        "memlock": facts.host.memlock_soft_bytes,
        "governors": sorted(facts.host.governors),
    }


def digest(fields: dict[str, Any]) -> str:
    text = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _row(r: CheckResult) -> dict[str, Any]:
    return {
        "id": r.id,
        "title": r.title,
        "status": r.status,
        "summary": r.summary,
        "findings": [f.to_json() for f in r.findings],
    }


def node_doc(
    facts: NodeFacts,
    rows: list[CheckResult],
    status: str,
    expect: Expectations,
    duration_s: float,
) -> dict[str, Any]:
    fields = digest_fields(facts)
    return {
        "schema": schema.tag(KIND),
        "kind": "node",
        "node": facts.node,
        "status": status,
        "duration_s": round(duration_s, 2),
        "machine": expect.machine,
        "expect": as_dict(expect),
        "rows": [_row(r) for r in rows],
        "digest": digest(fields),
        "digest_fields": fields,
        "facts": facts.to_json(),
    }


def findings_of(doc: dict[str, Any]) -> list[Finding]:
    return [Finding.from_json(f) for row in doc.get("rows", []) for f in row.get("findings", [])]


def baseline_values(facts: NodeFacts) -> dict[str, Any]:
    """What `--save-baseline` records (before expect.baseline applies its margin)."""
    inv = facts.gpus
    gpus = [r for r in facts.perf if r.device != "cpu" and not r.error]
    cpu = next((r for r in facts.perf if r.device == "cpu" and not r.error), None)
    active = [p for p in facts.rdma or [] if p.state == "ACTIVE"]
    rates = [p.rate_gbps for p in active if p.rate_gbps]
    return {
        "gpu_count": len(inv.devices) if inv.available else None,
        "gpu_model": inv.devices[0].name if inv.devices else None,
        "driver": inv.driver,
        "cuda": inv.cuda_driver,
        "nccl": facts.versions.get("nccl"),
        "torch": facts.versions.get("torch"),
        "gpu_gemm_tflops": min((r.gemm_gflops or 0) for r in gpus) / 1000 if gpus else None,
        "gpu_copy_gbps": min((r.copy_gbps or 0) for r in gpus) if gpus else None,
        "cpu_gemm_gflops": cpu.gemm_gflops if cpu else None,
        "cpu_copy_gbps": cpu.copy_gbps if cpu else None,
        "rdma_ports": len(active) if facts.rdma else None,
        "rdma_rate_gbps": max(rates) if rates else None,
    }


def toml_text(values: dict[str, Any], header: str) -> str:
    """A flat TOML table (strings and numbers only: all a baseline holds)."""
    lines = [f"# {header}"]
    for key, value in values.items():
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"
