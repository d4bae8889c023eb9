"""Wording for groups of ranks and hosts, so every message names them the same way."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping


def fmt_ranks(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    rs = sorted(set(ranks))
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
    return ",".join(parts)


def plural(n: int, word: str) -> str:
    """'1 rank', '2 ranks', '3 passes'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}{'es' if word.endswith('s') else 's'}"


def group_by_value(values: Mapping[int, object]) -> dict[str, list[int]]:
    """{rank: value} -> {str(value): [ranks]}, in order of first rank."""
    groups: dict[str, list[int]] = defaultdict(list)
    for rank in sorted(values):
        groups[str(values[rank])].append(rank)
    return dict(groups)


def spread(values: Mapping[int, object], hosts: Mapping[int, str] | None = None) -> str:
    """'2.21.5 on node-a,node-b (ranks 0-15); 2.19.3 on node-c (ranks 16-23)'."""
    hosts = hosts or {}
    parts = []
    for value, ranks in group_by_value(values).items():
        where = sorted({hosts[r] for r in ranks if r in hosts})
        host_txt = f" on {','.join(where)}" if where else ""
        parts.append(f"{value}{host_txt} (rank{'s' if len(ranks) > 1 else ''} {fmt_ranks(ranks)})")
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
