"""Many nodes at once: every node wrote its own `ddpdoctor.node/1` JSON into one folder (under
`srun`, one task per node); this reads them, groups the nodes by digest within each machine
type, and names the odd, failed, slow and silent ones with Slurm host lists. Judges work on
groups and medians, never on pairs of nodes, so 2,000 nodes cost what 2 do."""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpdoctor.errors import UsageError
from ddpdoctor.node import codes
from ddpdoctor.node.hostlist import compress_hostlist
from ddpdoctor.node.report import findings_of
from ddpdoctor.report import schema
from ddpdoctor.report.model import PASS, CheckResult, Finding, Level, overall_status, status_from

SLOW_RATIO = 0.7  # a node below 70 % of its type's median is slow (NCCL's 30 % rule)
METRICS = {  # metric -> (unit, label)
    "gpu_gemm_gflops": ("GFLOP/s", "GPU GEMM (slowest GPU)"),
    "gpu_copy_gbps": ("GB/s", "GPU copy (slowest GPU)"),
    "cpu_gemm_gflops": ("GFLOP/s", "CPU GEMM"),
    "cpu_copy_gbps": ("GB/s", "CPU copy"),
}


@dataclass
class ClusterView:
    docs: dict[str, dict[str, Any]]
    rows: list[CheckResult]
    exclude: list[str]
    unreadable: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return overall_status([r.status for r in self.rows])


