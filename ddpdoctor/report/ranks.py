"""Wording for groups of ranks and hosts, so every message names them the same way, and reads the
same at 2 ranks and at 16,384: ranges for ranks, Slurm host lists for hosts, and a count for
whatever is beyond a few items ("… and 4,070 more")."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from ddpdoctor.node.hostlist import compress_hostlist

MAX_PARTS = 12  # ranges or host-list items named before "… and N more"
MAX_GROUPS = 4  # distinct values named in a spread before "… and N more values"
MANY_HOSTS = 8  # a value's group with more hosts than this is counted, not listed


def capped(parts: list[str], more: int = 0, limit: int = MAX_PARTS, unit: str = "") -> str:
    """'a,b,c' or 'a,b,c,… and 1,234 more': at most `limit` parts, the rest counted (`more`
    adds items already left out by the caller)."""
    left = max(0, len(parts) - limit) + more
    shown = ",".join(parts[:limit])
    return f"{shown},… and {left:,} more{unit}" if left else shown


def fmt_ranks(ranks: Iterable[int], limit: int | None = MAX_PARTS) -> str:
    """[0, 1, 2, 5] -> '0-2,5'; beyond `limit` ranges, the ranks left out are counted."""
    rs = sorted(set(ranks))
    if len(rs) > 2 and rs[-1] - rs[0] == len(rs) - 1:
        return f"{rs[0]}-{rs[-1]}"  # one run, the usual case at scale: no walk
    parts: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        parts.append(
            str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}" if j > i + 1 else f"{rs[i]},{rs[j]}"
        )
        i = j + 1
    if limit is None or len(parts) <= limit:
        return ",".join(parts)
    named = sum(_width(p) for p in parts[:limit])
    return capped(parts, limit=limit, more=len(rs) - named - (len(parts) - limit))


def _width(part: str) -> int:
    """How many ranks one part of fmt_ranks names ('7' 1, '3,4' 2, '0-9' 10)."""
    if "," in part:
        return 2
    lo, _, hi = part.partition("-")
    return int(hi) - int(lo) + 1 if hi else 1


def plural(n: int, word: str) -> str:
    """'1 rank', '2 ranks', '3 passes'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}{'es' if word.endswith('s') else 's'}"


def group_by_value(values: Mapping[int, object]) -> dict[str, list[int]]:
    """{rank: value} -> {str(value): [ranks]}, in order of first rank."""
    groups: dict[str, list[int]] = defaultdict(list)
    for rank in sorted(values):
        groups[str(values[rank])].append(rank)
    return dict(groups)


def hosts_txt(hosts: Iterable[str]) -> str:
    """A Slurm host list ('node-[0003,0417-0418]'), capped like rank lists."""
    items = sorted(set(hosts))
    text = compress_hostlist(items)
    if len(items) <= MAX_PARTS or text.count(",") < MAX_PARTS:
        return text
    return f"{compress_hostlist(items[:MAX_PARTS])},… and {len(items) - MAX_PARTS:,} more"


def spread(values: Mapping[int, object], hosts: Mapping[int, str] | None = None) -> str:
    """'2.21.5 on 1,020 hosts (ranks 0-8159); 2.19.3 on node-[0417,0588] (ranks ...)': a group
    per value, the largest named by count, the odd ones by host list."""
    hosts = hosts or {}
    groups = group_by_value(values)
    parts = []
    for value, ranks in list(groups.items())[:MAX_GROUPS]:
        where = {hosts[r] for r in ranks if r in hosts}
        if len(where) > MANY_HOSTS:
            host_txt = f" on {len(where):,} hosts"
        else:
            host_txt = f" on {hosts_txt(where)}" if where else ""
        parts.append(f"{value}{host_txt} (rank{'s' if len(ranks) > 1 else ''} {fmt_ranks(ranks)})")
    if len(groups) > MAX_GROUPS:
        parts.append(f"… and {len(groups) - MAX_GROUPS:,} more values")
    return "; ".join(parts)


def ranks_txt(ranks: Iterable[int]) -> str:
    """'rank 3' or 'ranks 0,2,3'."""
    rs = set(ranks)
    return f"{'rank' if len(rs) == 1 else 'ranks'} {fmt_ranks(rs)}"


def by_host(per_rank: Mapping[int, Mapping[str, object]]) -> dict[str, list[int]]:
    """{host: [ranks]} from per-rank data that carries a "host", hosts sorted, ranks in order."""
    groups: dict[str, list[int]] = defaultdict(list)
    for rank in sorted(per_rank):
        groups[str(per_rank[rank].get("host", "?"))].append(rank)
    return dict(sorted(groups.items()))
