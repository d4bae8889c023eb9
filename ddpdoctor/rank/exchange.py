"""Exchanging small JSON documents between ranks over a gloo group, without pickle and without
numpy: torch's *_object collectives need numpy on some builds (the CPU wheel does not install it),
and the doctor must not depend on more than torch itself."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

# (this rank's document, world size, group) -> every rank's document in rank order
Gather = Callable[[Any, int, Any], list[Any]]


def all_gather_json(obj: Any, world_size: int, group: Any) -> list[Any]:
    """Every rank's `obj`, in rank order: lengths first, then the padded UTF-8 bytes."""
    import torch
    import torch.distributed as dist

    data = json.dumps(obj, default=str).encode()
    length = torch.tensor([len(data)], dtype=torch.int64)
    lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(world_size)]
    dist.all_gather(lengths, length, group=group)
    longest = max(int(n.item()) for n in lengths)
    mine = torch.zeros(longest, dtype=torch.uint8)
    if data:
        mine[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    buffers = [torch.zeros(longest, dtype=torch.uint8) for _ in range(world_size)]
    dist.all_gather(buffers, mine, group=group)
    return [
        json.loads(bytes(b[: int(n.item())].tolist()).decode())
        for b, n in zip(buffers, lengths, strict=True)
    ]
