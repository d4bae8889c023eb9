"""How the report side scales: synthesize typed run folders of 1,024 to 16,384 ranks (8 per node,
as rank 0's node sees them: its own 8 rank files and rank 0's gathered.json), then time assemble,
render and JSON (the text `--json` writes), with peak memory (tracemalloc) and the report's line
count. Beside them, a plain baseline on the same machine at the same moment: `json.load` of the
same gathered.json bytes (the least any reader of that file does). `x base` is the CPU time of
assemble + render + JSON over the baseline's: on this shared 2-core machine the seconds move
with the other jobs' load, the ratio much less.

Five cases: healthy; one node with another NCCL version; two ranks on one GPU; one rank hung on a
remote node (its pulse stopped); every rank started with RANK=0. The per-rank data has the shape
and size of what the checks really send (GPU fields faked: there is no GPU here).

    python benchmarks/scale_sim.py [--ranks 1024,4096,16384] [--cases ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from ddpdoctor.runfiles import (
    ENTRY_OK,
    ENTRY_TIMEOUT,
    CheckEntry,
    Gathered,
    Heartbeat,
    Identity,
    JobSpec,
    Pulse,
    RankDoc,
    RunFolder,
)

PER_NODE = 8
CHECKS = ["env", "process_group", "rank_device", "allreduce", "sampler", "gradscaler"]
CASES = ["healthy", "nccl_node", "shared_gpu", "hung_rank", "same_rank"]
EXPECTED = {  # the finding each faulty case must name
    "nccl_node": "DDP107",
    "shared_gpu": "DDP301",
    "hung_rank": "DDP902",
    "same_rank": "DDP103",
}
NONCE = "simnonce"


def hung_rank(world: int) -> int:
    """The rank that hangs: on a remote node, in the last quarter."""
    return world * 3 // 4 + 3


def host_of(rank: int) -> str:
    return f"node-{rank // PER_NODE:04d}"


def _snapshot(rank: int, local: int, host: str, nccl: str) -> dict[str, Any]:
    """A node snapshot like envinfo's: mostly per node, a few per-rank fields."""
    nics = [
        {"name": f"ib{i}", "up": True, "mtu": 4092, "speed_mbps": 400000, "ipv4": [f"10.{i}.0.1"]}
        for i in range(4)
    ]
    return {
        "host": {
            "hostname": host,
            "os": "Linux-5.15-x86_64",
            "kernel": "5.15.0",
            "machine": "x86_64",
        },
        "python": {
            "version": "3.11.7",
            "implementation": "CPython",
            "executable": "/usr/bin/python3",
        },
        "torch": {"version": "2.13.0+cu124", "cuda_build": "12.4", "nccl": nccl, "device_count": 8},
        "gpus": {
            "available": True,
            "devices": [
                {"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{host}-{i}"}
                for i in range(PER_NODE)
            ],
        },
        "cpu": {"model": "AMD EPYC 9654", "logical": 192, "load_avg": [1.0 + local / 10, 2.0, 2.5]},
        "memory": {"total_bytes": 2 << 40, "available_bytes": (2 << 40) - rank},
        "network": {
            "interfaces": nics,
            "nccl": {"interfaces": ["ib0"], "why": "NCCL_SOCKET_IFNAME"},
        },
        "launcher": {"launcher": "torchrun", "rank": str(rank), "local_rank": str(local)},
    }


