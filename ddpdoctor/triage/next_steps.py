"""What to run next for each root cause: the ddpdoctor command that confirms it, and the
variables that make the next log say more. One table, so text and JSON print the same advice."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NextSteps:
    run: tuple[str, ...]  # commands, most telling first
    set: tuple[str, ...]  # VARIABLE=value — what it shows


_NCCL_INFO = "NCCL_DEBUG=INFO — NCCL's transport, interface and version choices"
_NCCL_NET = "NCCL_DEBUG_SUBSYS=INIT,NET — only the init and network lines"
_DETAIL = "TORCH_DISTRIBUTED_DEBUG=DETAIL — collective fingerprints per rank (slow; debugging only)"
_FLIGHT = (
    "TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=/tmp/fr/rank_ "
    "— the flight recorder: every rank's last collectives when one times out; then "
    "`ddpdoctor explain /tmp/fr` names the rank that never joined"
)

NEXT_STEPS: dict[str, NextSteps] = {
    "PG_NOT_INITIALIZED": NextSteps(
        ("ddpdoctor lint train.py", "ddpdoctor check --only process_group"),
        (),
    ),
    "LAUNCH_ENV": NextSteps(
        ("ddpdoctor check --only env", "ddpdoctor lint train.py"),
        (
            "start the script with torchrun --nproc-per-node N (it sets RANK, LOCAL_RANK, WORLD_SIZE)",
        ),
    ),
    "PORT_IN_USE": NextSteps(
        ("ddpdoctor check --only process_group --master-port PORT", "ss -ltnp | grep PORT"),
        ("MASTER_PORT=<a free port> — one per job on a node",),
    ),
    "DEVICE_MAPPING": NextSteps(
        ("ddpdoctor check --only rank_device", "ddpdoctor lint train.py", "nvidia-smi"),
        ("CUDA_VISIBLE_DEVICES — as many GPUs as --nproc-per-node",),
    ),
    "COLLECTIVE_TIMEOUT": NextSteps(
        (
            "ddpdoctor run -- train.py (each rank's stack and flight recorder at the hang)",
            "ddpdoctor check --only allreduce",
            "ddpdoctor check --only process_group",
        ),
        (_FLIGHT, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 — fail fast instead of hanging", _NCCL_INFO),
    ),
    "NCCL_NETWORK": NextSteps(
        ("ddpdoctor check --only allreduce", "ddpdoctor env (on every node)", "nvidia-smi topo -m"),
        (
            _NCCL_INFO,
            _NCCL_NET,
            "NCCL_P2P_DISABLE=1 — if the hang goes away, GPU peer-to-peer is the problem",
            "NCCL_IB_DISABLE=1 — if the error goes away, the InfiniBand/RoCE path is",
        ),
    ),
    "SHM": NextSteps(
        ("ddpdoctor env (the /dev/shm row)", "df -h /dev/shm"),
        ("NCCL_SHM_DISABLE=1 — confirms it (slower), not a fix",),
    ),
    "UNUSED_PARAMETERS": NextSteps(
        ("ddpdoctor lint train.py",),
        ("TORCH_DISTRIBUTED_DEBUG=INFO — names the parameters that got no gradient",),
    ),
    "COLLECTIVE_MISMATCH": NextSteps(
        (
            "ddpdoctor check --only sampler",
            "ddpdoctor check --only allreduce",
            "ddpdoctor lint train.py",
        ),
        (_DETAIL, _FLIGHT),
    ),
    "RENDEZVOUS": NextSteps(
        (
            "ddpdoctor check --only process_group --nnodes N --rdzv-endpoint HOST:PORT (on every node)",
            "nc -zv HOST PORT (from every node)",
        ),
        ("LOGLEVEL=INFO — torchrun prints its rendezvous settings and who joined",),
    ),
    "GRADSCALER": NextSteps(
        ("ddpdoctor check --only gradscaler", "ddpdoctor lint train.py"),
        (),
    ),
    "DATA_SAMPLER": NextSteps(
        ("ddpdoctor check --only sampler", "ddpdoctor lint train.py"),
        (),
    ),
    "VERSION_MISMATCH": NextSteps(
        ("ddpdoctor env (on every node, then compare)", "ddpdoctor check --only env"),
        (_NCCL_INFO + " (the 'NCCL version' and 'NET/Plugin' lines of every node)",),
    ),
    "OOM": NextSteps(
        ("ddpdoctor check --only rank_device", "ddpdoctor lint train.py", "dmesg | grep -i oom"),
        ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True — less fragmentation",),
    ),
}

# What to collect when nothing was recognised (also the stderr advice).
COLLECT = (
    "the full log of every rank (torchrun --tee 3 --log-dir logs/), not only rank 0",
    "NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET for network problems)",
    "TORCH_DISTRIBUTED_DEBUG=DETAIL (collective mismatches; slow, debugging only)",
    "`ddpdoctor env --markdown` from every node, pasted into the ticket",
)
