"""A cheap fingerprint of the replicas: per parameter and buffer, the sum and the L2 norm
(accumulated in float32, float64 for float64 tensors: 4-5x cheaper than float64 for everything),
fetched to the host in one transfer (one device sync per fingerprint). Identical replicas give
bit-identical figures; the judge compares them across ranks."""

from __future__ import annotations

from typing import Any


def named_tensors(modules: list[Any], optimizer: Any) -> list[tuple[str, Any]]:
    """The DDP-wrapped modules' parameters and buffers, or else the optimizer's parameters."""
    out: list[tuple[str, Any]] = []
    for i, module in enumerate(modules):
        prefix = f"{i}." if len(modules) > 1 else ""
        out += [(prefix + n, t) for n, t in module.named_parameters()]
        out += [(prefix + n, t) for n, t in module.named_buffers() if t.is_floating_point()]
    if not out and optimizer is not None:
        for g, group in enumerate(optimizer.param_groups):
            out += [(f"param_groups[{g}][{j}]", p) for j, p in enumerate(group["params"])]
    return out


def fingerprint(modules: list[Any], optimizer: Any) -> tuple[list[str], list[list[float]]]:
    import torch

    tensors = named_tensors(modules, optimizer)
    if not tensors:
        return [], []
    with torch.no_grad():
        stats = []
        for _, t in tensors:
            d = t.detach()
            acc = torch.float64 if d.dtype == torch.float64 else torch.float32
            stats.append(d.sum(dtype=acc))
            stats.append(torch.linalg.vector_norm(d, dtype=acc))
        try:
            flat = torch.stack(stats).tolist()  # one transfer
        except RuntimeError:  # tensors on several devices
            flat = [s.item() for s in stats]
    values = [[flat[2 * i], flat[2 * i + 1]] for i in range(len(tensors))]
    return [n for n, _ in tensors], values