def rank_data(rank: int, world: int, case: str) -> dict[str, dict[str, Any]]:
    """Every check's data for one rank."""
    host, local = host_of(rank), rank % PER_NODE
    node = rank // PER_NODE
    nccl = "2.19.3" if case == "nccl_node" and node == 3 else "2.21.5"
    declared = 0 if case == "same_rank" else rank
    gpu = local
    if case == "shared_gpu" and node == 5 and local == 1:
        gpu = 0
    env_vars = {
        "RANK": str(declared),
        "LOCAL_RANK": str(local),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(PER_NODE),
        "MASTER_ADDR": "node-0000",
        "MASTER_PORT": "29500",
        "NCCL_SOCKET_IFNAME": "ib0",
        "NCCL_IB_HCA": "mlx5",
        "OMP_NUM_THREADS": "8",
        "TORCHELASTIC_RUN_ID": "job42",
        "TORCHELASTIC_ERROR_FILE": f"/tmp/torchelastic_x/job42/attempt_0/{local}/error.json",
    }
    shard = list(range(rank if case != "same_rank" else 0, 1001, world))[:64] or [rank % 1001]
    steps = [
        {"scale": 1024.0, "growth_tracker": 1, "skipped": False, "params": "08a549fc36df"},
        {"scale": 2048.0, "growth_tracker": 0, "skipped": False, "params": "62311f6c1cdc"},
        {"scale": 1024.0, "growth_tracker": 0, "skipped": True, "params": "62311f6c1cdc"},
        {"scale": 1024.0, "growth_tracker": 1, "skipped": False, "params": "2a7d866fe3ef"},
    ]
    return {
        "env": {
            "host": host,
            "pid": 10000 + rank,
            "launched": True,
            "nonce": NONCE,
            "vars": env_vars,
            "versions": {"torch": "2.13.0+cu124", "python": "3.11.7", "cuda": "12.4", "nccl": nccl},
            "interfaces": ["lo", "eth0", "ib0", "ib1", "ib2", "ib3"],
            "guarded": [],
            "net": {"interface": "ib0", "mtu": 4092, "backend": "nccl"},
            "snapshot": _snapshot(rank, local, host, nccl),
        },
        "process_group": {
            "backend": "nccl",
            "world_size": world,
            "rank": rank,
            "init_s": 3.2 + (rank % 97) / 100,
            "barrier_ms": 0.4 + (rank % 13) / 100,
            "device": f"cuda:{gpu}",
        },
        "rank_device": {
            "host": host,
            "local_rank": local,
            "local_world_size": PER_NODE,
            "cuda_visible_devices": None,
            "cpu_count": 192,
            "affinity": list(range(local * 24, local * 24 + 24)),
            "threads": 8,
            "omp_num_threads": "8",
            "device_type": "cuda",
            "device_index": gpu,
            "device_count": PER_NODE,
            "gpu_name": "NVIDIA H100 80GB HBM3",
            "uuid": f"GPU-{host}-{gpu}",
            "pci_bus_id": f"0000:{gpu + 0x18:02x}:00",
        },
        "allreduce": {
            "sizes": [
                {"bytes": b, "count": b // 4, "time_s": 1e-5 + b / 4e11, "wrong": 0}
                for b in (4096, 1 << 20, 4 << 20)
            ]
        },
        "sampler": {
            "dataset_len": 1001,
            "num_replicas": world,
            "shard_len": len(shard),
            "perm_digest": "f9a395f74e9a",
            "perm_digest_epoch1": "e3469ecc49e9",
            "reshuffled": True,
            "repeats_without_set_epoch": True,
            "_epoch0": shard,
        },
        "gradscaler": {
            "supported": True,
            "dtype": "bfloat16",
            "inf_step": 2,
            "inf_rank": 1,
            "steps": steps,
        },
    }


def synthesize(folder: Path, world: int, case: str) -> JobSpec:
    """Write spec.json, rank 0's node's rank files and heartbeats, and rank 0's gathered.json."""
    spec = JobSpec(
        checks=CHECKS,
        timeout=30.0,
        backend="nccl",
        backend_reason="8 GPUs visible",
        nonce=NONCE,
        managed=True,
        nnodes=world // PER_NODE,
        world_size=world,
        master_addr="node-0000",
        master_port=29500,
        node_rank=0,
    )
    run = RunFolder(folder, NONCE)
    run.write_spec(spec)
    gathered = Gathered(nonce=NONCE)
    hung = case == "hung_rank"
    reached = CHECKS[: CHECKS.index("allreduce")] if hung else CHECKS
    now = time.time()
    for rank in range(world):
        data = rank_data(rank, world, case)
        gathered.ranks[rank] = Identity(host_of(rank), 10000 + rank, f"cuda:{rank % PER_NODE}")
        for cid in reached:
            entry = CheckEntry(status=ENTRY_OK, data=data[cid], duration_s=0.5)
            gathered.checks.setdefault(cid, {})[rank] = entry
        if rank < PER_NODE:  # rank 0's own node: rank files and heartbeats
            doc = RankDoc(rank=rank, local_rank=rank, host=host_of(rank), pid=10000 + rank)
            doc.nonce, doc.started_at, doc.device = NONCE, now - 20, f"cuda:{rank}"
            for cid in CHECKS if not hung else [*reached, "allreduce"]:
                doc.checks[cid] = (
                    CheckEntry(status=ENTRY_OK, data=data[cid], duration_s=0.5)
                    if cid in reached
                    else CheckEntry(
                        status=ENTRY_TIMEOUT,
                        error="CollectiveTimeout: all_reduce did not complete within 30 s",
                        phase="all_reduce 4 KiB (timing)",
                    )
                )
            doc.last_check = doc_last = list(doc.checks)[-1]
            doc.finished, doc.finished_at = True, now
            run.write_rank(doc)
            beat = Heartbeat(rank=rank, pid=doc.pid, host=doc.host, nonce=NONCE, check=doc_last)
            beat.phase, beat.t_phase, beat.t_alive, beat.finished = "finished", now, now, True
            run.write_beat(beat)
    if hung:
        stuck = hung_rank(world)
        gathered.liveness = {
            r: Pulse(alive=r != stuck, pulses=40 if r == stuck else 80, phase="allreduce (waiting)")
            for r in range(world)
        }
        gathered.liveness[stuck].phase = "allreduce (all_reduce 4 KiB (timing))"
    run.write_gathered(gathered)
    return spec


def _console(buf: io.StringIO) -> Any:
    from rich.console import Console

    return Console(file=buf, width=120, no_color=True, highlight=False, emoji=False, safe_box=True)


def baseline_s(path: Path, repeat: int = 3) -> float:
    """CPU seconds of a plain json.load of the file (collector paused, as the reader does it)."""
    from ddpdoctor.runfiles import paused_gc

    best = float("inf")
    for _ in range(repeat):
        with paused_gc():
            c0 = time.process_time()
            with open(path, encoding="utf-8") as fh:
                json.load(fh)
            best = min(best, time.process_time() - c0)
    return best


def measure(world: int, case: str) -> dict[str, Any]:
    from ddpdoctor.job import collect
    from ddpdoctor.report import render, schema

    with tempfile.TemporaryDirectory(prefix=f"ddpdoctor-sim-{world}-") as tmp:
        folder = Path(tmp)
        spec = synthesize(folder, world, case)
        gathered_bytes = (folder / "gathered.json").stat().st_size
        base = baseline_s(folder / "gathered.json")
        c0 = time.process_time()
        t0 = time.perf_counter()
        report = collect.assemble(folder, spec)
        t1 = time.perf_counter()
        buf = io.StringIO()
        render.report(report, ascii_only=True, console=_console(buf))
        t2 = time.perf_counter()
        doc = schema.dumps(collect.to_json(report))
        t3 = time.perf_counter()
        cpu = time.process_time() - c0
        del report
        # peak memory in a second pass: tracemalloc slows every allocation, so not while timing
        tracemalloc.start()
        again = collect.assemble(folder, spec)
        render.report(again, ascii_only=True, console=_console(io.StringIO()))
        schema.dumps(collect.to_json(again))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        report = again
    text = buf.getvalue()
    codes = sorted({f.code for f in report.findings()})
    return {
        "ranks": world,
        "case": case,
        "assemble_s": round(t1 - t0, 3),
        "render_s": round(t2 - t1, 3),
        "json_s": round(t3 - t2, 3),
        "cpu_s": round(
            cpu, 3
        ),  # the three together in CPU time: what a loaded machine does not inflate
        "base_s": round(base, 3),
        "x_base": round(cpu / base, 1) if base else None,
        "gathered_mb": round(gathered_bytes / 2**20, 2),
        "peak_mb": round(peak / 2**20, 1),
        "lines": text.count("\n"),
        "json_mb": round(len(doc) / 2**20, 2),
        "codes": codes,
        "expected": EXPECTED.get(case),
        "named": EXPECTED.get(case) in codes if case in EXPECTED else not codes,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1024,4096,16384")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", dest="json_path", default=None)
    ap.add_argument("--show", default=None, help="print the report of one CASE at the first size")
    args = ap.parse_args(argv)
    sizes = [int(n) for n in args.ranks.split(",")]
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown or any(n % PER_NODE or n < 2 * PER_NODE for n in sizes):
        print(f"bad --cases {unknown} or --ranks (multiples of {PER_NODE}, >= 16)", file=sys.stderr)
        return 2
    if args.show:
        from ddpdoctor.job import collect
        from ddpdoctor.report import render

        with tempfile.TemporaryDirectory() as tmp:
            spec = synthesize(Path(tmp), sizes[0], args.show)
            render.report(collect.assemble(Path(tmp), spec), ascii_only=True)
        return 0
    # imports (the check modules, rich's tables) happen once per process whatever N is: paid
    # here on a 16-rank folder, and printed, so that the first case's figures are about scale
    warm = measure(2 * PER_NODE, "healthy")
    print(f"warm-up at {2 * PER_NODE} ranks (imports, once per process): {warm['cpu_s']:.2f} s CPU")
    rows = []
    head = (
        f"{'ranks':>6} {'case':<11} {'assemble':>8} {'render':>7} {'json':>6} {'total':>6}"
        f" {'cpu':>6} {'base':>6} {'x base':>6} {'peak MB':>8} {'lines':>5}  codes"
    )
    print(head)
    for n in sizes:
        for case in cases:
            r = measure(n, case)
            rows.append(r)
            total = r["assemble_s"] + r["render_s"] + r["json_s"]
            mark = "" if r["named"] else "  <- expected " + str(r["expected"] or "no finding")
            print(
                f"{n:>6} {case:<11} {r['assemble_s']:>8.3f} {r['render_s']:>7.3f} {r['json_s']:>6.3f}"
                f" {total:>6.2f} {r['cpu_s']:>6.2f} {r['base_s']:>6.3f} {r['x_base']:>6.1f}"
                f" {r['peak_mb']:>8.1f} {r['lines']:>5}  {','.join(r['codes'])}{mark}",
                flush=True,
            )
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"per_node": PER_NODE, "cases": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
