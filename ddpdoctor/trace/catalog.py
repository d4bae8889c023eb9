"""The problems only a run can see (DDR###), and the lint rows a run sees too (DDL###, lint's
own wording, so `lint` and `run` say the same thing). Module constants: judges return them by
name, tests compare by identity. Codes are a contract: add, never renumber or reuse."""

from __future__ import annotations

from ddpdoctor.lint.rules import RULES_BY_CODE
from ddpdoctor.report.model import Level
from ddpdoctor.report.problems import Problem


def _lint(code: str, level: Level | None = None) -> Problem:
    rule = RULES_BY_CODE[code]
    return Problem(
        rule.code, rule.symbol, level or Level.parse(rule.level), rule.title, rule.why, rule.fix
    )


_F, _W, _I = Level.FAIL, Level.WARN, Level.INFO

# seen by lint too ------------------------------------------------------------------------------
USED_BEFORE_INIT = _lint("DDL001")
SAMPLER_MISSING = _lint("DDL002")  # at run time: the same samples on several ranks
SET_EPOCH_MISSING = _lint("DDL003")  # at run time: the same order in consecutive epochs
DEVICE_MISMATCH = _lint("DDL004")
GRAD_SCALER_MISUSE = _lint("DDL005")
EVERY_RANK_WRITE = _lint("DDL006")  # at run time: several ranks wrote one path
DESTROY_MISSING = _lint("DDL007")  # at run time: the group was still alive at exit

# launch and group ------------------------------------------------------------------------------
DESTROY_WITHOUT_BARRIER = Problem(
    "DDR101", "destroy-without-barrier", _I,
    "destroy_process_group() without a barrier before it",
    "A rank that tears its group down while a peer still talks to it can abort at exit; on torch "
    "2.13 CPU, gloo then prints 'terminate called without an active exception' (exit -6) after "
    "training finished.",
    "Call dist.barrier() right before dist.destroy_process_group().",
)  # fmt: skip
SCRIPT_RAISED = Problem(
    "DDR102", "script-raised", _F, "The training script raised an exception",
    "The rank stopped; its peers lose it at their next collective and fail or hang there.",
    "Fix the error at the line shown; the first rank to fail is the root cause.",
)  # fmt: skip
STEP_NOT_REACHED = Problem(
    "DDR103", "step-not-reached", _F, "A rank did not reach the step the others stopped at",
    "Every rank must take the same optimizer steps; a rank that falls behind blocks the others "
    "in their next collective.",
    "Look at where that rank was (its stack) and at uneven data or per-rank conditions around optimizer.step().",
)  # fmt: skip
STOPPED_AT = Problem(
    "DDR104", "rank-stopped-at", _F, "Where a rank that did not finish was in the user's code",
    "A rank blocked in a collective waits for a peer that is elsewhere: the two lines differ.",
    "Compare the lines of the ranks; make every rank call the same collectives in the same order.",
)  # fmt: skip
# devices ---------------------------------------------------------------------------------------
SHARED_DEVICE = Problem(
    "DDR201", "shared-device", _F, "Two ranks train on one GPU",
    "Both ranks fight for one GPU's memory and compute while another GPU idles; NCCL may refuse it.",
    "torch.cuda.set_device(local_rank) before building the model; DDP(model, device_ids=[local_rank]).",
)  # fmt: skip
CURRENT_DEVICE_MISMATCH = Problem(
    "DDR202", "current-device-mismatch", _W, "The current CUDA device is not the one DDP uses",
    "Tensors made with .cuda() or device='cuda' land on the current device, not DDP's: copies "
    "and a second CUDA context on another GPU.",
    "Call torch.cuda.set_device(local_rank) at start-up.",
)  # fmt: skip
# data ------------------------------------------------------------------------------------------
UNEVEN_BATCHES = Problem(
    "DDR301", "uneven-batches", _F, "Ranks draw different numbers of batches in one epoch",
    "DDP all-reduces gradients in every backward: the rank with an extra batch waits for a peer "
    "that has left the loop, the classic hang at the end of an epoch.",
    "Shard with DistributedSampler (it pads to equal lengths) or drop_last=True; for custom "
    "splits give every rank the same count, or use model.join().",
)  # fmt: skip
LOW_COVERAGE = Problem(
    "DDR302", "low-coverage", _W, "The ranks together see only part of the dataset",
    "Samples no rank draws are never trained on, e.g. a DistributedSampler told a num_replicas "
    "larger than the real world size.",
    "Leave num_replicas/rank to DistributedSampler (it asks the group) or pass the real world size.",
)  # fmt: skip
# GradScaler ------------------------------------------------------------------------------------
ZERO_GRAD_BEFORE_STEP = Problem(
    "DDR401", "zero-grad-before-step", _F, "zero_grad between backward and optimizer.step",
    "The step then sees no gradients: the model does not learn, and no error says so.",
    "Order per step: zero_grad(); loss.backward(); optimizer.step().",
)  # fmt: skip
SCALE_DIFFERS = Problem(
    "DDR402", "scale-differs", _F, "The GradScaler scale differs across ranks",
    "Ranks that scale differently skip different steps and the replicas drift apart.",
    "One GradScaler per process, created once, stepped and updated on every rank every step.",
)  # fmt: skip
SKIPS_DIFFER = Problem(
    "DDR403", "skipped-steps-differ", _F, "Ranks skipped different numbers of optimizer steps",
    "A step skipped on one rank and taken on another makes the replicas differ.",
    "Let DDP synchronise gradients before scaler.step(); do not unscale or clip per rank differently.",
)  # fmt: skip
MANY_SKIPS = Problem(
    "DDR404", "many-skipped-steps", _W, "GradScaler skipped many optimizer steps",
    "Every skipped step is a batch of work thrown away: the gradients keep overflowing.",
    "Look for inf/NaN in the loss; lower the learning rate or the init_scale.",
)  # fmt: skip
# replicas --------------------------------------------------------------------------------------
REPLICAS_DIVERGED = Problem(
    "DDR501", "replicas-diverged", _F, "Model replicas differ across ranks",
    "DDP keeps replicas identical only if they start equal and every rank takes the same steps; "
    "different replicas train different models.",
    "Wrap the model in DDP (it broadcasts rank 0's weights) and step every rank alike; do not "
    "change parameters per rank.",
)  # fmt: skip
# collectives -----------------------------------------------------------------------------------
COLLECTIVE_MISMATCH = Problem(
    "DDR601", "collective-mismatch", _F, "Ranks call different collectives",
    "Collectives match by order: a different op, shape or dtype, or one call more on one rank, "
    "hangs or silently mixes data.",
    "Call the same collectives in the same order with the same shapes on every rank.",
)  # fmt: skip
# timing ----------------------------------------------------------------------------------------
STRAGGLER = Problem(
    "DDR801", "straggler-rank", _W, "One rank is slower than the others",
    "In DDP every step waits for the slowest rank: the others idle in the all-reduce.",
    "Look at that rank's work (data, per-rank branches, its host); balance it.",
)  # fmt: skip
DATA_BOTTLENECK = Problem(
    "DDR802", "data-bottleneck", _W, "The training loop waits for data",
    "Time spent waiting for the DataLoader is time the GPU idles.",
    "Raise num_workers, use pin_memory=True and persistent_workers=True, or precompute the transforms.",
)  # fmt: skip

ALL: list[Problem] = [v for v in list(globals().values()) if isinstance(v, Problem)]
BY_CODE: dict[str, Problem] = {p.code: p for p in ALL}
