"""How sizes read in every report, so bench tables, explain and env say them the same way."""

from __future__ import annotations


def human_bytes(n: float | None) -> str:
    """Powers of 1024, exact where the size is a whole number of units: 4 MiB, 1.5 KiB, 512 B;
    "unknown" when nothing could say."""
    if n is None:
        return "unknown"
    n = int(n)
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
