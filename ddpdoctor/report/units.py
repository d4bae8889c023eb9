"""How sizes read in every report, so bench tables, explain and env say them the same way."""

from __future__ import annotations


def human_bytes(n: int) -> str:
    """Powers of 1024, exact where the size is a whole number of units: 4 MiB, 1.5 KiB, 512 B."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
