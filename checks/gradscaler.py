"""`gradscaler`: a tiny DDP model trained a few AMP steps with one GradScaler per process, in the
documented order (scale(loss).backward() → step → update), plus one step where one rank's loss
is inf. Gradient sync must carry the inf to every rank, so every rank skips that step; scales,
growth trackers and parameters must stay identical everywhere."""

from __future__ import annotations

import hashlib
from typing import Any

from ddpdoctor import registry
from ddpdoctor.report import problems
from ddpdoctor.report.model import Judgement, World
from ddpdoctor.report.ranks import ranks_txt

ID = "gradscaler"
TITLE = "GradScaler + DDP"
STAGE = registry.NEEDS_GROUP
# DDP's constructor imports torch._dynamo (about a second of CPU): import it while peers wait.
PRELOAD = ("torch._dynamo",)
COLLECTIVE = True
STEPS = 4
INF_STEP = 2


def _param_digest(model: Any) -> str:
    h = hashlib.sha1()
    for p in model.parameters():
        h.update(repr(p.detach().float().cpu().flatten().tolist()).encode())  # no numpy needed
    return h.hexdigest()[:12]


def _amp(device: Any) -> tuple[Any, Any] | None:
    """(dtype, GradScaler) for this device, or None where this torch has no AMP for it."""
    import torch

    kind = device.type
    dtype = torch.float16 if kind == "cuda" else torch.bfloat16
    try:
        scaler = torch.amp.GradScaler(kind, init_scale=2.0**10, growth_interval=2)
    except (AttributeError, TypeError, RuntimeError):
        return None
    return dtype, scaler


def run(ctx: Any) -> dict[str, Any]:
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    amp = _amp(ctx.device)
    if amp is None:
        return {"supported": False, "device": str(ctx.device)}
    dtype, scaler = amp
    ctx.phase("building a DDP model")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)
    ).to(ctx.device)
    ddp = DDP(
        model,
        device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
        process_group=ctx.group,
    )
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1234 + ctx.rank)
    inf_rank = 1 if ctx.world_size > 1 else 0
    steps = []
    for step in range(STEPS):
        ctx.phase(f"AMP step {step}")
        x = torch.randn(8, 16, generator=gen).to(ctx.device)
        y = torch.randn(8, 4, generator=gen).to(ctx.device)
        before = _param_digest(model)
        with torch.autocast(device_type=ctx.device.type, dtype=dtype):
            loss = torch.nn.functional.mse_loss(ddp(x).float(), y)
        if step == INF_STEP and ctx.rank == inf_rank and not ctx.fault("gradscaler-local-inf"):
            loss = loss * float("inf")  # overflow before backward: DDP's all_reduce spreads it
        scaler.scale(loss).backward()
        if step == INF_STEP and ctx.fault("gradscaler-local-inf"):
            # self-test: inf injected after gradient sync on this rank only (a per-rank grad hack)
            next(model.parameters()).grad.fill_(float("inf"))
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        tracker = getattr(scaler, "_growth_tracker", None)
        steps.append(
            {
                "scale": float(scaler.get_scale()),
                "growth_tracker": int(tracker.item()) if tracker is not None else None,
                "skipped": _param_digest(model) == before,
                "params": _param_digest(model),
            }
        )
    return {
        "supported": True,
        "dtype": str(dtype).replace("torch.", ""),
        "inf_step": INF_STEP,
        "inf_rank": inf_rank,
        "steps": steps,
    }


def judge(per_rank: dict[int, dict[str, Any]], world: World) -> Judgement:
    ran = {r: d for r, d in per_rank.items() if d.get("supported")}
    if not ran:
        return Judgement(
            summary="AMP not available on this device",
            findings=[
                problems.AMP_UNSUPPORTED.finding(
                    "this torch has no GradScaler for the device", sorted(per_rank)
                )
            ],
        )
    findings = []
    first = ran[min(ran)]
    nsteps = min(len(d["steps"]) for d in ran.values())
    for step in range(nsteps):
        scales = {r: d["steps"][step]["scale"] for r, d in ran.items()}
        if len(set(scales.values())) > 1:
            findings.append(
                problems.SCALE_DIVERGED.finding(
                    f"after step {step} the scale is {', '.join(f'{s:g} on rank {r}' for r, s in sorted(scales.items()))}",
                    sorted(ran),
                    step=step,
                )
            )
            break
    inf_step = first["inf_step"]
    stepped = sorted(r for r, d in ran.items() if not d["steps"][inf_step]["skipped"])
    if stepped:
        skipped = sorted(set(ran) - set(stepped))
        where = (
            f"skipped on {ranks_txt(skipped)} but applied on {ranks_txt(stepped)}"
            if skipped
            else "applied on every rank"
        )
        findings.append(
            problems.INF_STEP_NOT_SKIPPED.finding(
                f"the step with an inf gradient (step {inf_step}) was {where}; it must be skipped everywhere",
                stepped,
                step=inf_step,
            )
        )
    final = {r: d["steps"][nsteps - 1]["params"] for r, d in ran.items()}
    if len(set(final.values())) > 1:
        findings.append(
            problems.PARAMS_DIVERGED.finding(
                f"parameters differ across ranks after {nsteps} steps", sorted(ran)
            )
        )
    scale = first["steps"][nsteps - 1]["scale"]
    summary = (
        f"{first['dtype']} AMP, {nsteps} steps on {len(ran)} ranks, inf step skipped "
        f"{'everywhere' if not stepped else 'NOT everywhere'}, final scale {scale:g}"
        + ("" if not findings else " — ranks DIVERGED")
    )
    return Judgement(summary=summary, findings=findings, metrics={"final_scale": scale})
