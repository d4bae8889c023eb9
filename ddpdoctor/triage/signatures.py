"""The signature table behind `ddpdoctor explain`: what a known DDP failure looks like in a log.

One ordered table, most specific first. Table order is the tie-break when two signatures match
the same log at the same line, so a precise message (DDP's reducer naming unused parameters)
outranks a generic one (a watchdog timeout that merely follows it).

Each signature has:
- `code`: stable `DDX…` id (a contract: never renumber or reuse one),
- `root_cause`: one of `ROOT_CAUSES` (the JSON contract),
- `patterns`: case-insensitive regexes, written against the message texts in the torch, NCCL
  and gloo sources across versions (`\\s+` between words so wrapped lines joined with a space
  still match; optional words where releases reworded a message),
- `keywords`: lowercase literals, one of which every matching line contains. Their union is the
  prefilter that decides cheaply whether a line needs the full pass (and what `grep -E` gets in
  the benchmark),
- `tier`: CAUSE (names what went wrong) or SYMPTOM (a consequence of a failure elsewhere, such
  as a timeout or a peer that went away); symptoms rank after causes,
- `min_count`: how many separate lines must match before it counts (tables, not messages).

Symptoms described in words (tickets without a traceback) are prose signatures, scored
phrases instead of patterns: ddpdoctor/triage/prose.py. Real example lines for every signature
live in tests/triage/test_signatures.py and tests/fixtures/triage/ (corpus/ holds 128 public
reports with their confirmed causes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ROOT_CAUSES = (
    "PG_NOT_INITIALIZED",
    "LAUNCH_ENV",
    "PORT_IN_USE",
    "DEVICE_MAPPING",
    "COLLECTIVE_TIMEOUT",
    "NCCL_NETWORK",
    "SHM",
    "UNUSED_PARAMETERS",
    "COLLECTIVE_MISMATCH",
    "RENDEZVOUS",
    "GRADSCALER",
    "DATA_SAMPLER",
    "VERSION_MISMATCH",
    "OOM",
)

CAUSE, SYMPTOM, PROSE = 0, 1, 2
# Evidence weights: a traceback signature outweighs prose, and weak signals add up
# (matcher.rank_candidates). A cause names what went wrong; a generic cause is a message that
# several causes print; a symptom follows a failure elsewhere; prose phrases weigh 1-5 each.
WEIGHT = {CAUSE: 10.0, SYMPTOM: 3.0, PROSE: 0.0}
GENERIC_CAUSE = 5.0


@dataclass(frozen=True)
class Phrase:
    """One way a ticket describes a symptom in words, and how much it says about the cause."""

    pattern: re.Pattern[str]
    weight: float
    label: str  # what the reader is told: 'says "no speed-up with more GPUs"'
    literals: tuple[str, ...] = ()  # a match contains one of these (a cheap precheck)


@dataclass(frozen=True)
class Signature:
    code: str
    root_cause: str
    title: str
    patterns: tuple[re.Pattern[str], ...]
    keywords: tuple[str, ...]
    why: str
    fix: str
    confirm_with: str
    tier: int = CAUSE
    min_count: int = 1
    weight: float | None = None  # None: the tier's weight
    phrases: tuple[Phrase, ...] = ()  # prose signatures: scored phrases instead of patterns

    @property
    def base_weight(self) -> float:
        return WEIGHT[self.tier] if self.weight is None else self.weight

    def search(self, text: str) -> re.Match[str] | None:
        for pattern in self.patterns:
            m = pattern.search(text)
            if m:
                return m
        return None


def _rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


_CHECK_ENV = "ddpdoctor check --only env"
_CHECK_PG = "ddpdoctor check --only process_group"
_CHECK_DEV = "ddpdoctor check --only rank_device"
_CHECK_AR = "ddpdoctor check --only allreduce"
_CHECK_SAMPLER = "ddpdoctor check --only sampler"
_CHECK_SCALER = "ddpdoctor check --only gradscaler"
_LINT = "ddpdoctor lint train.py"
_ENV = "ddpdoctor env (on every node)"
# Where a hang's rank and line come from: our launcher, or torch's flight recorder read by us.
_FLIGHT = (
    " To name the rank and its line: run the job under `ddpdoctor run` (stacks and flight "
    "recorder at the hang), or set TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
    "TORCH_FR_DUMP_TEMP_FILE=/tmp/fr/rank_, then `ddpdoctor explain /tmp/fr`."
)

SIGNATURES: tuple[Signature, ...] = (
    # --- DDP's reducer: the most precise messages there are --------------------------------
    Signature(
        "DDX171",
        "UNUSED_PARAMETERS",
        "Parameters that do not take part in the loss (find_unused_parameters=False)",
        _rx(
            r"expected\s+to\s+have\s+finished\s+reduction\s+in\s+the\s+prior\s+iteration(?!.*static_graph)",
            r"parameters\s+that\s+were\s+not\s+used\s+in\s+producing\s+(?:the\s+)?loss",
            r"parameter\s+indices\s+which\s+did\s+not\s+receive\s+grad",
        ),
        ("finished reduction", "producing loss", "producing the loss", "did not receive grad"),
        "DDP all-reduces every parameter's gradient once per step. A parameter that the forward "
        "pass did not use never gets a gradient, so the reduction of the previous step never "
        "finishes and the next forward refuses to start.",
        "Make every parameter take part in the loss, or delete the unused ones; if the graph "
        "really changes between steps, pass DDP(model, find_unused_parameters=True) (slower). "
        "TORCH_DISTRIBUTED_DEBUG=INFO names the parameters.",
        f"{_LINT}; rerun with TORCH_DISTRIBUTED_DEBUG=INFO",
    ),
    Signature(
        "DDX172",
        "UNUSED_PARAMETERS",
        "The graph changed between steps under static_graph=True",
        _rx(
            r"training\s+graph\s+has\s+changed\s+in\s+this\s+iteration",
            r"not\s+compatible\s+with\s+static_graph",
        ),
        ("graph has changed", "static_graph"),
        "static_graph=True promises DDP that the same parameters are used in every step; one "
        "that is used in one step and unused in the next breaks that promise.",
        "Drop static_graph=True (use find_unused_parameters=True instead), or make the set of "
        "used parameters the same in every step.",
        _LINT,
    ),
    Signature(
        "DDX173",
        "UNUSED_PARAMETERS",
        "A parameter was marked ready twice (reentrant checkpointing or a shared module)",
        _rx(
            r"expected\s+to\s+mark\s+a\s+variable\s+ready\s+only\s+once",
            r"parameter\s+.{0,120}has\s+been\s+marked\s+as\s+ready\s+twice",
        ),
        ("ready only once", "ready twice"),
        "DDP hooks fire once per parameter per step. Activation checkpointing with "
        "use_reentrant=True, or a module used twice in one forward, fires them twice.",
        "Use torch.utils.checkpoint(..., use_reentrant=False), or DDP(static_graph=True) when "
        "the graph does not change; do not call the DDP module more than once per step.",
        _LINT,
    ),
    Signature(
        "DDX174",
        "UNUSED_PARAMETERS",
        "find_unused_parameters=True without unused parameters (slower steps)",
        _rx(r"find_unused_parameters=True\s+was\s+specified.{0,80}did\s+not\s+find\s+any\s+unused"),
        ("find_unused_parameters",),
        "With find_unused_parameters=True DDP walks the autograd graph after every forward; when "
        "every parameter is used that costs time for nothing.",
        "Drop find_unused_parameters=True (or use static_graph=True).",
        _LINT,
        tier=SYMPTOM,
    ),
    # --- collectives that disagree across ranks ------------------------------------------
    Signature(
        "DDX181",
        "COLLECTIVE_MISMATCH",
        "Ranks called different collectives",
        _rx(
            r"detected\s+mismatch\s+between\s+collectives\s+on\s+ranks",
            r"mismatch(?:ed)?\s+collective",
            r"collectivefingerprint\(.{0,200}(?:but|mismatch)",
        ),
        ("mismatch", "collectivefingerprint"),
        "Every rank must issue the same collectives in the same order with the same shapes. A "
        "rank that skips one (an `if rank == 0:` around a collective, data-dependent control "
        "flow, a different number of batches) pairs its calls with the wrong ones.",
        "Make every rank call the same collectives: no collectives inside rank-dependent "
        "branches, equal batch counts (DistributedSampler, drop_last), identical models.",
        f"{_CHECK_AR}; rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL",
    ),
    Signature(
        "DDX182",
        "COLLECTIVE_MISMATCH",
        "Ranks sent tensors of different sizes in one collective",
        _rx(
            r"op\.preamble\.length\s*<=\s*op\.nbytes",
            r"received\s+data\s+size\s+doesn't\s+match\s+expected\s+size",
            r"collective\s+mismatch",
            r"(?:local|remote)\s+size\s+\d+\s+(?:local|remote)\s+size\s+\d+",
            r"size\s+mismatch.{0,80}(?:all_?reduce|all_?gather|broadcast|collective)",
            r"message\s+truncated\s*:\s*receiving\s+\d+\s+bytes\s+instead\s+of\s+\d+",
        ),
        ("preamble", "doesn't match expected size", "remote size", "size mismatch", "truncated"),
        "The ranks entered the same collective with tensors of different sizes, usually because "
        "they are at different steps or hold different shapes (ragged last batch, rank-dependent "
        "shapes, mismatched model).",
        "Give every rank the same shapes (pad or use drop_last=True), and make every rank call "
        "the collectives in the same order.",
        f"{_CHECK_AR}; rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL",
    ),
    Signature(
        "DDX183",
        "COLLECTIVE_MISMATCH",
        "The model differs across ranks",
        _rx(
            r"DDP\s+expects\s+same\s+model\s+across\s+all\s+ranks",
            r"params,?\s+while\s+rank\s+\d+\s+has\s+inconsistent",
            r"appears\s+not\s+to\s+match\s+(?:sizes|strides)\s+of\s+the\s+same\s+param\s+in\s+process\s+group",
        ),
        ("same model across", "inconsistent", "same param in process group"),
        "DDP verifies at construction that every rank holds the same parameters (count, shapes, "
        "strides); a rank with a different architecture or config cannot be synchronised.",
        "Build the model identically on every rank (same config, same code, same seed for "
        "conditional layers), then wrap it in DDP.",
        _LINT,
    ),
    # --- device mapping -------------------------------------------------------------------
    Signature(
        "DDX131",
        "DEVICE_MAPPING",
        "Two ranks on the same GPU",
        _rx(
            r"duplicate\s+gpu\s+detected\s*:?\s*rank\s+\d+\s+and\s+rank\s+\d+\s+both\s+on\s+cuda\s+device",
            r"duplicate\s+gpu\s+detected",
        ),
        ("duplicate gpu",),
        "NCCL refuses a communicator in which two ranks drive the same GPU. The ranks never "
        "called torch.cuda.set_device(LOCAL_RANK), so all default to cuda:0, or "
        "CUDA_VISIBLE_DEVICES leaves fewer GPUs than ranks.",
        "Call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before any CUDA work and "
        "use device_ids=[local_rank]; start --nproc-per-node equal to the visible GPUs.",
        _CHECK_DEV,
    ),
    Signature(
        "DDX132",
        "DEVICE_MAPPING",
        "A rank asked for a GPU that does not exist (invalid device ordinal)",
        _rx(
            r"invalid\s+device\s+ordinal",
            r"cudaErrorInvalidDevice",
            r"attempting\s+to\s+deserialize\s+object\s+on\s+cuda\s+device\s+\d+\s+but\s+torch\.cuda\.device_count\(\)\s+is\s+\d+",
            r"ProcessGroupNCCL\s+is\s+only\s+supported\s+with\s+GPUs,?\s+no\s+GPUs\s+found",
            r"CUDA-capable\s+device\(s\)\s+is/are\s+busy\s+or\s+unavailable",
        ),
        (
            "ordinal",
            "cudaerrorinvaliddevice",
            "deserialize object on cuda device",
            "no gpus found",
            "busy or unavailable",
        ),
        "The device index is larger than the number of GPUs this process sees: more ranks per "
        "node than GPUs, the global RANK used where LOCAL_RANK belongs (breaks on the second "
        "node), or CUDA_VISIBLE_DEVICES hiding GPUs.",
        "Use LOCAL_RANK (not RANK) for the device, set --nproc-per-node to the GPUs of one node, "
        "and load checkpoints with map_location.",
        _CHECK_DEV,
    ),
    Signature(
        "DDX135",
        "DEVICE_MAPPING",
        "nvidia-smi shows several training processes on GPU 0",
        _rx(r"^\|\s+0\s+(?:N/A\s+N/A\s+)?\d+\s+C\S*\s+\S*python\S*\s+\d+MiB"),
        ("mib |",),
        "Each rank should own one GPU; several python processes on GPU 0 in nvidia-smi mean the "
        "ranks (or their CUDA contexts) all landed on cuda:0.",
        "torch.cuda.set_device(local_rank) before any CUDA work, including torch.load "
        "(map_location) and torch.cuda.* calls made at import time.",
        _CHECK_DEV,
        tier=SYMPTOM,  # a table, not a failure: resuming a checkpoint shows it too
        weight=4.0,
        min_count=2,
    ),
    Signature(
        "DDX134",
        "DEVICE_MAPPING",
        "Model and data on different GPUs",
        _rx(
            r"expected\s+all\s+tensors\s+to\s+be\s+on\s+the\s+same\s+device.{0,80}cuda:\d+\s+and\s+cuda:\d+",
            r"device_ids\s+can\s+only\s+be\s+None\s+or\s+contain\s+a\s+single\s+element",
        ),
        ("same device", "device_ids can only"),
        "The batch was moved to one GPU and the DDP module lives on another: the rank→GPU "
        "mapping differs between model, data and device_ids.",
        "Use one device per rank everywhere: device = torch.device('cuda', local_rank); "
        "model.to(device); batch.to(device); DDP(model, device_ids=[local_rank]).",
        _CHECK_DEV,
    ),
    # --- memory -----------------------------------------------------------------------------
    Signature(
        "DDX233",
        "OOM",
        "Several processes allocate on one GPU (out of memory)",
        _rx(
            r"(?:process\s+\d+\s+has\s+[\d.]+\s*[GMK]i?B\s+memory\s+in\s+use.{0,80}){2,}",
        ),
        ("memory in use",),
        "The out-of-memory report lists several processes on the same GPU: every rank (or its "
        "checkpoint load) put tensors on cuda:0 instead of its own GPU.",
        "torch.cuda.set_device(local_rank) before any CUDA work; "
        "torch.load(path, map_location=f'cuda:{local_rank}') or map_location='cpu'.",
        _CHECK_DEV,
    ),
    Signature(
        "DDX232",
        "OOM",
        "Checkpoint loaded onto the GPU it was saved from (torch.load without map_location)",
        _rx(
            r"attempting\s+to\s+deserialize\s+object\s+on\s+a\s+cuda\s+device\s+but\s+torch\.cuda\.is_available\(\)\s+is\s+false",
            r"torch\.load\(.{0,80}\)(?!.{0,40}map_location).{0,40}(?:out\s+of\s+memory|gpu\s*0|cuda:0)",
            r"(?:checkpoint|state_dict|torch\.load).{0,80}(?:all|every)\s+(?:ranks?|process(?:es)?).{0,40}(?:gpu\s*0|cuda:0)",
        ),
        ("deserialize object", "gpu 0", "gpu0", "cuda:0", "out of memory"),
        "torch.load restores tensors onto the device they were saved from, cuda:0 for a "
        "checkpoint saved by rank 0: every rank then allocates a full copy on GPU 0.",
        "torch.load(path, map_location='cpu') (or f'cuda:{local_rank}'), then "
        "model.load_state_dict(...); save only on rank 0.",
        f"{_LINT}; {_CHECK_DEV}",
    ),
    Signature(
        "DDX231",
        "OOM",
        "CUDA out of memory",
        _rx(
            r"(?:cuda|hip)\s+out\s+of\s+memory",
            r"(?:torch\.(?:cuda\.)?)?OutOfMemoryError",
            r"cuda\s+error:\s+out\s+of\s+memory",
            r"CUBLAS_STATUS_ALLOC_FAILED",
            r"NCCL\s+WARN\s+Cuda\s+failure\s+'out\s+of\s+memory'",
        ),
        ("out of memory", "outofmemory", "cublas_status_alloc_failed"),
        "A rank ran out of GPU memory. Under DDP the other ranks then wait in the next "
        "collective until the watchdog times out, so the timeout that follows is a symptom. DDP "
        "adds its gradient buckets (about one extra copy of the gradients) on top of the model.",
        "Lower the per-rank batch size, use AMP or activation checkpointing, make sure each "
        "rank uses only its own GPU (set_device), and check nothing else runs on that GPU.",
        _CHECK_DEV,
    ),
    Signature(
        "DDX234",
        "OOM",
        "A worker was killed by SIGKILL (host out of memory?)",
        _rx(
            r"exitcode\s*:\s*-9\b",
            r"signal\s+9\s+\(SIGKILL\)\s+received",
            r"Signals\.SIGKILL",
            r"out\s+of\s+memory:\s+killed\s+process",
            r"DefaultCPUAllocator:\s+(?:not\s+enough\s+memory|can't\s+allocate\s+memory)",
            r"is\s+killed\s+by\s+signal:\s+killed",
            r"terminated\s+with\s+signal\s+SIGKILL",
        ),
        ("exitcode", "sigkill", "killed process", "defaultcpuallocator", "signal: killed"),
        "A rank died from SIGKILL: most often the kernel's OOM killer, because every rank "
        "loaded the whole dataset or checkpoint into host RAM; sometimes the scheduler.",
        "Check `dmesg | grep -i oom` on that host; load data lazily, torch.load with "
        "mmap=True/map_location, fewer DataLoader workers per rank.",
        _ENV,
        tier=SYMPTOM,
    ),
    # --- mixed precision ----------------------------------------------------------------------
    Signature(
        "DDX201",
        "GRADSCALER",
        "GradScaler used on FP16 parameters",
        _rx(r"attempting\s+to\s+unscale\s+fp16\s+gradients"),
        ("unscale fp16",),
        "GradScaler needs FP32 master parameters. After model.half() the gradients are FP16 "
        "and cannot be unscaled safely.",
        "Keep the model in FP32 and use torch.autocast(device_type='cuda', dtype=torch.float16) "
        "for the forward pass with GradScaler; or use bf16 without a scaler.",
        _CHECK_SCALER,
    ),
    Signature(
        "DDX202",
        "GRADSCALER",
        "GradScaler.unscale_ called twice in one step",
        _rx(r"unscale_\(\)\s+has\s+already\s+been\s+called\s+on\s+this\s+optimizer"),
        ("unscale_()",),
        "unscale_() may be called once per optimizer between update() calls (for clipping); a "
        "second call, often from a library that also clips, would unscale twice.",
        "Call scaler.unscale_(optimizer) once, before clip_grad_norm_, then scaler.step and "
        "scaler.update; remove the duplicate call.",
        f"{_CHECK_SCALER}; {_LINT}",
    ),
    Signature(
        "DDX203",
        "GRADSCALER",
        "GradScaler.step without scaled gradients",
        _rx(
            r"no\s+inf\s+checks\s+were\s+recorded\s+for\s+this\s+optimizer",
            r"no\s+inf\s+checks\s+were\s+recorded\s+prior\s+to\s+update",
        ),
        ("inf checks",),
        "scaler.step() found no gradients produced through scaler.scale(loss): backward ran on "
        "the unscaled loss, the optimizer has no parameters with gradients, or step/update run "
        "in the wrong order.",
        "scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update() in that order, "
        "every step, with the optimizer built over the DDP module's parameters.",
        f"{_CHECK_SCALER}; {_LINT}",
    ),
    Signature(
        "DDX204",
        "GRADSCALER",
        "Loss becomes NaN/inf with AMP or loss scaling",
        _rx(
            r"(?:grad_?scaler|loss\s+scal\w*|\bamp\b|fp16|autocast|mixed\s+precision).{0,80}(?:loss|grad\w*|weights?|outputs?)\W{0,3}(?:is|are|=|:|becomes?|became|goes|went|turns?|turned|gets?|got)?\s*(?:to\s+)?(?:nan|inf)\b",
            r"(?:loss|grad\w*|weights?|outputs?)\W{0,3}(?:is|are|=|:|becomes?|became|goes|went|turns?|turned|gets?|got)?\s*(?:to\s+)?(?:nan|inf)\b.{0,80}(?:grad_?scaler|loss\s+scal\w*|\bamp\b|fp16|autocast|mixed\s+precision)",
            r"gradient\s+overflow\.?\s+skipping\s+step",
            r"fp16\s+grad\s+scale:?\s+0\b",
            r"current\s+loss\s+scale\s+already\s+at\s+minimum",
            r"scaler\s+scale\s+.{0,40}(?:differ|diverg)",
        ),
        ("nan", "overflow", "loss scal", "scaler", "fp16", "autocast", "mixed precision"),
        "Non-finite values under FP16: GradScaler skips such steps and lowers the scale, but a "
        "scaler shared across processes, update() skipped on some ranks, or a loss computed "
        "outside autocast lets inf/NaN into the weights; ranks then diverge.",
        "One GradScaler per process; scaler.scale(loss).backward(), scaler.step(opt), "
        "scaler.update() every step on every rank; compute the loss inside autocast; prefer "
        "bf16 where the GPU supports it.",
        _CHECK_SCALER,
        tier=SYMPTOM,
    ),
    Signature(
        "DDX205",
        "GRADSCALER",
        "Scheduler stepped before the optimizer: in an AMP job, GradScaler skipped a step",
        _rx(
            r"detected\s+call\s+of\s+.?lr_scheduler\.step\(\).?\s+before\s+.?optimizer\.step\(\)",
        ),
        ("lr_scheduler.step()",),
        "On its own this warning is harmless. With a GradScaler it means scaler.step() skipped "
        "optimizer.step() because the gradients held inf/NaN (normal for the first steps, "
        "while the scale calibrates); when it keeps coming, every step is skipped and the "
        "model does not train.",
        "Keep the order scaler.step(opt); scaler.update(); scheduler.step(); if steps keep "
        "being skipped, look for inf/NaN in the loss (compute it in autocast, lower the LR) "
        "and check the scaler is one per process and updated on every rank.",
        f"{_CHECK_SCALER}; {_LINT}",
        weight=1.0,  # raised when the same log shows AMP (matcher: warnings read in context)
    ),
    # --- shared memory ----------------------------------------------------------------------
    Signature(
        "DDX161",
        "SHM",
        "DataLoader worker died of a bus error (/dev/shm full)",
        _rx(
            r"dataloader\s+worker\s+\(pid\S*\s*[\d,\s]*\)\s+is\s+killed\s+by\s+signal:\s+bus\s+error",
            r"unexpected\s+bus\s+error\s+encountered\s+in\s+worker",
            r"out\s+of\s+shared\s+memory",
            r"insufficient\s+shared\s+memory",
        ),
        ("bus error", "shared memory"),
        "DataLoader workers hand batches to the trainer through /dev/shm. Containers default to "
        "64 MiB of it; with several ranks times several workers it fills and a worker gets "
        "SIGBUS.",
        "Give the container more shared memory (docker --shm-size=16g or --ipc=host; a "
        "Kubernetes emptyDir with medium: Memory on /dev/shm), or use fewer workers per rank.",
        f"{_ENV}: /dev/shm size",
    ),
    Signature(
        "DDX162",
        "SHM",
        "NCCL could not create its shared-memory segment",
        _rx(
            r"error\s+while\s+creating\s+shared[\s-]memory\s+segment",
            r"NCCL\s+WARN\s+.{0,60}/dev/shm",
            r"shm_open|ftruncate\s+failed",
            r"posix_fallocate\s+failed",
            r"unable\s+to\s+allocate\s+shared\s+memory",
        ),
        (
            "shared-memory",
            "shared memory segment",
            "/dev/shm",
            "shm_open",
            "ftruncate",
            "posix_fallocate",
        ),
        "NCCL's intra-node transport keeps its buffers in /dev/shm; when it is small (a "
        "container's 64 MiB) NCCL fails at communicator init or at the first large collective.",
        "Enlarge /dev/shm (docker --shm-size or --ipc=host). NCCL_SHM_DISABLE=1 works around it "
        "at some speed cost.",
        f"{_ENV}: /dev/shm size",
    ),
    Signature(
        "DDX163",
        "SHM",
        "torch shared-memory file could not be written",
        _rx(
            r"unable\s+to\s+write\s+to\s+file\s+</?torch_.{0,80}no\s+space\s+left\s+on\s+device",
            r"unable\s+to\s+(?:open|mmap|allocate|write)\s+.{0,60}</?torch_",
            r"no\s+space\s+left\s+on\s+device.{0,40}/dev/shm",
        ),
        ("</torch_", "<torch_", "no space left"),
        "torch.multiprocessing shares tensors through files in /dev/shm; 'No space left on "
        "device' there means /dev/shm is full, not the disk.",
        "Enlarge /dev/shm, reduce num_workers / prefetch_factor, or "
        "torch.multiprocessing.set_sharing_strategy('file_system').",
        f"{_ENV}: /dev/shm size",
    ),
    Signature(
        "DDX164",
        "SHM",
        "A worker was killed by SIGBUS",
        _rx(r"exitcode\s*:\s*-7\b", r"signal\s+7\s+\(SIGBUS\)", r"Signals\.SIGBUS"),
        ("exitcode", "sigbus"),
        "SIGBUS in a training process almost always means a shared-memory mapping in /dev/shm "
        "could not be backed because /dev/shm is full.",
        "Enlarge /dev/shm (docker --shm-size or --ipc=host) or use fewer DataLoader workers.",
        f"{_ENV}: /dev/shm size",
        tier=SYMPTOM,
    ),
    # --- port ----------------------------------------------------------------------------------
    Signature(
        "DDX121",
        "PORT_IN_USE",
        "The rendezvous port is already in use",
        _rx(
            r"server\s+socket\s+has\s+failed\s+to\s+(?:listen|bind)",
            r"EADDRINUSE",
            r"address\s+already\s+in\s+use",
            r"errno\s*[:=]?\s*98\b",
        ),
        ("server socket has failed", "eaddrinuse", "already in use", "errno"),
        "Rank 0 (or torchrun's store) could not listen on MASTER_PORT: another job, a leftover "
        "process from a previous run, or a second torchrun on the same node already holds it.",
        "Pick another port (--master-port / --rdzv-endpoint host:PORT), or --rdzv-backend=c10d "
        "with a free port; kill leftovers (`ss -ltnp | grep PORT`).",
        _CHECK_PG,
    ),
    Signature(
        "DDX122",
        "PORT_IN_USE",
        "Address in use while binding the store (DistNetworkError)",
        _rx(r"DistNetworkError.{0,200}port:?\s*\d+.{0,80}(?:in\s+use|98)"),
        ("distnetworkerror",),
        "The TCPStore could not bind its port.",
        "Use a free --master-port, or let ddpdoctor/torchrun pick one (--master-port=0 with "
        "c10d rendezvous).",
        _CHECK_PG,
    ),
    # --- process group ----------------------------------------------------------------------
    Signature(
        "DDX101",
        "PG_NOT_INITIALIZED",
        "Default process group not initialised",
        _rx(
            r"default\s+process\s+group\s+(?:has\s+not\s+been|is\s+not|was\s+not)\s+initiali[sz]ed",
            r"please\s+make\s+sure\s+to\s+call\s+init_process_group",
        ),
        ("default process group", "init_process_group"),
        "DistributedDataParallel and every torch.distributed call need a process group; "
        "init_process_group() was never called in this process (or ran after DDP was built).",
        "Call torch.distributed.init_process_group(backend) at the start of every process, "
        "before building DDP, and start the script with torchrun.",
        f"{_CHECK_PG}; {_LINT}",
    ),
    Signature(
        "DDX102",
        "PG_NOT_INITIALIZED",
        "Process group used after it was destroyed, or a wrong group passed",
        _rx(
            r"invalid\s+process\s+group\s+specified",
            r"process\s+group\s+.{0,40}has\s+been\s+destroyed",
            r"distributed\s+package\s+doesn't\s+have\s+nccl\s+built\s+in",
        ),
        ("process group", "doesn't have nccl"),
        "A collective ran with a group that no longer exists (after destroy_process_group) or "
        "that this rank is not part of, or with a backend this torch build lacks.",
        "Call collectives only between init_process_group and destroy_process_group, pass "
        "groups this rank belongs to, and use gloo where NCCL is unavailable.",
        _CHECK_PG,
    ),
    # --- launch environment ---------------------------------------------------------------------
    Signature(
        "DDX111",
        "LAUNCH_ENV",
        "Not started through torchrun: distributed variables missing",
        _rx(
            r"environment\s+variable\s+(?:RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_RANK)\s+expected,?\s+but\s+not\s+set",
            r"KeyError:\s+'(?:LOCAL_RANK|RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_WORLD_SIZE)'",
            r"error\s+initializing\s+torch\.distributed\s+using\s+env://",
        ),
        ("expected, but not set", "keyerror", "env://"),
        "init_process_group(init_method='env://') reads RANK, WORLD_SIZE, MASTER_ADDR and "
        "MASTER_PORT from the environment; `python train.py` sets none of them.",
        "Start with torchrun --nproc-per-node=N train.py (it sets them, and LOCAL_RANK); under "
        "Slurm use srun with torchrun or map SLURM_PROCID/SLURM_NTASKS yourself.",
        _CHECK_ENV,
    ),
    Signature(
        "DDX112",
        "LAUNCH_ENV",
        "Script expects --local_rank, torchrun passes LOCAL_RANK (or the reverse)",
        _rx(
            r"unrecognized\s+arguments:.{0,80}--local[_-]rank",
            r"error:\s+the\s+following\s+arguments\s+are\s+required:.{0,40}--local[_-]rank",
        ),
        ("unrecognized arguments", "--local_rank", "--local-rank"),
        "The legacy launcher (python -m torch.distributed.launch) passes --local-rank=N (older "
        "torch: --local_rank=N) to the script; torchrun passes nothing and sets LOCAL_RANK. A "
        "script whose argparse does not match the launcher fails at startup.",
        "Use torchrun and read int(os.environ['LOCAL_RANK']); or add "
        "parser.add_argument('--local-rank', '--local_rank', type=int) for the old launcher.",
        f"{_CHECK_ENV}; {_LINT}",
    ),
    Signature(
        "DDX113",
        "LAUNCH_ENV",
        "Deprecated torch.distributed.launch in use",
        _rx(r"the\s+module\s+torch\.distributed\.launch\s+is\s+deprecated"),
        ("torch.distributed.launch",),
        "torch.distributed.launch passes --local-rank to the script and will be removed; "
        "scripts written for torchrun break under it and the reverse.",
        "Switch to torchrun (same arguments) and read LOCAL_RANK from the environment.",
        _CHECK_ENV,
        tier=SYMPTOM,
    ),
    # --- rendezvous / multi-node ----------------------------------------------------------------
    Signature(
        "DDX193",
        "RENDEZVOUS",
        "The master address does not resolve",
        _rx(
            r"name\s+or\s+service\s+not\s+known",
            r"temporary\s+failure\s+in\s+name\s+resolution",
            r"nodename\s+nor\s+servname\s+provided",
            r"network\s+addresses\s+of\s+\(.{0,120}\)\s+cannot\s+be\s+retrieved",
            r"gai\s+error",
        ),
        ("not known", "name resolution", "servname", "cannot be retrieved", "gai error"),
        "MASTER_ADDR (or the --rdzv-endpoint host) is a name this node cannot resolve, so it "
        "cannot reach the store on the master node.",
        "Use the master's IP address, or a hostname every node resolves (check `getent hosts "
        "NAME` on each node); under Slurm take it from `scontrol show hostnames`.",
        _CHECK_PG,
    ),
    Signature(
        "DDX191",
        "RENDEZVOUS",
        "Rendezvous timed out: not every node joined",
        _rx(
            r"RendezvousTimeoutError",
            r"rendezvous\s+.{0,60}timed\s+out",
            r"timed\s+out\s+after\s+\d+\s+seconds\s+waiting\s+for\s+clients\.?\s+\d+/\d+\s+clients\s+joined",
            r"RendezvousClosedError",
            r"RendezvousStateError",
        ),
        ("rendezvous", "waiting for clients"),
        "torchrun waited for --nnodes nodes (or WORLD_SIZE ranks) and not all arrived: a node "
        "was not started, points at another endpoint or --rdzv-id, or cannot reach it.",
        "Start every node with the same --nnodes, --rdzv-id and --rdzv-endpoint; check that "
        "each node reaches the endpoint (nc -zv HOST PORT) and the firewall allows the port.",
        f"{_CHECK_PG} --nnodes N --rdzv-endpoint HOST:PORT",
    ),
    Signature(
        "DDX192",
        "RENDEZVOUS",
        "Could not connect to the master's store",
        _rx(
            r"client\s+socket\s+has\s+timed\s+out\s+after\s+\S+\s+while\s+trying\s+to\s+connect\s+to",
            r"connect\(\)\s+timed\s+out",
            r"RendezvousConnectionError",
            r"connection\s+to\s+the\s+c10d\s+store\s+has\s+failed",
            r"TCP\s+client\s+failed\s+to\s+connect",
            r"client\s+socket\s+has\s+failed\s+to\s+connect",
            r"(?-i:[A-Za-z.]*(?:Error|Exception)):\s+socket\s+timeout\b",
        ),
        (
            "client socket",
            "connect() timed out",
            "rendezvousconnectionerror",
            "c10d store",
            "failed to connect",
            "socket timeout",
        ),
        "This node could not reach MASTER_ADDR:MASTER_PORT: the master process is not up yet "
        "or crashed, the address/port is wrong, or a firewall blocks it.",
        "Check MASTER_ADDR/--rdzv-endpoint on every node, that rank 0's node started first and "
        "listens (ss -ltn), and that the port is open between the nodes.",
        _CHECK_PG,
    ),
    Signature(
        "DDX194",
        "RENDEZVOUS",
        "Connection refused by the master",
        _rx(
            r"connection\s+refused.{0,80}(?:29\d\d\d|master|store|c10d)",
            r"(?:master|store|c10d).{0,120}connection\s+refused",
        ),
        ("connection refused",),
        "Nothing listens on the master's port: rank 0 is not running (crashed or not started) "
        "or MASTER_PORT differs between nodes.",
        "Start rank 0's node first with the same --master-port; look at rank 0's log.",
        _CHECK_PG,
        tier=SYMPTOM,
    ),
    # --- NCCL network ------------------------------------------------------------------------
    Signature(
        "DDX151",
        "NCCL_NETWORK",
        "No usable network interface for NCCL/gloo",
        _rx(
            r"bootstrap\s*:\s*no\s+(?:NCCL_SOCKET_IFNAME\s+)?socket\s+interface\s+found",
            r"no\s+socket\s+interface\s+found",
            r"unable\s+to\s+find\s+(?:address|interface)\s+for:?\s+\S+",
            r"ifa\s*!=\s*nullptr",
            r"ncclSocketInit:\s+connecting\s+to\s+address\s+.{0,40}family",
            r"socket\s+creation\s+failed\s*:\s*address\s+family\s+not\s+supported",
        ),
        (
            "socket interface",
            "unable to find address",
            "unable to find interface",
            "ifa != nullptr",
            "ncclsocketinit",
            "socket creation failed",
        ),
        "NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME names an interface this host does not have, "
        "or (in a container) only lo exists, so the bootstrap has no address to use.",
        "Set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to an interface present on every "
        "node (`ip -br addr`), e.g. eth0 or ^lo,docker; unset it to let NCCL choose.",
        f"{_ENV}: network; {_CHECK_ENV}",
    ),
    Signature(
        "DDX152",
        "NCCL_NETWORK",
        "InfiniBand/RoCE transport error",
        _rx(
            r"NET/IB\w*\s*:?\s*Got\s+completion\s+(?:from\s+peer\s+\S+\s+)?with\s+(?:error|status)",
            r"got\s+completion\s+from\s+peer\s+\S+\s+with\s+(?:error|status)",
            r"call\s+to\s+ibv_\w+\s+failed",
            r"ibv_(?:create_qp|modify_qp|reg_mr|create_cq|open_device)\S*\s+failed",
            r"NET/IB\s*:(?!.{0,160}mismatch).{0,120}(?:error|failed|remote\s+process\s+exited)",
            r"remote\s+process\s+exited\s+or\s+there\s+was\s+a\s+network\s+error",
        ),
        ("net/ib", "ibv_", "remote process exited", "got completion"),
        "The InfiniBand/RoCE verbs layer failed: a link flapped, GID index or traffic class is "
        "wrong for RoCE, the HCA is misconfigured, or a peer process died mid-transfer.",
        "Check `ibstat`/`ibv_devinfo` on every node; for RoCE set NCCL_IB_GID_INDEX (often 3); "
        "pin NCCL_IB_HCA; to confirm, NCCL_IB_DISABLE=1 falls back to TCP sockets (slower).",
        f"{_CHECK_AR} (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)",
    ),
    Signature(
        "DDX153",
        "NCCL_NETWORK",
        "NCCL socket connection between nodes failed",
        _rx(
            r"socketStartConnect:\s+connect\s+to\s+\S+\s+failed",
            r"socket(?:Progress|PollConnect|Finalize\w*|TryAccept)\S*:?.{0,40}(?:failed|closed|refused|error)",
            r"connect\s+to\s+\S+\s+failed\s*:\s*(?:connection\s+refused|no\s+route\s+to\s+host|network\s+is\s+unreachable|connection\s+timed\s+out)",
            r"NCCL\s+WARN\s+.{0,40}(?:no\s+route\s+to\s+host|network\s+is\s+unreachable)",
        ),
        (
            "socketstartconnect",
            "socketprogress",
            "socketpollconnect",
            "socketfinalize",
            "sockettryaccept",
            "connect to",
            "no route to host",
            "unreachable",
        ),
        "NCCL picked an interface or address the other node cannot reach (a docker bridge, a "
        "management network) or a firewall blocks NCCL's ephemeral ports.",
        "Set NCCL_SOCKET_IFNAME to the interface on the data network on every node; open the "
        "ports between nodes; NCCL_DEBUG=INFO shows 'Bootstrap : Using <if>:<ip>'.",
        f"{_ENV}: network; {_CHECK_AR}",
    ),
    Signature(
        "DDX154",
        "NCCL_NETWORK",
        "GPU peer-to-peer path broken (P2P, IOMMU, ACS)",
        _rx(
            r"peer\s+access\s+is\s+not\s+supported",
            r"peer\s+mapping\s+resources\s+exhausted",
            r"cudaIpc\w*\s+failed|cudaErrorPeerAccess",
            r"cuda\s+ipc\s+handle.{0,60}(?:fail|error|invalid)|failed\s+to\s+open\s+cuda\s+ipc",
            r"AMD-Vi:.{0,40}IO_PAGE_FAULT|DMAR:.{0,40}fault",
            r"missing\s+\"?iommu=pt\"?\s+from\s+kernel\s+command\s+line",
            r"device=\d+\s+cannot\s+access\s+peer\s+device=\d+",
        ),
        (
            "peer access",
            "peer mapping",
            "cudaipc",
            "cuda ipc",
            "cudaerrorpeeraccess",
            "amd-vi",
            "dmar",
            "iommu=pt",
            "cannot access peer",
        ),
        "NCCL copies directly between GPUs over PCIe/NVLink. With the IOMMU or PCIe ACS enabled "
        "(common on bare metal and VMs) those copies are redirected or blocked: collectives hang "
        "or return garbage at the first all_reduce.",
        "Disable ACS on PCIe switches and set iommu=pt (or off) on the kernel command line; to "
        "confirm, NCCL_P2P_DISABLE=1 makes the hang go away (slower). Run nccl-tests.",
        f"{_CHECK_AR}; nvidia-smi topo -m",
    ),
    Signature(
        "DDX155",
        "NCCL_NETWORK",
        "NCCL system error (socket, shared memory or driver call failed)",
        _rx(
            r"unhandled\s+system\s+error",
            r"ncclSystemError",
            r"unhandled\s+cuda\s+error",
            r"ncclUnhandledCudaError",
        ),
        ("system error", "ncclsystemerror", "unhandled cuda error", "ncclunhandledcudaerror"),
        "A system call NCCL depends on failed: connecting to a peer, creating /dev/shm "
        "segments, registering memory with the NIC, or a CUDA driver call. The 'Last error' "
        "line and NCCL_DEBUG=INFO name the call.",
        "Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET: check the chosen interface "
        "(NCCL_SOCKET_IFNAME), /dev/shm size, ulimit -l (memlock) and the driver version.",
        f"{_ENV}; {_CHECK_AR}",
        weight=GENERIC_CAUSE,  # the 'Last error' line or the ticket says which system call
    ),
    Signature(
        "DDX156",
        "NCCL_NETWORK",
        "NCCL internal error",
        _rx(
            r"ncclInternalError",
            r"NCCL\s+error.{0,120}internal\s+error",
            r"ncclRemoteError",
            r"remote\s+process\s+exited\s+or\s+there\s+was\s+a\s+network",
        ),
        ("ncclinternalerror", "internal error", "ncclremoteerror"),
        "NCCL hit an unexpected state, usually during communicator setup between hosts: "
        "interface selection, topology detection, or a peer that vanished.",
        "Rerun with NCCL_DEBUG=INFO and look at the WARN lines just before; set "
        "NCCL_SOCKET_IFNAME explicitly on every node.",
        f"{_ENV}; {_CHECK_AR}",
        tier=SYMPTOM,
    ),
    # --- versions ---------------------------------------------------------------------------------
    Signature(
        "DDX221",
        "VERSION_MISMATCH",
        "NCCL versions differ",
        _rx(
            r"nccl\s+version\s+mismatch",
            r"mismatched\s+nccl\s+version",
            r"different\s+nccl\s+versions",
            r"undefined\s+symbol:?\s+nccl\w+",
            r"NCCL\s+version\s+\d+\.\d+.{0,60}(?:differ|mismatch|but)",
        ),
        ("nccl version", "nccl versions", "undefined symbol", "symbol: nccl"),
        "Ranks linked against different NCCL releases disagree on protocols and struct layouts; "
        "an NCCL older than the one torch was built with lacks symbols.",
        "Use one environment (container image or lock file) on every node; do not mix "
        "LD_LIBRARY_PATH NCCL with the one bundled in torch (print torch.cuda.nccl.version()).",
        f"{_CHECK_ENV}; {_ENV}",
    ),
    Signature(
        "DDX222",
        "VERSION_MISMATCH",
        "torch/CUDA versions differ between nodes",
        _rx(
            r"(?:torch|pytorch|cuda|python)\s+versions?\s+(?:differ|mismatch|are\s+different)",
            r"different\s+(?:torch|pytorch|cuda|python)\s+versions?",
            r"version\s+(?:skew|mismatch)\s+(?:between|across)\s+(?:nodes|ranks|hosts)",
            r"(?:torch|pytorch)\s+[\d.]+\s+on\s+(?:one|some|node).{0,80}(?:torch|pytorch)?\s*[\d.]+\s+on",
        ),
        ("version",),
        "Different torch builds can serialise objects, order collectives and pick NCCL "
        "algorithms differently; mixed nodes hang or crash in collectives.",
        "Install the same torch/CUDA/NCCL on every node; `ddpdoctor env` on each node and compare.",
        f"{_CHECK_ENV}; {_ENV}",
    ),
    Signature(
        "DDX223",
        "VERSION_MISMATCH",
        "CUDA driver older than the CUDA runtime torch was built for",
        _rx(
            r"driver\s+version\s+is\s+insufficient\s+for\s+cuda\s+runtime\s+version",
            r"nvidia\s+driver\s+on\s+your\s+system\s+is\s+too\s+old",
            r"cudaErrorInsufficientDriver",
        ),
        ("insufficient", "too old"),
        "The torch wheel needs a newer NVIDIA driver than the node has; mixed driver versions "
        "across nodes produce this on some nodes only.",
        "Upgrade the driver, or install the torch build for the CUDA version the driver "
        "supports (nvidia-smi shows it).",
        _ENV,
    ),
    Signature(
        "DDX225",
        "VERSION_MISMATCH",
        "Fabric manager and NVIDIA driver versions differ (CUDA not initialised)",
        _rx(
            r"fabric\s*manager.{0,80}version\s+[\d.]+\s+don'?t\s+match\s+with\s+driver\s+version",
            r"system\s+not\s+yet\s+initiali[sz]ed",
            r"cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY",
        ),
        (
            "don't match with driver",
            "dont match with driver",
            "not yet initiali",
            "system_not_ready",
            "systemnotready",
        ),
        "NVSwitch systems (8-GPU A100/H100/H200 boards) need nvidia-fabricmanager running at "
        "exactly the driver's version; after a driver or package upgrade the two drift apart, "
        "the service refuses to start and CUDA reports 'system not yet initialized' (error 802).",
        "Install the fabric manager package of the same version as the driver (or reinstall "
        "both from one source), hold them together against apt upgrades, and start "
        "nvidia-fabricmanager; nvidia-smi -q | grep -i fabric shows its state.",
        f"{_ENV}: driver; systemctl status nvidia-fabricmanager",
    ),
    Signature(
        "DDX226",
        "VERSION_MISMATCH",
        "The loaded NVIDIA kernel module and the user-space driver differ",
        _rx(
            r"failed\s+to\s+initiali[sz]e\s+nvml:\s+driver/library\s+version\s+mismatch",
            r"driver/library\s+version\s+mismatch",
        ),
        ("driver/library version mismatch",),
        "The driver was upgraded on disk but the old kernel module is still loaded, so NVML "
        "and CUDA refuse to talk to it.",
        "Reboot the node (or unload and reload the nvidia modules) so the module matches the "
        "installed driver; check with cat /proc/driver/nvidia/version and nvidia-smi.",
        _ENV,
    ),
    Signature(
        "DDX227",
        "VERSION_MISMATCH",
        "CUDA could not count the GPUs (driver stack not ready or mismatched)",
        _rx(r"unexpected\s+error\s+from\s+cudaGetDeviceCount\(\)"),
        ("cudagetdevicecount",),
        "cudaGetDeviceCount failed: the driver, the fabric manager or the CUDA compatibility "
        "package do not fit together on this node; the error number after it says which.",
        "Compare the driver, fabric manager and CUDA versions on this node (nvidia-smi, "
        "systemctl status nvidia-fabricmanager) and make them match.",
        _ENV,
        tier=SYMPTOM,
    ),
    # --- timeouts and vanished peers: symptoms of a failure elsewhere -------------------------
    Signature(
        "DDX143",
        "COLLECTIVE_TIMEOUT",
        "A rank never reached the barrier (monitored_barrier)",
        _rx(
            r"ranks?\s+[\d,\s]+failed\s+to\s+pass\s+monitoredBarrier",
            r"failed\s+to\s+pass\s+monitoredBarrier",
        ),
        ("monitoredbarrier",),
        "monitored_barrier names the ranks that did not arrive: they are stuck (a hang, a "
        "deadlock, a long checkpoint on one rank) or already dead.",
        "Look at the named ranks' logs and stacks (pystack remote PID); make sure every rank "
        "runs the same collectives." + _FLIGHT,
        f"{_CHECK_PG}; {_CHECK_AR}",
        tier=SYMPTOM,
    ),
    Signature(
        "DDX141",
        "COLLECTIVE_TIMEOUT",
        "NCCL watchdog: a collective timed out",
        _rx(
            r"watchdog\s+caught\s+collective\s+operation\s+timeout",
            r"WorkNCCL\(.{0,200}\)\s+ran\s+for\s+\d+\s+milliseconds\s+before\s+timing\s+out",
            r"(?:process\s+group\s+)?watchdog\s+thread\s+terminated\s+with\s+exception",
            r"some\s+NCCL\s+operations\s+have\s+failed\s+or\s+timed\s+out",
            r"NCCL\s+communicator\s+was\s+aborted",
            r"exception\s+\(either\s+an\s+error\s+or\s+timeout\)\s+detected\s+by\s+watchdog",
        ),
        ("watchdog", "timing out", "timed out", "aborted"),
        "A collective did not finish within the process group timeout (default 10-30 min): one "
        "rank is stuck, died, or takes a different code path. The watchdog fires on the ranks "
        "that waited; the cause is on the rank that did not arrive.",
        "Find the rank that stopped first (its own error, an OOM, a rank-dependent branch, "
        "uneven batches); TORCH_NCCL_ASYNC_ERROR_HANDLING=1, NCCL_DEBUG=INFO and "
        "TORCH_DISTRIBUTED_DEBUG=DETAIL show it. Raise the timeout only for long rank-0 work."
        + _FLIGHT,
        f"{_CHECK_AR}; {_CHECK_PG}",
        tier=SYMPTOM,
    ),
    Signature(
        "DDX142",
        "COLLECTIVE_TIMEOUT",
        "gloo: a collective timed out",
        _rx(
            r"timed\s+out\s+waiting\s+\d+\s*ms\s+for\s+(?:recv|send)\s+operation",
            r"gloo.{0,120}timed\s+out",
            r"timed\s+out\s+waiting\s+\d+\s*ms",
        ),
        ("timed out", "recv operation", "send operation"),
        "A gloo collective waited longer than the process group timeout for a peer that never "
        "sent: that peer is stuck, slower, dead, or in a different collective.",
        "Look at the other ranks' logs for the first error; make every rank run the same "
        "collectives; raise timeout= in init_process_group only for long rank-0 work." + _FLIGHT,
        f"{_CHECK_AR}; {_CHECK_PG}",
        tier=SYMPTOM,
    ),
    Signature(
        "DDX144",
        "COLLECTIVE_TIMEOUT",
        "NCCL heartbeat monitor: the watchdog itself got stuck",
        _rx(
            r"heartbeat\s+monitor\s+timed\s+out",
            r"watchdog\s+got\s+stuck\s+for\s+\d+\s+seconds",
            r"(?:increas\w*|rais\w*|adjust\w*)\s+(?:the\s+)?TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
        ),
        ("heartbeat", "got stuck"),
        "The NCCL watchdog thread made no progress (a CUDA/NCCL call blocked, often on a hung "
        "collective or a dead GPU), so the monitor killed the process.",
        "Treat it as a hang: find the rank that stopped (py-spy dump, NCCL_DEBUG=INFO); check "
        "GPU health (nvidia-smi, dmesg Xid)." + _FLIGHT,
        f"{_CHECK_AR}; {_CHECK_DEV}",
        tier=SYMPTOM,
    ),
    Signature(
        "DDX148",
        "COLLECTIVE_TIMEOUT",
        "NCCL watchdog stack: a collective timed out (C++ frames only)",
        _rx(
            r"ProcessGroupNCCL::WorkNCCL::checkTimeout",
            r"ProcessGroupNCCL::watchdogHandler",
            r"ProcessGroupNCCL::ncclCommWatchdog",
            r"exception\s+raised\s+from\s+(?:checkTimeout|ncclCommWatchdog)\s+at",
            r"timeout\s+at\s+NCCL\s+work:\s+\d+,\s+last\s+enqueued\s+NCCL\s+work",
        ),
        ("checktimeout", "watchdoghandler", "ncclcommwatchdog", "timeout at nccl work"),
        "These frames are the NCCL watchdog thread taking the process down because a "
        "collective did not complete within the process-group timeout; the rank that did not "
        "arrive holds the cause.",
        "Find the rank that stopped first (its log, an OOM, a rank-only branch, slow rank-0 "
        "work such as a checkpoint); raise timeout= only for long rank-0 work." + _FLIGHT,
        f"{_CHECK_AR}; {_CHECK_PG}",
        tier=SYMPTOM,
    ),
    Signature(
        "DDX147",
        "COLLECTIVE_TIMEOUT",
        "A rank could not get the NCCL unique id from rank 0",
        _rx(
            r"retrieving\s+ncclUniqueId\s+from\s+\[\d+\].{0,200}(?:got\s+error|timeout|reset|refused)"
        ),
        ("ncclunique",),
        "Creating an NCCL communicator needs rank 0 to publish an id in the store; rank 0 did not "
        "(it crashed, is stuck elsewhere, or called a different collective) before the timeout.",
        "Look at rank 0's log for its first error; make sure every rank reaches the same first "
        "collective (no long rank-0-only work before it).",
        f"{_CHECK_PG}; {_CHECK_AR}",
        tier=SYMPTOM,
    ),
    Signature(
        "DDX136",
        "DEVICE_MAPPING",
        "NCCL invalid usage (often two ranks on one GPU)",
        _rx(r"ncclInvalidUsage", r"NCCL\s+error.{0,120}invalid\s+usage"),
        ("ncclinvalidusage", "invalid usage"),
        "NCCL rejected how it was called; the usual cause under DDP is a rank-to-GPU mapping that "
        "puts two ranks on one device. The 'Last error' line says which.",
        "Read the 'Last error' line; call torch.cuda.set_device(local_rank) first thing.",
        _CHECK_DEV,
        tier=SYMPTOM,
    ),
    Signature(
        "DDX146",
        "COLLECTIVE_TIMEOUT",
        "A peer rank went away during a collective",
        _rx(
            r"connection\s+closed\s+by\s+(?:remote\s+)?peer",
            r"connection\s+reset\s+by\s+peer",
            r"read\s+error\s+\[.{0,60}\]:\s*\d*:?\s*connection\s+reset",
        ),
        ("closed by", "by peer", "reset by"),
        "The other side of a gloo/NCCL connection closed it: that rank crashed or was killed "
        "first. This rank's error is a consequence.",
        "Find the first error of the other ranks (torchrun's 'Root Cause' block names the "
        "rank) and fix that.",
        _CHECK_PG,
        tier=SYMPTOM,
    ),
    Signature(
        "DDX145",
        "COLLECTIVE_TIMEOUT",
        "A collective failed in the backend (DistBackendError)",
        _rx(r"DistBackendError", r"NCCL\s+error\s+in:\s+\S*ProcessGroupNCCL"),
        ("distbackenderror", "nccl error in"),
        "The communication backend raised an error inside a collective; the message after it "
        "(or another rank's log) says which.",
        "Read the lines after DistBackendError and the other ranks' first errors; rerun with "
        "NCCL_DEBUG=INFO.",
        _CHECK_AR,
        tier=SYMPTOM,
    ),
)

# Not a line pattern: the matcher reports it when the log shows processes that loaded
# different NCCL versions ("NCCL version 2.18.1+cuda12.1" banners).
NCCL_VERSION_SKEW = Signature(
    "DDX224",
    "VERSION_MISMATCH",
    "The log shows different NCCL versions",
    (),
    ("nccl version",),
    "Each process prints the NCCL version it loaded; two different versions in one job mean the "
    "nodes run different environments, which hangs or crashes collectives.",
    "Use one container image or lock file for all nodes; check torch.cuda.nccl.version() and "
    "LD_LIBRARY_PATH on every node.",
    f"{_CHECK_ENV}; {_ENV}",
)
NCCL_VERSION_LINE = re.compile(r"NCCL\s+version\s+(\d+\.\d+\.\d+)", re.I)
# The same fact in other shapes: an image's NCCL_VERSION="2.15.5-1", torch.cuda.nccl.version()
# printed as (2, 19, 3) on the line after.
_NCCL_ENV_VERSION = re.compile(r"NCCL_VERSION\W{0,3}(\d+\.\d+\.\d+)", re.I)
_NCCL_TUPLE = re.compile(r"^\W*\((\d+),\s*(\d+),\s*(\d+)\)\W*$")


def nccl_versions_in(text: str, next_text: str = "") -> list[str]:
    """NCCL versions a line shows (a banner, an env line, or nccl.version() and its tuple)."""
    found = [m.group(1) for rx in (NCCL_VERSION_LINE, _NCCL_ENV_VERSION) for m in rx.finditer(text)]
    if "nccl.version()" in text.lower():
        t = _NCCL_TUPLE.match(next_text) or _NCCL_TUPLE.match(text.split("version()", 1)[-1])
        if t:
            found.append(".".join(t.groups()))
    return found


# Not a line pattern either: hosts that load an NCCL network plugin next to hosts that do not.
NCCL_PLUGIN_SKEW = Signature(
    "DDX228",
    "VERSION_MISMATCH",
    "Some nodes load an NCCL network plugin, others do not",
    (),
    ("net/plugin", "plugin path"),
    "NCCL on one node uses a network plugin (libnccl-net.so, e.g. HPC-X/SHARP or AWS OFI) and "
    "on another its internal transport: the nodes then speak different protocols and "
    "collectives between them hang.",
    "Install the same plugin on every node (or none), with the same LD_LIBRARY_PATH; "
    "NCCL_DEBUG=INFO prints 'NET/Plugin' on each node to compare.",
    f"{_CHECK_ENV}; {_ENV}",
)

BY_CODE = {s.code: s for s in (*SIGNATURES, NCCL_VERSION_SKEW, NCCL_PLUGIN_SKEW)}

# Lines naming torchrun's verdict (the matcher reads them to find the root-cause rank), and
# lines the version comparisons read.
ROOT_CAUSE_KEYWORDS = (
    "root cause",
    "local_rank:",
    "nccl_version",
    "nccl.version",
    "net/plugin",
    "plugin path",
)

# Advice when nothing matched: what to collect and attach to the ticket.
NO_MATCH_ADVICE = (
    "No known DDP failure signature found. Collect more and run `ddpdoctor explain` again:\n"
    "  - the full log of every rank (torchrun --tee 3 --log-dir logs/), not only rank 0;\n"
    "  - NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET for network problems);\n"
    "  - TORCH_DISTRIBUTED_DEBUG=DETAIL (collective mismatches; slow, debugging only);\n"
    "  - `ddpdoctor env --markdown` from every node, pasted into the ticket."
)


def keywords() -> tuple[str, ...]:
    """Every prefilter keyword, longest first (a shorter one contained in it is dropped)."""
    words = {k for s in SIGNATURES for k in s.keywords} | set(ROOT_CAUSE_KEYWORDS)
    ordered = sorted(words, key=lambda w: (-len(w), w))
    return tuple(w for w in ordered if not any(o != w and o in w for o in ordered))


def prefilter_pattern() -> str:
    """The prefilter as one POSIX ERE alternation (for `grep -E -i` and the benchmark)."""
    return "|".join(re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", k) for k in keywords())
