"""Cluster bring-up options of a multi-node launch, and what a rendezvous that never formed
says. One sick node blocks torchrun's rendezvous for every node; when the rendezvous deadline
(`--rdzv-timeout`) passes with no rank started, each node reads torchrun's own store and names
the nodes that never joined (DDN191), or says that it cannot reach the store itself (DDN195).

The host list (`--hosts`, else the Slurm step's node list) is in node-rank order, as Slurm
numbers its nodes, so a static rendezvous' node ranks map to names that `srun --exclude` takes."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpdoctor.errors import UsageError
from ddpdoctor.node import codes, rendezvous
from ddpdoctor.node.hostlist import compress_hostlist, expand_hostlist
from ddpdoctor.report.model import Finding

STORE_READ_S = 5.0  # how long one read of the rendezvous store may take (a loaded node is slow)
STORE_GRACE_S = 5.0  # the store's host keeps it open this long after its own read, for the others
STATIC_RUN_ID = "none"  # torchrun's default --rdzv-id, which the static path keeps


@dataclass
class Bringup:
    """What a multi-node launch knows about the cluster it should form."""

    hosts: list[str]  # the job's nodes in node-rank order; empty when unknown
    me: str  # this node's name (in `hosts` when they are known)
    rdzv_timeout: float
    exclude_file: str | None = None
    localize: bool = False
    probe_port: int | None = None  # --localize listens and connects here (rendezvous port + 1)
    quiet: bool = False  # only JSON on stdout: no exclude line
    exclude: list[str] = field(default_factory=list)  # filled in after the run


def hosts_from_env(env: Mapping[str, str], nnodes: int) -> list[str]:
    """The Slurm step's nodes (else the job's), when their count is the job's node count."""
    for name in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        if env.get(name):
            try:
                hosts = expand_hostlist(env[name])
            except UsageError:
                return []
            return hosts if len(hosts) == nnodes else []
    return []


def resolve(args: Any, rdzv_port: int | None, env: Mapping[str, str] = os.environ) -> Bringup:
    """Validate the bring-up options against the placement (`args` is the plan's LaunchArgs,
    already completed from Slurm); every mistake is a usage error before anything starts."""
    from ddpdoctor.node.facts import node_name

    if not (args.rdzv_timeout > 0 and math.isfinite(args.rdzv_timeout)):
        raise UsageError(
            f"--rdzv-timeout must be a positive number of seconds, not {args.rdzv_timeout:g}"
        )
    if args.hosts and args.nnodes < 2:
        raise UsageError("--hosts names the nodes of a multi-node job: give --nnodes too")
    hosts = expand_hostlist(args.hosts) if args.hosts else hosts_from_env(env, args.nnodes)
    if args.hosts and len(hosts) != args.nnodes:
        raise UsageError(
            f"--hosts names {len(hosts)} node(s) ({compress_hostlist(hosts)}) and --nnodes is "
            f"{args.nnodes}: give the job's nodes in node-rank order"
        )
    me = node_name(env)
    if hosts and args.node_rank is not None:
        me = hosts[args.node_rank]
    if args.localize:
        if args.nnodes < 2 or not hosts:
            raise UsageError(
                "--localize probes the links between the job's nodes: it needs --nnodes and "
                "the host list (--hosts LIST, or run it under srun)"
            )
        if me not in hosts:
            raise UsageError(
                f"this node ({me}) is not in the host list {compress_hostlist(hosts)}: give "
                "--node-rank, or name the hosts as this node knows itself"
            )
    return Bringup(
        hosts=hosts,
        me=me,
        rdzv_timeout=float(args.rdzv_timeout),
        exclude_file=args.exclude_file,
        localize=bool(args.localize),
        probe_port=rdzv_port + 1 if rdzv_port else None,
        quiet=args.json_path == "-",
    )


def preload_store_client() -> None:
    """Import torch's store client on a side thread while the rendezvous waits, so naming the
    absent nodes at the deadline does not first cost an import of torch (seconds)."""
    import importlib
    import threading

    def load() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module("torch.distributed")

    threading.Thread(target=load, daemon=True, name="ddpdoctor-preload").start()


