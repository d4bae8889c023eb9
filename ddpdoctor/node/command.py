"""`ddpdoctor node`: NodeArgs → run → exit code (the CLI parses the options), and the two
things it runs: one node's check, or `--collect DIR` over the reports many nodes wrote.

Imported at every CLI start: everything heavy (rich, torch, pynvml) is imported inside."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ddpdoctor.errors import EXIT_OK, EXIT_PROBLEMS, UsageError


@dataclass(frozen=True)
class NodeArgs:
    timeout: float = 30.0
    expect: str | None = None
    save_baseline: str | None = None
    json_path: str | None = None
    out_dir: str | None = None
    collect: str | None = None
    hosts: str | None = None
    exclude_file: str | None = None
    node_name: str | None = None
    perf: bool = True
    rdma_interval: float = 2.0
    fail_on: str = "fail"
    ascii_only: bool = False
    verbose: bool = False


def _validate(a: NodeArgs) -> None:
    from ddpdoctor.report import schema

    if not 0 < a.timeout < float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, not {a.timeout:g}")
    if not 0 <= a.rdma_interval < float("inf"):
        raise UsageError("--rdma-interval must be >= 0 seconds")
    if a.fail_on not in ("warn", "fail"):
        raise UsageError(f"--fail-on must be warn or fail, not {a.fail_on!r}")
    if a.collect and (a.expect or a.save_baseline or a.out_dir):
        raise UsageError(
            "--collect reads the nodes' reports: --expect, --save-baseline and --out belong to the runs on the nodes"
        )
    if a.hosts and not a.collect:
        raise UsageError("--hosts names the nodes that should have reported: use it with --collect")
    if a.out_dir is not None and not Path(a.out_dir).is_dir():
        raise UsageError(
            f"--out {a.out_dir}: not a folder (create it on the shared file system first)"
        )
    for path in (a.json_path, a.save_baseline, a.exclude_file):
        schema.check_writable(path)


def _slurm_one_task_per_node(env: Mapping[str, str]) -> None:
    tasks, nodes = env.get("SLURM_NTASKS"), env.get("SLURM_NNODES")
    if tasks and nodes and tasks.isdigit() and nodes.isdigit() and int(tasks) > int(nodes):
        raise UsageError(
            f"srun started {tasks} tasks on {nodes} nodes: run one per node "
            "(srun --ntasks-per-node=1 ddpdoctor node --out DIR)"
        )


def _exit_code(status: str, fail_on: str) -> int:
    bad = ("fail",) if fail_on == "fail" else ("fail", "warn")
    return EXIT_PROBLEMS if status in bad else EXIT_OK


def run_node(a: NodeArgs) -> int:
    """Check this node; write its report; return the exit code."""
    from ddpdoctor.node import cluster, expect, facts, health, report
    from ddpdoctor.report import schema

    _slurm_one_task_per_node(os.environ)
    started = time.monotonic()
    name = facts.node_name(os.environ, a.node_name)
    if a.expect:  # read it before the work: a typo must cost one second, not thirty
        expect.load(a.expect, name, None)
    opts = facts.GatherOptions(
        timeout_s=a.timeout, rdma_interval_s=a.rdma_interval, run_perf=a.perf, node_name=a.node_name
    )
    node = facts.gather(opts)
    gpu_model = node.gpus.devices[0].name if node.gpus.devices else None
    wanted = expect.load(a.expect, node.node, gpu_model) if a.expect else expect.Expectations()
    rows = health.judge(node, wanted)
    status = health.node_status(rows)
    seconds = round(time.monotonic() - started, 2)  # once: the text and the JSON must agree
    doc = report.node_doc(node, rows, status, wanted, seconds)
    if a.out_dir:
        schema.write(doc, str(Path(a.out_dir) / f"{node.node}.json"))
    if a.json_path:
        schema.write(doc, a.json_path)
    if a.save_baseline:
        _save_baseline(a.save_baseline, report.baseline_values(node), node.node, status)
    if a.exclude_file:
        cluster.write_exclude(a.exclude_file, [node.node] if status == "fail" else [])
    if a.json_path == "-":
        return _exit_code(status, a.fail_on)
    if a.out_dir and not a.verbose:  # under srun: one line per node, not N interleaved reports
        fails = sum(1 for r in rows for f in r.findings if f.level.word == "fail")
        print(
            f"{node.node}: {status} ({fails} failures) → {Path(a.out_dir) / (node.node + '.json')}"
        )
        return _exit_code(status, a.fail_on)
    from ddpdoctor.node import render

    details = None
    if a.verbose:
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in node.seconds.items())
        details = [f"digest {doc['digest']} · parts: {parts}"]
    render.node(node.node, wanted.machine, rows, status, seconds, a.ascii_only, details)
    return _exit_code(status, a.fail_on)


def _save_baseline(path: str, values: dict, node: str, status: str) -> None:
    import json

    from ddpdoctor.node import expect, report

    doc = expect.baseline(values)
    header = f"ddpdoctor node baseline from {node} ({time.strftime('%Y-%m-%d')}); use with --expect"
    if path.endswith(".toml"):
        Path(path).write_text(report.toml_text(doc, header), encoding="utf-8")
    else:
        Path(path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    if status == "fail":
        print(
            f"ddpdoctor: warning: {node} failed its checks; the baseline records a sick node",
            file=sys.stderr,
        )


def run_collect(a: NodeArgs, folder: str) -> int:
    """Read every node's report from a folder; group, name the odd ones, write the exclude list."""
    from ddpdoctor.node import cluster, hostlist, render
    from ddpdoctor.report import schema

    expected_text = a.hosts or os.environ.get("SLURM_JOB_NODELIST")
    expected = hostlist.expand_hostlist(expected_text) if expected_text else []
    docs, unreadable = cluster.read_dir(folder)
    view = cluster.judge(docs, expected, unreadable)
    doc = cluster.cluster_doc(view, folder)
    if a.exclude_file:
        cluster.write_exclude(a.exclude_file, view.exclude)
    if a.json_path:
        schema.write(doc, a.json_path)
        if a.json_path == "-":
            return _exit_code(view.status, a.fail_on)
    render.cluster(folder, view.rows, view.status, doc["exclude"], a.exclude_file, a.ascii_only)
    return _exit_code(view.status, a.fail_on)


def run(args: NodeArgs) -> int:
    _validate(args)
    return run_collect(args, args.collect) if args.collect else run_node(args)
