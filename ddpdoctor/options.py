"""Command-line options that several commands share, typed once (huggingface_hub's habit) so
every command spells and documents them the same way."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOpt = Annotated[
    str | None,
    typer.Option(
        "--json",
        metavar="PATH",
        help="Write the JSON document to PATH ('-' = only JSON on stdout).",
    ),
]
FailOnOpt = Annotated[
    str, typer.Option("--fail-on", help="warn | fail: lowest level that makes the exit code 1.")
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="More detail: per-rank tables, commands, timings.")
]
DebugOpt = Annotated[
    bool, typer.Option("--debug", help="Show tracebacks of internal errors.", hidden=True)
]
AsciiOpt = Annotated[
    bool, typer.Option("--ascii", help="Plain ASCII marks and no colour (for logs and tickets).")
]
NprocOpt = Annotated[
    int | None,
    typer.Option("--nproc", "-n", help="Ranks per node. Default: visible GPUs, or 2 without GPUs."),
]
BackendOpt = Annotated[
    str,
    typer.Option("--backend", help="auto | nccl | gloo. auto = nccl with GPUs, else gloo."),
]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout",
        help="Deadline in seconds for any one collective (the whole run is bounded by it too).",
    ),
]
MasterPortOpt = Annotated[
    int | None,
    typer.Option("--master-port", help="Rendezvous port. Default: a free port picked for you."),
]
MasterAddrOpt = Annotated[
    str | None,
    typer.Option("--master-addr", help="Address of the node that hosts rank 0 (multi-node)."),
]
NnodesOpt = Annotated[int, typer.Option("--nnodes", help="Number of nodes (multi-node).")]
NodeRankOpt = Annotated[
    int | None, typer.Option("--node-rank", help="This node's rank (multi-node).")
]
RdzvEndpointOpt = Annotated[
    str | None, typer.Option("--rdzv-endpoint", help="host:port of a c10d rendezvous (multi-node).")
]
RdzvIdOpt = Annotated[
    str | None, typer.Option("--rdzv-id", help="Job id for the rendezvous (multi-node).")
]
RdzvBackendOpt = Annotated[
    str | None,
    typer.Option("--rdzv-backend", help="static | c10d (default: c10d with --rdzv-endpoint)."),
]
RunDirOpt = Annotated[
    str | None,
    typer.Option("--run-dir", help="Keep rank files and logs here (default: a temporary folder)."),
]
HostsOpt = Annotated[
    str | None,
    typer.Option(
        "--hosts",
        metavar="LIST",
        help="The job's nodes in node-rank order, a Slurm host list (default: the srun step's).",
    ),
]
RdzvTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--rdzv-timeout",
        help="Seconds every node may take to join (multi-node); then the absent ones are named.",
    ),
]
ExcludeFileOpt = Annotated[
    str | None,
    typer.Option(
        "--exclude-file",
        metavar="PATH",
        help="Write the nodes to leave out as a host list for srun --exclude (empty if none).",
    ),
]
LocalizeOpt = Annotated[
    bool,
    typer.Option(
        "--localize",
        help="After a multi-node run, probe every pair of nodes and name the bad node or link.",
    ),
]