def read_dir(path: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Node documents by node name, and the files that are not one (named, not fatal)."""
    folder = Path(path)
    if not folder.is_dir():
        raise UsageError(f"--collect {path}: not a folder")
    docs: dict[str, dict[str, Any]] = {}
    bad: list[str] = []
    for f in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            bad.append(f.name)
            continue
        if (
            not isinstance(doc, dict)
            or doc.get("schema") != schema.tag("node")
            or doc.get("kind") != "node"
            or not all(k in doc for k in ("node", "digest", "digest_fields", "rows"))
        ):
            bad.append(f.name)
            continue
        docs[str(doc["node"])] = doc
    if not docs and not bad:
        raise UsageError(f"--collect {path}: no node reports (*.json) in it")
    return docs, bad


def _by_machine(docs: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Nodes by machine type ('-' when no --expect type matched): nodes are compared only
    with nodes of their own type."""
    by_type: dict[str, list[str]] = defaultdict(list)
    for node, doc in docs.items():
        by_type[doc.get("machine") or "-"].append(node)
    return by_type


def _value(key: str, value: Any) -> str:
    """Byte counts as people read them; -1 is how the facts spell 'unlimited'."""
    if key in ("memlock", "shm_bytes") and isinstance(value, int):
        if value == -1:
            return "unlimited"
        return f"{value / 2**30:g} GiB" if value >= 2**30 else f"{value / 2**10:g} KiB"
    return str(value)


def _describe(fields: dict[str, Any], keys: list[str]) -> str:
    return ", ".join(f"{k} {_value(k, fields.get(k))}" for k in keys)


def _digest_row(docs: dict[str, dict[str, Any]]) -> tuple[CheckResult, set[str]]:
    by_type = _by_machine(docs)
    found: list[Finding] = []
    odd: set[str] = set()
    groups_text = []
    for machine, nodes in sorted(by_type.items()):
        groups: dict[str, list[str]] = defaultdict(list)
        for n in nodes:
            groups[docs[n]["digest"]].append(n)
        ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        major_digest, major = ranked[0]
        major_fields = docs[major[0]]["digest_fields"]
        label = "" if machine == "-" else f"{machine}: "
        groups_text.append(label + " | ".join(compress_hostlist(h) for _d, h in ranked))
        for _digest, hosts in ranked[1:]:
            fields = docs[hosts[0]]["digest_fields"]
            keys = [
                k
                for k in sorted(set(fields) | set(major_fields))
                if fields.get(k) != major_fields.get(k)
            ]
            odd.update(hosts)
            found.append(
                codes.NODE_DIFFERS.finding(
                    f"{compress_hostlist(hosts)}: {_describe(fields, keys)}; the other "
                    f"{len(major)} ({compress_hostlist(major)}) have {_describe(major_fields, keys)}",
                    hosts=sorted(hosts),
                    differs=keys,
                )
            )
    summary = (
        f"{len(docs)} nodes in {sum(len({docs[n]['digest'] for n in ns}) for ns in by_type.values())} group(s): "
        + "; ".join(groups_text)
    )
    return CheckResult(
        "digest", "Nodes grouped by their facts", status_from(found), summary, found
    ), odd


def _failed_row(docs: dict[str, dict[str, Any]]) -> tuple[CheckResult, set[str]]:
    hosts_by_code: dict[str, set[str]] = defaultdict(set)
    example: dict[str, str] = {}
    failed: set[str] = set()
    warned: Counter[str] = Counter()
    for node, doc in docs.items():
        for f in findings_of(doc):
            if f.level >= Level.FAIL:
                hosts_by_code[f.code].add(node)
                example.setdefault(f.code, f.message)
                failed.add(node)
            elif f.level >= Level.WARN:
                warned[f.code] += 1
    found = [
        codes.NODE_FAILED.finding(
            f"{compress_hostlist(hosts)}: {code} (e.g. {example[code]})",
            hosts=sorted(hosts),
            failed_code=code,
        )
        for code, hosts in sorted(hosts_by_code.items())
    ]
    summary = (
        f"{len(failed)} of {len(docs)} nodes failed their own checks"
        if failed
        else f"all {len(docs)} nodes passed their own checks"
    )
    if warned:
        summary += "; warnings: " + ", ".join(f"{c} on {n}" for c, n in sorted(warned.items()))
    return CheckResult(
        "node_checks", "Each node's own checks", status_from(found), summary, found
    ), failed


def metrics(doc: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    perf = doc.get("facts", {}).get("perf") or []
    gpus = [r for r in perf if r["device"] != "cpu" and not r.get("error")]
    cpu = [r for r in perf if r["device"] == "cpu" and not r.get("error")]
    if gpus and all(r.get("gemm_gflops") for r in gpus):
        out["gpu_gemm_gflops"] = min(r["gemm_gflops"] for r in gpus)
    if gpus and all(r.get("copy_gbps") for r in gpus):
        out["gpu_copy_gbps"] = min(r["copy_gbps"] for r in gpus)
    if cpu and cpu[0].get("gemm_gflops"):
        out["cpu_gemm_gflops"] = cpu[0]["gemm_gflops"]
    if cpu and cpu[0].get("copy_gbps"):
        out["cpu_copy_gbps"] = cpu[0]["copy_gbps"]
    return out


def _speed_row(docs: dict[str, dict[str, Any]]) -> tuple[CheckResult, set[str]]:
    by_type = _by_machine(docs)
    found: list[Finding] = []
    slow: set[str] = set()
    parts = []
    for _machine, nodes in sorted(by_type.items()):
        values = {n: metrics(docs[n]) for n in nodes}
        for metric, (unit, label) in METRICS.items():
            have = {n: v[metric] for n, v in values.items() if metric in v}
            if len(have) < 3:  # a median of two says nothing about which one is sick
                continue
            median = statistics.median(have.values())
            parts.append(f"{label} median {median:g} {unit} over {len(have)} nodes")
            low = sorted(n for n, v in have.items() if v < SLOW_RATIO * median)
            slow.update(low)
            for n in low:
                found.append(
                    codes.NODE_SLOW.finding(
                        f"{n}: {label} {have[n]:g} {unit}, {have[n] / median:.2f} of the median {median:g}",
                        hosts=[n],
                        metric=metric,
                        ratio=round(have[n] / median, 3),
                    )
                )
    summary = (
        "; ".join(parts) or "fewer than 3 nodes measured per machine type: no median to compare"
    )
    status = status_from(found) if parts else "skip"
    return CheckResult("speed", "Speed across nodes", status, summary, found), slow


def judge(
    docs: dict[str, dict[str, Any]], expected: list[str], unreadable: list[str]
) -> ClusterView:
    """The cluster's rows, and the nodes to exclude (odd, failed, slow or silent)."""
    missing = sorted(set(expected) - set(docs))
    found = (
        [codes.NODE_MISSING.finding(f"{compress_hostlist(missing)}: no report", hosts=missing)]
        if missing
        else []
    )
    if unreadable:
        found.append(
            codes.NODE_MISSING.finding(
                f"not node reports: {', '.join(unreadable)}", level=Level.WARN, files=unreadable
            )
        )
    wanted = f" of {len(set(expected) | set(docs))}" if expected else ""
    reports = CheckResult(
        "reports",
        "Reports",
        status_from(found) if found else PASS,
        f"{len(docs)}{wanted} nodes wrote a report",
        found,
    )
    digest_row, odd = (
        _digest_row(docs)
        if docs
        else (CheckResult("digest", "Nodes grouped by their facts", "skip", "no report"), set())
    )
    failed_row, failed = _failed_row(docs)
    speed_row, slow = _speed_row(docs)
    exclude = sorted(odd | failed | slow | set(missing))
    return ClusterView(
        docs, [reports, digest_row, failed_row, speed_row], exclude, unreadable, expected
    )


def cluster_doc(view: ClusterView, folder: str) -> dict[str, Any]:
    return {
        "schema": schema.tag("node"),
        "kind": "collect",
        "folder": folder,
        "status": view.status,
        "nodes": sorted(view.docs),
        "expected": view.expected,
        "groups": _groups(view.docs),
        "rows": [
            {
                "id": r.id,
                "title": r.title,
                "status": r.status,
                "summary": r.summary,
                "findings": [f.to_json() for f in r.findings],
            }
            for r in view.rows
        ],
        "exclude": compress_hostlist(view.exclude),
    }


def _groups(docs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node, doc in docs.items():
        groups[(doc.get("machine") or "-", doc["digest"])].append(node)
    return [
        {
            "machine": None if machine == "-" else machine,
            "digest": digest,
            "hosts": compress_hostlist(hosts),
            "count": len(hosts),
            "fields": docs[hosts[0]]["digest_fields"],
        }
        for (machine, digest), hosts in sorted(groups.items(), key=lambda kv: -len(kv[1]))
    ]


def write_exclude(path: str, hosts: list[str]) -> None:
    """The form `srun --exclude` takes, as a file: one host list on one line (empty when all
    nodes are good, so `srun --exclude=$(cat FILE)` still works)."""
    Path(path).write_text((compress_hostlist(hosts) + "\n") if hosts else "", encoding="utf-8")
