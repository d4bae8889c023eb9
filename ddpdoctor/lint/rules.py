"""The lint rule table: one row per code with its readable symbol, level, what the mistake is, why
it bites and the fix (flake8-bugbear's `error_codes` habit). Codes are a contract: add new rules
after the last one, never renumber or reuse a code. `ddpdoctor problems` lists these too."""

from __future__ import annotations

from dataclasses import dataclass

from ddpdoctor.errors import UsageError


@dataclass(frozen=True)
class Rule:
    code: str
    symbol: str
    level: str  # "fail" | "warn" | "info"
    title: str
    why: str
    fix: str


RULES: list[Rule] = [
    Rule(
        "DDL000",
        "syntax-error",
        "fail",
        "The file does not parse",
        "A file Python cannot parse cannot be checked (and will not run).",
        "Fix the syntax error; `python -m py_compile FILE` shows it.",
    ),
    Rule(
        "DDL001",
        "used-before-init",
        "fail",
        "DDP or a collective used before init_process_group",
        "DistributedDataParallel, DistributedSampler and every torch.distributed call need the "
        "default process group; before init_process_group they raise 'Default process group has "
        "not been initialized'. A process started by mp.spawn does not inherit the parent's group.",
        "Call dist.init_process_group(...) first on every path (in the spawned worker for "
        "mp.spawn), then build DDP and samplers.",
    ),
    Rule(
        "DDL002",
        "sampler-missing",
        "fail",
        "DataLoader without DistributedSampler in a DDP script",
        "Without a DistributedSampler (or other per-rank sharding) every rank iterates the whole "
        "dataset: N GPUs do the same work N times and an 'epoch' is N epochs.",
        "Pass sampler=DistributedSampler(dataset) and drop shuffle=True (the sampler shuffles).",
    ),
    Rule(
        "DDL003",
        "set-epoch-missing",
        "warn",
        "DistributedSampler shuffles but set_epoch is never called in the epoch loop",
        "The sampler seeds its shuffle with seed + epoch; without set_epoch(epoch) every epoch "
        "sees the same order, which hurts convergence.",
        "Call sampler.set_epoch(epoch) (or loader.sampler.set_epoch(epoch)) at the start of each "
        "epoch, before iterating the loader.",
    ),
    Rule(
        "DDL004",
        "device-mismatch",
        "fail",
        "Model, device_ids and set_device disagree about the GPU",
        "DDP must wrap a module already on its GPU, device_ids must name this rank's one local "
        "GPU (LOCAL_RANK, not the global RANK); a bare .cuda() or a hard-coded cuda:0 without "
        "set_device puts every rank on GPU 0, and torch.load without map_location loads every "
        "rank's copy onto the GPU the checkpoint was saved from (a warning for weights the "
        "program does not save itself, which often hold CPU tensors).",
        "torch.cuda.set_device(local_rank); model.to(local_rank); then "
        "DDP(model, device_ids=[local_rank]).",
    ),
    Rule(
        "DDL005",
        "grad-scaler-misuse",
        "fail",
        "GradScaler calls out of order",
        "zero_grad between backward and step drops the gradients; clipping before unscale_ clips "
        "scaled gradients; step without update never adapts the scale; a scaler made per step "
        "forgets its scale; unscale_ twice per step raises.",
        "Per step: scaler.scale(loss).backward(); scaler.unscale_(opt) once before clipping; "
        "scaler.step(opt); scaler.update(); opt.zero_grad(). Create the scaler once.",
    ),
    Rule(
        "DDL006",
        "every-rank-side-effect",
        "warn",
        "Checkpoint, file write or progress output on every rank",
        "Every rank runs the script: N ranks write the same checkpoint, log file, TensorBoard "
        "or wandb run at once (corrupt or racing files, N runs in the tracker) and draw N "
        "progress bars.",
        "Guard it: `if rank == 0:` (or dist.get_rank() == 0, a master_process flag, "
        "@rank_zero_only).",
    ),
    Rule(
        "DDL007",
        "destroy-missing",
        "info",
        "No destroy_process_group at the end",
        "Without it NCCL resources are torn down at interpreter exit, which can hang or print "
        "warnings, and recent PyTorch warns about it.",
        "Call dist.destroy_process_group() when training ends (in a finally: block).",
    ),
]

RULES_BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}


def parse_codes(text: str | None, option: str) -> set[str] | None:
    """Turn `--select DDL001,DDL003` (codes or prefixes like `DDL00`) into a set of codes."""
    if text is None:
        return None
    codes: set[str] = set()
    for part in text.replace(" ", ",").split(","):
        part = part.strip().upper()
        if not part:
            continue
        matched = {r.code for r in RULES if r.code.startswith(part)}
        if not matched:
            known = ", ".join(r.code for r in RULES)
            raise UsageError(f"{option}: unknown rule code {part!r} (known: {known})")
        codes |= matched
    if not codes and option == "--select":
        raise UsageError(f"{option}: no rule code given (selecting nothing would always pass)")
    return codes
