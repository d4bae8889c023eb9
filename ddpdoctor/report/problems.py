"""The catalog of problems the runtime probes can find: one table, the single source of truth for
codes, readable symbols, why it bites and what to do. Codes are a contract: add new ones, never
renumber or reuse a retired one (pylint's rule). Lint rules (DDL…) live in `ddpdoctor.lint`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ddpdoctor.report.model import Finding, Level


@dataclass(frozen=True)
class Problem:
    code: str
    symbol: str
    level: Level
    title: str
    why: str
    fix: str

    def finding(
        self,
        message: str,
        ranks: list[int] | tuple[int, ...] = (),
        *,
        level: Level | None = None,
        hint: str | None = None,
        host: str | None = None,
        **data: Any,
    ) -> Finding:
        return Finding(
            code=self.code,
            level=self.level if level is None else level,
            message=message,
            hint=self.fix if hint is None else hint,
            ranks=sorted(ranks),
            host=host,
            data=data,
            symbol=self.symbol,
        )


_W, _F, _I = Level.WARN, Level.FAIL, Level.INFO


# env
ENV_MISSING = Problem(
    "DDP101",
    "env-missing",
    _F,
    "Distributed variables missing",
    "init_process_group(init_method='env://') needs MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE; "
    "without them it fails with 'Default process group is not initialized' further on.",
    "Start the job with torchrun (torchrun --nproc-per-node=N train.py); do not export these by hand.",
)
WORLD_SIZE_MISMATCH = Problem(
    "DDP102",
    "world-size-mismatch",
    _F,
    "Ranks disagree on WORLD_SIZE",
    "Each rank waits for WORLD_SIZE peers; disagreeing ranks hang at init or collectives.",
    "Launch every node with the same --nnodes and --nproc-per-node; do not override WORLD_SIZE.",
)
RANK_DUPLICATE = Problem(
    "DDP103",
    "rank-duplicate",
    _F,
    "RANK values are not unique 0..WORLD_SIZE-1",
    "Two processes with one RANK collide in the store; a gap means a rank never arrives.",
    "Let torchrun assign RANK; with several nodes give each a distinct --node-rank.",
)
MASTER_MISMATCH = Problem(
    "DDP104",
    "master-mismatch",
    _F,
    "Ranks disagree on MASTER_ADDR/MASTER_PORT",
    "Ranks pointed at different stores form different groups and wait for each other forever.",
    "Pass the same --master-addr/--master-port (or --rdzv-endpoint) to every node.",
)
SOCKET_IFNAME_MISSING = Problem(
    "DDP105",
    "socket-ifname-missing",
    _F,
    "A *_SOCKET_IFNAME names no interface on this host",
    "gloo/NCCL bind to the named interface; if it does not exist init fails or hangs.",
    "Unset GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME, or name an interface from `ip -br link`.",
)
RISKY_SETTING = Problem(
    "DDP106",
    "risky-setting",
    _W,
    "A setting that slows or destabilises collectives",
    "Variables such as NCCL_P2P_DISABLE or NCCL_IB_DISABLE force slower paths, often left over from debugging.",
    "Unset it unless you know this cluster needs it.",
)
VERSION_MISMATCH = Problem(
    "DDP107",
    "version-mismatch",
    _F,
    "Software versions differ across ranks",
    "Mixed torch/NCCL/Python versions can disagree on wire formats and hang or crash in collectives.",
    "Install the same environment on every node (same image or lock file).",
)
RUN_CROSS_TALK = Problem(
    "DDP108",
    "run-cross-talk",
    _F,
    "A rank from another job joined this one",
    "Two jobs on one master port can share a store: init 'succeeds' and a later collective times out.",
    "Give each job its own --master-port (or --rdzv-id); ddpdoctor picks a free port when none is given.",
)
ENV_INCONSISTENT = Problem(
    "DDP109",
    "env-inconsistent",
    _W,
    "A distributed setting differs across ranks",
    "NCCL_*/GLOO_*/TORCH_* settings that differ between ranks make ranks take different code paths.",
    "Export the same settings on every node.",
)
DEBUG_DETAIL = Problem(
    "DDP110",
    "debug-detail",
    _W,
    "TORCH_DISTRIBUTED_DEBUG=DETAIL is set",
    "DETAIL checks every collective (slow) and with torch 2.13 on CPU it can crash DDP's logger.",
    "Use it only while debugging a mismatch; unset it for training runs.",
)
MTU_MISMATCH = Problem(
    "DDP111",
    "mtu-mismatch",
    _F,
    "The network MTU differs across nodes",
    "Jumbo frames on some nodes only: large packets are dropped or fragmented, collectives stall or crawl.",
    "Set the same MTU on the traffic interface of every node (ip link set dev IF mtu N) and on the switch.",
)

# process group
PG_INIT_FAILED = Problem(
    "DDP201",
    "pg-init-failed",
    _F,
    "init_process_group failed",
    "Without a process group DDP raises 'Default process group is not initialized'.",
    "Check MASTER_ADDR is reachable from every node, the port is free, and the backend is available.",
)
BARRIER_SLOW = Problem(
    "DDP203",
    "barrier-slow",
    _W,
    "Barrier latency is high",
    "A barrier on a healthy node takes well under 10 ms; more points at an overloaded host or slow network.",
    "Check CPU load on the hosts and the network path between them.",
)

# rank / device
SHARED_GPU = Problem(
    "DDP301",
    "shared-gpu",
    _F,
    "Two ranks use the same GPU",
    "Ranks on one GPU fight for memory and serialize; NCCL errors out or hangs on duplicate GPUs.",
    "Call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before any CUDA work, and do not restrict "
    "CUDA_VISIBLE_DEVICES to one GPU per node.",
)
LOCAL_RANK_DEVICE_MISMATCH = Problem(
    "DDP302",
    "local-rank-device-mismatch",
    _W,
    "LOCAL_RANK does not match the current device",
    "DDP(device_ids=[local_rank]) then computes on a different GPU than the rank's data.",
    "torch.cuda.set_device(local_rank) first, then model.to(local_rank) and DDP(model, device_ids=[local_rank]).",
)
MORE_RANKS_THAN_GPUS = Problem(
    "DDP303",
    "more-ranks-than-gpus",
    _F,
    "More ranks per node than visible GPUs",
    "Surplus ranks get 'invalid device ordinal' or share a GPU.",
    "Use --nproc-per-node equal to the number of GPUs (ddpdoctor's default).",
)
CPU_OVERSUBSCRIBED = Problem(
    "DDP304",
    "cpu-oversubscribed",
    _W,
    "More compute threads than CPU cores",
    "Every rank runs intra-op threads; together they exceed the cores and thrash.",
    "Set OMP_NUM_THREADS to cores / ranks per node (torchrun sets 1 unless you override it).",
)
CPU_AFFINITY_OVERLAP = Problem(
    "DDP305",
    "cpu-affinity-overlap",
    _I,
    "Ranks share CPU cores",
    "Ranks pinned to the same cores compete for them.",
    "Bind each rank to its own cores (numactl, taskset or torchrun --numa-binding).",
)
GPU_UNHEALTHY = Problem(
    "DDP306",
    "gpu-unhealthy",
    _W,
    "A GPU reports a problem",
    "NVML reports errors, throttling or a degraded link on this GPU.",
    "Run `nvidia-smi -q` and `dcgmi diag -r 1` on that host; drain the node if it persists.",
)

# all_reduce
ALLREDUCE_WRONG = Problem(
    "DDP401",
    "allreduce-wrong",
    _F,
    "all_reduce returned wrong values",
    "A collective that returns wrong numbers silently corrupts gradients.",
    "Run `ddpdoctor bench-allreduce` on the affected hosts; suspect the NIC/GPU or NCCL version.",
)
ALLREDUCE_SLOW = Problem(
    "DDP402",
    "allreduce-slow",
    _W,
    "all_reduce bandwidth is below the expected floor",
    "Gradient synchronisation time grows with 1/busbw; a slow link makes every step slow.",
    "Compare with `ddpdoctor bench-allreduce`; check NCCL_SOCKET_IFNAME/IB settings and the link speed.",
)
COLLECTIVE_TIMEOUT = Problem(
    "DDP403",
    "collective-timeout",
    _F,
    "A collective did not complete before the deadline",
    "One rank is stuck, dead or unreachable; the others wait until the timeout.",
    "Look at the rank named as hung/crashed; rerun with NCCL_DEBUG=INFO for the transport.",
)
PEER_LOST = Problem(
    "DDP405",
    "peer-lost",
    _F,
    "A rank lost the connection to a peer",
    "A collective failed because a peer went away mid-operation; this is a consequence, not the cause.",
    "Look at the rank reported as crashed, hung or missing: it is the root cause.",
)
SLOW_NODE = Problem(
    "DDP406",
    "slow-node",
    _F,
    "A node is slow to its peers",
    "Most pairs that include this node run well below the others: its NIC, cable, switch port or "
    "settings (MTU, interface, IB disabled) hold back every collective it joins.",
    "Inspect that node's link (ethtool/ibstat, MTU, NCCL_SOCKET_IFNAME, NCCL_IB_*) or drain it.",
)
SLOW_LINK = Problem(
    "DDP407",
    "slow-link",
    _F,
    "One link between two nodes is slow",
    "Both nodes are fine with other peers; the path between them is not (a cable, a switch hop, routing).",
    "Check the route and switch ports between these two nodes.",
)

# sampler
SHARD_OVERLAP = Problem(
    "DDP501",
    "shard-overlap",
    _F,
    "Ranks' sampler shards overlap",
    "Ranks train on the same samples: the effective data set shrinks and the loss stalls.",
    "Use DataLoader(ds, sampler=DistributedSampler(ds)) with the real world size and rank.",
)
SHARD_INCOMPLETE = Problem(
    "DDP502",
    "shard-incomplete",
    _F,
    "Sampler shards do not cover the data set",
    "Some samples are never trained on.",
    "Build DistributedSampler with num_replicas=world_size and a distinct rank on every rank.",
)
SET_EPOCH_NO_EFFECT = Problem(
    "DDP503",
    "set-epoch-no-effect",
    _F,
    "set_epoch did not change the shuffle order",
    "Without a new order per epoch every epoch repeats the same batches on every rank.",
    "Call sampler.set_epoch(epoch) at the start of every epoch.",
)
PERMUTATION_DISAGREES = Problem(
    "DDP504",
    "permutation-disagrees",
    _F,
    "Ranks disagree on the shuffle permutation",
    "Shards are disjoint only if all ranks shuffle with the same seed and epoch.",
    "Pass the same seed to DistributedSampler on every rank (the default 0 is fine).",
)

# GradScaler
SCALE_DIVERGED = Problem(
    "DDP601",
    "scale-diverged",
    _F,
    "GradScaler scale differs across ranks",
    "Diverging scales mean ranks skip different steps: parameters drift apart and losses become NaN.",
    "Create one GradScaler per process and call scaler.scale(loss).backward(), scaler.step(opt), "
    "scaler.update() in that order, on every rank, every step.",
)
INF_STEP_NOT_SKIPPED = Problem(
    "DDP602",
    "inf-step-not-skipped",
    _F,
    "A step with inf gradients was not skipped everywhere",
    "If one rank steps on inf gradients while others skip, parameters diverge.",
    "Let DDP synchronise gradients before scaler.step(); do not unscale or clip per rank differently.",
)
PARAMS_DIVERGED = Problem(
    "DDP603",
    "params-diverged",
    _F,
    "Parameters differ across ranks after training steps",
    "DDP keeps replicas identical only if every rank takes the same steps.",
    "Wrap the model in DDP after moving it to its device, and do not step optimizers conditionally per rank.",
)
AMP_UNSUPPORTED = Problem(
    "DDP604",
    "amp-unsupported",
    _I,
    "Mixed precision is not available here",
    "This torch build has no GradScaler/autocast for this device.",
    "Nothing to do unless you train with AMP on this device.",
)

# the flight recorder: collectives as every rank recorded them (ddpdoctor/flight/)
FR_NEVER_JOINED = Problem(
    "DDP701",
    "fr-never-joined",
    _F,
    "A rank never joined a collective the others wait in",
    "Its flight recorder stops before the collective number the other ranks are blocked in: it "
    "skipped that collective (a branch, an uneven batch count, an early exit) or is stuck before it.",
    "Make every rank call the same collectives in the same order: look at that rank's line and "
    "the branch that took it elsewhere (DistributedSampler(drop_last=True) for uneven batches).",
)
FR_COLLECTIVE_MISMATCH = Problem(
    "DDP702",
    "fr-collective-mismatch",
    _F,
    "Ranks called different collectives at one sequence number",
    "Collective #N must be the same op on the same shapes and dtypes on every rank; otherwise "
    "NCCL hangs or corrupts data and gloo may silently mix the values.",
    "Call the same collective with the same tensor shape and dtype on every rank; move rank-"
    "dependent collectives out of the shared sequence.",
)
FR_STUCK_IN_COLLECTIVE = Problem(
    "DDP703",
    "fr-stuck-in-collective",
    _F,
    "Ranks wait in a collective that never completes",
    "The ranks that recorded it wait for a peer that gave no dump (stopped, dead, or blocked "
    "outside Python) or for a transport that stalled.",
    "Look at the ranks without a dump first (pystack remote PID); then the link (NCCL_DEBUG=INFO).",
)
FR_IN_STEP = Problem(
    "DDP704",
    "fr-in-step",
    _I,
    "The flight recorder shows every rank in step",
    "Every rank completed the same collectives: the problem is not a collective out of order.",
    "Nothing to do about collectives; read the other findings.",
)
FR_NO_DUMP = Problem(
    "DDP705",
    "fr-no-dump",
    _I,
    "A rank left no flight-recorder dump",
    "A stopped or dead rank cannot write its dump; the analysis names what the other ranks saw.",
    "Look at that rank's state and stack; set TORCH_FR_BUFFER_SIZE in jobs that ddpdoctor does not launch.",
)
RAS_MISSING_RANKS = Problem(
    "DDP706",
    "ras-missing-ranks",
    _F,
    "NCCL RAS names ranks it has no data from",
    "RAS could not reach those ranks' processes: they died, hang outside NCCL, or their node is gone.",
    "Look at the named process on the named node first (pystack remote PID, dmesg, its log).",
)
RAS_COUNT_MISMATCH = Problem(
    "DDP707",
    "ras-count-mismatch",
    _F,
    "NCCL RAS: ranks launched different numbers of one collective",
    "The ranks with the lower count never called the next collective: they are the stragglers.",
    "Find where the ranks with the lower count are (their stacks); they skipped or are stuck before it.",
)

# runtime / launch
RANK_CRASHED = Problem(
    "DDP901",
    "rank-crashed",
    _F,
    "A rank crashed",
    "A worker process ended before finishing; the others lose their peer.",
    "Read that rank's log; the first rank to fail is the root cause.",
)
RANK_HUNG = Problem(
    "DDP902",
    "rank-hung",
    _F,
    "A rank stopped responding",
    "A stuck rank blocks every collective; the others wait until their timeout.",
    "See where it is (its stack: -v; a stopped rank needs pystack), and what blocks it there.",
)
RANK_MISSING = Problem(
    "DDP903",
    "rank-missing",
    _F,
    "A rank never started its checks",
    "A rank that never reaches init_process_group blocks every other rank.",
    "Check that rank's host: it may be stopped, out of memory, or unable to import torch.",
)
CHECK_CRASHED = Problem(
    "DDP904",
    "check-crashed",
    _F,
    "A check raised an exception",
    "ddpdoctor could not finish this check on that rank.",
    "Rerun with -v; report it at the ddpdoctor tracker with the JSON report if it is a bug.",
)
PORT_IN_USE = Problem(
    "DDP905",
    "port-in-use",
    _F,
    "The master port is already in use",
    "The rendezvous store cannot listen on a busy port (EADDRINUSE), or ranks join another job's store.",
    "Choose a free --master-port, or leave it out and ddpdoctor picks one.",
)
LAUNCH_FAILED = Problem(
    "DDP906",
    "launch-failed",
    _F,
    "torchrun could not start the workers",
    "The launcher itself failed, before any rank ran.",
    "Read the launcher output below; check that torch is installed in this Python.",
)


# Constants of rows no code emits yet (kept so that their code is never reused); a test holds
# every other row to being emitted somewhere.
RESERVED: frozenset[str] = frozenset()

# Every Problem above, by code, in the order of this file (the order `ddpdoctor problems` lists).
PROBLEMS: dict[str, Problem] = {
    v.code: v for v in list(globals().values()) if isinstance(v, Problem)
}
BY_SYMBOL: dict[str, Problem] = {p.symbol: p for p in PROBLEMS.values()}
