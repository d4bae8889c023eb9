"""Exchanging small JSON documents between ranks over a gloo group, without pickle and without
numpy: torch's *_object collectives need numpy on some builds (the CPU wheel does not install it),
and the doctor must not depend on more than torch itself.

After every check, `share_json` sends each rank's result once toward rank 0 (a gather) and agrees
on the one decision every rank must take the same way (did the check fail anywhere, and where)
with an all-reduce of three integers. A rank other than 0 therefore receives 24 bytes per check
whatever the world size; only rank 0 receives N documents. `all_gather_json` stays for the few
callers that need every rank's (tiny) document everywhere (bench's pair schedule)."""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A rank number larger than any world size: "no rank failed" in the MAX all-reduce below.
_NO_RANK = 1 << 40
_WORD = 8  # bytes of one int64


@dataclass
class Shared:
    """What one exchange gave this rank: every rank's document on rank 0 (None elsewhere), and the
    shared decision: the lowest and highest failed rank (None when none failed)."""

    docs: list[Any] | None
    first_failed: int | None
    last_failed: int | None
    sent: int = 0  # payload bytes this rank put on the wire in this exchange
    received: int = 0  # payload bytes it got back


# (this rank's document, it failed?, rank, world size, group) -> Shared
Exchange = Callable[[Any, bool, int, int, Any], Shared]


def _decision(failed: bool, rank: int) -> list[int]:
    """This rank's part of the MAX: [NO_RANK - lowest failed, highest failed + 1], zero when it did
    not fail, so a zero after the all-reduce means nobody failed."""
    return [_NO_RANK - rank if failed else 0, rank + 1 if failed else 0]


def share_json(obj: Any, failed: bool, rank: int, world_size: int, group: Any) -> Shared:
    """Rank 0 gets every rank's `obj` in rank order; every rank gets who failed. One all-reduce of
    3 int64 (the longest document, for the gather's equal-sized buffers, and the failed range),
    then a gather of the padded UTF-8 bytes to rank 0."""
    import torch
    import torch.distributed as dist

    data = json.dumps(obj, default=str).encode()
    head = torch.tensor([len(data), *_decision(failed, rank)], dtype=torch.int64)
    dist.all_reduce(head, op=dist.ReduceOp.MAX, group=group)
    longest, low, high = (int(v) for v in head.tolist())
    mine = torch.zeros(longest, dtype=torch.uint8)
    if data:
        mine[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    sent, received = 3 * _WORD, 3 * _WORD
    docs: list[Any] | None = None
    if rank == 0:
        buffers = [torch.zeros(longest, dtype=torch.uint8) for _ in range(world_size)]
        dist.gather(mine, gather_list=buffers, dst=0, group=group)
        received += longest * (world_size - 1)
        docs = [_decode(b) for b in buffers]
    else:
        dist.gather(mine, dst=0, group=group)
        sent += longest
    return Shared(
        docs=docs,
        first_failed=_NO_RANK - low if low else None,
        last_failed=high - 1 if high else None,
        sent=sent,
        received=received,
    )


def _decode(buf: Any) -> Any:
    """A padded buffer back to JSON: the document ends where the zero padding starts (UTF-8 JSON
    never contains a NUL byte). Read straight from the tensor's memory: `tolist()` costs a Python
    int per byte, and numpy may be absent."""
    raw = ctypes.string_at(buf.data_ptr(), buf.numel())
    return json.loads(raw.rstrip(b"\0").decode())


def all_gather_json(obj: Any, world_size: int, group: Any) -> list[Any]:
    """Every rank's `obj`, in rank order: lengths first, then the padded UTF-8 bytes. O(N) received
    per rank: only for tiny documents exchanged once."""
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
