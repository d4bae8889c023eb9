"""torch.distributed: init/destroy order, DDP construction facts, and the sequence of the
collectives the script calls (op, dtype, shape, group), recorded and passed through."""

from __future__ import annotations

import os
from typing import Any

from ddpdoctor.trace import record as rec
from ddpdoctor.trace.patching import wrap
from ddpdoctor.trace.record import Collective
from ddpdoctor.trace.state import Tracer, site

# op -> position of the tensor that says what is exchanged (None: no tensor to describe)
COLLECTIVES: dict[str, int | None] = {
    "all_reduce": 0, "broadcast": 0, "reduce": 0, "all_gather": 1, "all_gather_into_tensor": 1,
    "reduce_scatter": 0, "reduce_scatter_tensor": 1, "gather": 0, "scatter": 0,
    "all_to_all_single": 1, "all_to_all": 0, "barrier": None, "monitored_barrier": None,
    "all_gather_object": None, "broadcast_object_list": None, "gather_object": None,
    "scatter_object_list": None,
}  # fmt: skip
_TENSOR_KW = {
    "all_gather": "tensor",
    "all_gather_into_tensor": "input_tensor",
    "reduce_scatter_tensor": "input",
}


def _describe(value: Any) -> tuple[str, list[int]]:
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    return (str(dtype).replace("torch.", "") if dtype is not None else "", list(shape or []))


def _group_name(group: Any, cache: dict[int, str]) -> str:
    if group is None:
        return "world"
    known = cache.get(id(group))
    if known is None:
        try:
            import torch.distributed as dist

            ranks = dist.get_process_group_ranks(group)
            known = "world" if len(ranks) == dist.get_world_size() else ",".join(map(str, ranks))
        except Exception:  # noqa: BLE001
            known = "?"
        cache[id(group)] = known
    return known


def install(tracer: Tracer) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    groups: dict[int, str] = {}

    def init_wrapper(original: Any) -> Any:
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            backend = kwargs.get("backend", args[0] if args else None)
            tracer.event(
                rec.INIT, site(), backend=str(backend) if backend is not None else None,
                init_method=kwargs.get("init_method"), rank=kwargs.get("rank"),
                world_size=kwargs.get("world_size"),
            )  # fmt: skip
            out = original(*args, **kwargs)
            with tracer.lock:
                tracer.record.backend = str(dist.get_backend())
                if kwargs.get("rank") is not None:  # a spawned worker names its own rank
                    tracer.record.rank = int(dist.get_rank())
                    tracer.record.world_size = int(dist.get_world_size())
            tracer.write()
            return out

        return init_process_group

    def destroy_wrapper(original: Any) -> Any:
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            if args or kwargs.get("group") is not None:
                return original(*args, **kwargs)  # a subgroup: not the end of the job
            after_barrier = (
                tracer.last_collective in ("barrier", "monitored_barrier")
                and tracer.last_collective_step == tracer.record.steps
            )
            tracer.event(rec.DESTROY, site(), after_barrier=after_barrier, stopping=tracer.stopping)
            tracer.flush_passes()
            tracer.write()  # gloo can abort the process inside destroy: keep everything first
            if tracer.stopping and dist.is_initialized():
                from ddpdoctor.trace.stopping import leave_group

                leave_group(tracer.record.backend, tracer.record.world_size, 30.0)
                return None
            return original(*args, **kwargs)

        return destroy_process_group

    def collective_wrapper(op: str, pos: int | None) -> Any:
        def make(original: Any) -> Any:
            def collective(*args: Any, **kwargs: Any) -> Any:
                where = site()
                if not dist.is_initialized():
                    tracer.event(rec.BEFORE_INIT, where, what="collective", op=op)
                else:
                    value = (
                        args[pos]
                        if pos is not None and len(args) > pos
                        else kwargs.get(_TENSOR_KW.get(op, "tensor"))
                    )
                    dtype, shape = _describe(value) if pos is not None else ("", [])
                    tracer.collective(
                        Collective(
                            op, dtype, shape, _group_name(kwargs.get("group"), groups), where
                        )
                    )
                return original(*args, **kwargs)

            return collective

        return make

    def ddp_wrapper(original: Any) -> Any:
        def __init__(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
            where = site()
            facts = _ddp_facts(module, args, kwargs)
            if not dist.is_initialized():
                tracer.event(rec.BEFORE_INIT, where, what="ddp")
            else:
                tracer.event(rec.DDP_BUILT, where, **facts)
            original(self, module, *args, **kwargs)
            tracer.ddp_modules.append(module)

        return __init__

    wrap(dist, "init_process_group", init_wrapper)
    wrap(dist, "destroy_process_group", destroy_wrapper)
    for op, pos in COLLECTIVES.items():
        if hasattr(dist, op):
            wrap(dist, op, collective_wrapper(op, pos))
    wrap(DistributedDataParallel, "__init__", ddp_wrapper)


def _ddp_facts(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """What decides whether DDP runs where the user thinks: devices on each side."""
    import torch

    def dev(d: Any) -> str | None:
        if d is None:
            return None
        if isinstance(d, int):
            return f"cuda:{d}"
        return str(torch.device(d))

    device_ids = kwargs.get("device_ids", args[0] if args else None)
    output_device = kwargs.get("output_device", args[1] if len(args) > 1 else None)
    params = sorted({str(p.device) for p in module.parameters()})
    current = None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        current = f"cuda:{torch.cuda.current_device()}"
    local = os.environ.get("LOCAL_RANK")
    return {
        "device_ids": [dev(d) for d in device_ids] if device_ids else None,
        "output_device": dev(output_device),
        "param_devices": params,
        "current_device": current,
        "local_rank": int(local) if local is not None and local.isdigit() else None,
        "find_unused_parameters": bool(kwargs.get("find_unused_parameters", False)),
        "broadcast_buffers": bool(kwargs.get("broadcast_buffers", True)),
    }
