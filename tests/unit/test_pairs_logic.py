"""The pair schedule and the blame logic of `bench-allreduce --pairs`, on crafted bandwidths."""

from __future__ import annotations

from itertools import combinations

import pytest

from ddpdoctor.bench.pairs import blame, reference, rounds


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 17])
def test_rounds_cover_every_pair_once_in_disjoint_rounds(n: int) -> None:
    sched = rounds(n)
    assert len(sched) == (n - 1 if n % 2 == 0 else n)  # O(N) rounds
    seen = [p for r in sched for p in r]
    assert sorted(seen) == sorted(combinations(range(n), 2))
    for r in sched:
        units = [u for p in r for u in p]
        assert len(units) == len(set(units))  # a unit is in at most one pair per round


def pairs_of(bw: dict[tuple[str, str], float]) -> list[dict]:
    return [{"a": a, "b": b, "busbw_gbps": v, "ranks": []} for (a, b), v in bw.items()]


def test_one_slow_node_among_three() -> None:
    pairs = pairs_of({("a", "b"): 10.0, ("a", "c"): 1.0, ("b", "c"): 1.2})
    assert reference(["a", "b", "c"], pairs) == 10.0  # median of each unit's best: not dragged down
    assert blame(["a", "b", "c"], pairs, 0.7) == (["c"], [])


def test_slow_node_does_not_drag_its_peers_in() -> None:
    bw = {p: 10.0 for p in combinations("abcd", 2)}
    bw.update(
        {("a", "c"): 0.1, ("b", "c"): 0.1, ("c", "d"): 0.1, ("a", "b"): 7.5}
    )  # a-b: a little noisy
    assert blame(list("abcd"), pairs_of(bw), 0.7) == (["c"], [])


def test_one_slow_link_between_healthy_nodes() -> None:
    bw = {p: 10.0 for p in combinations("abcd", 2)}
    bw[("b", "d")] = 2.0
    slow_units, links = blame(list("abcd"), pairs_of(bw), 0.7)
    assert (slow_units, links) == ([], [("b", "d")])


def test_two_units_have_nothing_to_compare() -> None:
    assert blame(["a", "b"], pairs_of({("a", "b"): 0.001}), 0.7) == ([], [])
