"""Slurm-style host lists: `gpu[001-004,007]` both ways, so a report over 2,000 nodes names the
odd ones in one short string and the exclude file is what `srun --exclude` takes."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ddpdoctor.errors import UsageError

_TAIL_NUMBER = re.compile(r"^(.*?)(\d+)$")
_TOP_COMMA = re.compile(r",(?![^\[]*\])")


def _ranges(numbers: list[int], width: int) -> str:
    """[1,2,3,4,7] -> '001-004,007' (zero-padded to the width the hosts use)."""
    parts: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        a, b = f"{start:0{width}d}", f"{prev:0{width}d}"
        parts.append(a if start == prev else f"{a}-{b}")
        if n is not None:
            start = prev = n
    return ",".join(parts)


def compress_hostlist(hosts: Iterable[str]) -> str:
    """['gpu001', 'gpu002', 'gpu004'] -> 'gpu[001-002,004]'. Hosts that share a prefix and a
    number width fold together; names without a trailing number stay as they are."""
    families: dict[tuple[str, int], set[int]] = {}
    plain: set[str] = set()
    for host in hosts:
        m = _TAIL_NUMBER.match(host)
        if m is None:
            plain.add(host)
            continue
        prefix, digits = m.groups()
        families.setdefault((prefix, len(digits)), set()).add(int(digits))
    items: list[tuple[str, str]] = [(h, h) for h in plain]
    for (prefix, width), numbers in families.items():
        ordered = sorted(numbers)
        if len(ordered) == 1:
            text = f"{prefix}{ordered[0]:0{width}d}"
        else:
            text = f"{prefix}[{_ranges(ordered, width)}]"
        items.append((f"{prefix}{ordered[0]:0{width}d}", text))
    return ",".join(text for _key, text in sorted(items))


def _expand_one(item: str) -> list[str]:
    m = re.search(r"\[([^\]]*)\]", item)
    if m is None:
        if "[" in item or "]" in item:
            raise UsageError(f"bad host list {item!r}: unbalanced brackets")
        return [item]
    head, tail = item[: m.start()], item[m.end() :]
    out: list[str] = []
    for part in m.group(1).split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise UsageError(f"bad host list {item!r}: {part!r} is not a number or a range")
        width = len(lo)
        end = int(hi) if hi else int(lo)
        if end < int(lo):
            raise UsageError(f"bad host list {item!r}: range {part!r} runs backwards")
        for n in range(int(lo), end + 1):
            out.extend(f"{head}{n:0{width}d}{rest}" for rest in _expand_one(tail))
    return out


def expand_hostlist(text: str) -> list[str]:
    """'gpu[001-002],cpu1' -> ['gpu001', 'gpu002', 'cpu1']; several brackets multiply
    ('rack[1-2]-n[3-4]'). Bad syntax is a usage error."""
    hosts: list[str] = []
    for item in _TOP_COMMA.split(text.strip()):
        if item.strip():
            hosts.extend(_expand_one(item.strip()))
    return list(dict.fromkeys(hosts))