def _label(b: Bringup, node_rank: int) -> str:
    return b.hosts[node_rank] if b.hosts else f"node rank {node_rank}"


def arrival_findings(spec: Any, b: Bringup) -> list[Finding]:
    """Read torchrun's store while it still waits (`spec` is the LaunchSpec): who never joined.
    Empty when every node joined (the rendezvous was only slow) or nothing can be said."""
    endpoint = spec.rdzv_endpoint
    backend = (spec.rdzv_backend or "c10d") if endpoint else "static"
    if endpoint:
        host, _, port_text = endpoint.rpartition(":")
        port = int(port_text) if port_text.isdigit() else 0
    else:
        host, port = spec.master_addr or "127.0.0.1", spec.master_port or 0
    where = f"{host}:{port}"
    within = f"within {b.rdzv_timeout:g} s (--rdzv-timeout)"
    if backend == "c10d":
        seen = rendezvous.read_store(endpoint, spec.rdzv_id or "ddpdoctor", STORE_READ_S)
        joined = None if seen is None else _as_listed(seen.joined | seen.waiting, b.me)
    else:
        run_id = (spec.rdzv_id or "ddpdoctor") if endpoint else STATIC_RUN_ID
        ranks = rendezvous.read_static_store(host, port, run_id, spec.nnodes, STORE_READ_S)
        joined = None if ranks is None else {_label(b, k) for k in ranks}
        if ranks is not None and not b.hosts:
            absent = [k for k in range(spec.nnodes) if k not in ranks]
            return _unnamed(absent, spec.nnodes, within)
    if joined is None and hosts_store(spec, b.me):
        return []  # our own torchrun has not opened its store yet: "started no worker" says it
    if joined is None:
        return [
            codes.STORE_UNREACHABLE.finding(
                f"{b.me} could not read the rendezvous store at {where} {within}: this node "
                "cannot reach it, its host is down, or torchrun there has not opened it yet",
                host=b.me,
                endpoint=where,
            )
        ]
    if not b.hosts:
        return []  # c10d names hosts, but without the list nobody is known to be missing
    found = rendezvous.findings(b.hosts, rendezvous.Arrivals(joined=joined))
    for f in found:
        f.message = f.message.replace("the rendezvous", f"the rendezvous {within}", 1)
        f.data["exclude"] = f.data["hosts"]
    return found


def hosts_store(spec: Any, me: str) -> bool:
    """Whether this node's torchrun serves the store: node 0 of a static rendezvous, or the
    host of the c10d endpoint (torch's own test: the endpoint names this machine)."""
    import socket

    if not spec.rdzv_endpoint:
        return (spec.node_rank or 0) == 0
    host = spec.rdzv_endpoint.rpartition(":")[0]
    names = {"localhost", "127.0.0.1", "::1", me, socket.gethostname(), socket.getfqdn()}
    return host in names or host.split(".")[0] in names


def _as_listed(joined: set[str], me: str) -> set[str]:
    """torch names a c10d node by its FQDN, which may differ from the name in the host list
    (a VM whose FQDN is 'localhost'): this node's own FQDN stands for this node."""
    import socket

    mine = socket.getfqdn().split(".")[0]
    return {me if h == mine else h for h in joined}


def _unnamed(absent: list[int], nnodes: int, within: str) -> list[Finding]:
    """A static rendezvous without the host list: node ranks are all that is known."""
    if not absent:
        return []
    ranks = ", ".join(map(str, absent))
    return [
        codes.NEVER_JOINED.finding(
            f"node rank {ranks} never joined the rendezvous {within} ({nnodes - len(absent)} of "
            f"{nnodes} nodes arrived; pass --hosts to name them and write --exclude-file)",
            node_ranks=absent,
        )
    ]


def excluded(findings: list[Finding]) -> list[str]:
    """The nodes the bring-up findings say to leave out, in host order of first mention."""
    out: list[str] = []
    for f in findings:
        for host in f.data.get("exclude", []):
            if host not in out:
                out.append(host)
    return out
