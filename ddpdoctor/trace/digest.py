"""Bounded summaries of what a rank drew in one pass over a DataLoader: an order digest (same
sequence?), a set digest (same samples, in any order?) and a bottom-k sketch of the distinct items
(how much do ranks overlap, how much of the dataset did they cover?). Memory stays at `k` items
however large the epoch; below `k` distinct items every figure is exact. Pure Python."""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable
from typing import Any

MASK = (1 << 64) - 1
SKETCH_K = 512


def mix64(x: int) -> int:
    """splitmix64's finaliser: a cheap, well-spread 64-bit hash of an int."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


try:  # optional: torch does not require numpy
    import numpy as _np
except ImportError:  # pragma: no cover - the pure-Python path gives the same figures
    _np = None


def _mix64_array(items: list[int]) -> Any:
    """mix64 over a batch, in uint64 arithmetic (wraps like the & MASK of the scalar form)."""
    a = _np.array(items, dtype=_np.uint64)
    with _np.errstate(over="ignore"):
        a = a + _np.uint64(0x9E3779B97F4A7C15)
        a = (a ^ (a >> _np.uint64(30))) * _np.uint64(0xBF58476D1CE4E5B9)
        a = (a ^ (a >> _np.uint64(27))) * _np.uint64(0x94D049BB133111EB)
        a = a ^ (a >> _np.uint64(31))
    return a.astype("<u8", copy=False)


class ItemSketch:
    """Feed items (sample indices, or batch fingerprints as ints) one by one."""

    __slots__ = ("_heap", "_members", "_order", "count", "_set_sum", "k")

    def __init__(self, k: int = SKETCH_K) -> None:
        self.k = k
        self.count = 0
        self._order = hashlib.blake2b(digest_size=8)
        self._set_sum = 0
        self._heap: list[int] = []  # max-heap (negated) of the k smallest hashes
        self._members: set[int] = set()

    def add(self, item: int) -> None:
        h = mix64(item)
        self.count += 1
        self._order.update(h.to_bytes(8, "little"))
        self._set_sum = (self._set_sum + h) & MASK
        if h in self._members:
            return
        if len(self._heap) < self.k:
            heapq.heappush(self._heap, -h)
            self._members.add(h)
        elif h < -self._heap[0]:
            self._members.discard(-heapq.heappushpop(self._heap, -h))
            self._members.add(h)

    def add_many(self, items: Iterable[int]) -> None:
        """A batch at once: hashed in one vector operation when numpy is there (the tracer's
        main cost per step otherwise), one digest update, the heap only below its top."""
        items = list(items)
        if not items:
            return
        if _np is not None and min(items) >= 0:
            a = _mix64_array(items)
            self._order.update(a.tobytes())
            self._set_sum = (self._set_sum + int(a.sum(dtype=_np.uint64))) & MASK
            full = len(self._heap) >= self.k
            hs = a[a < _np.uint64(-self._heap[0])].tolist() if full else a.tolist()
        else:
            hs = [mix64(i) for i in items]
            self._order.update(b"".join(h.to_bytes(8, "little") for h in hs))
            self._set_sum = (self._set_sum + sum(hs)) & MASK
        self.count += len(items)
        heap, members, k = self._heap, self._members, self.k
        for h in hs:
            if h in members:
                continue
            if len(heap) < k:
                heapq.heappush(heap, -h)
                members.add(h)
            elif h < -heap[0]:
                members.discard(-heapq.heappushpop(heap, -h))
                members.add(h)

    @property
    def order_digest(self) -> str:
        return self._order.hexdigest()

    @property
    def set_digest(self) -> str:
        return f"{self._set_sum:016x}:{self.count}"

    def sketch(self) -> list[int]:
        return sorted(-h for h in self._heap)


def distinct_estimate(sketch: list[int], k: int = SKETCH_K) -> float:
    """Distinct items behind a bottom-k sketch: exact while it holds fewer than k hashes."""
    if len(sketch) < k:
        return float(len(sketch))
    kth = sketch[k - 1] / float(MASK)
    return (k - 1) / kth if kth > 0 else float(len(sketch))


def union(sketches: Iterable[list[int]], k: int = SKETCH_K) -> list[int]:
    """The bottom-k sketch of the union of the sets behind several sketches."""
    return sorted(set().union(*map(set, sketches)))[:k]


def overlap_share(a: list[int], b: list[int], k: int = SKETCH_K) -> float:
    """Estimated share of b's distinct items that a holds too (Jaccard scaled by sizes)."""
    both = union([a, b], k)
    if not both:
        return 0.0
    sa, sb = set(a), set(b)
    inter = sum(1 for h in both if h in sa and h in sb)
    jaccard = inter / len(both)
    na, nb = distinct_estimate(a, k), distinct_estimate(b, k)
    if nb == 0:
        return 0.0
    return min(1.0, jaccard * (na + nb) / (1.0 + jaccard) / nb)


def seq_digest(parts: Iterable[str]) -> str:
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()
