"""gathered.json stores each check's data once in full and as deltas for the other ranks: the
round trip must give every rank its own data back, whatever differs (values, nested keys, keys
added or missing, a dict replaced by a list), and share the unchanged parts instead of copying."""

from __future__ import annotations

import json

from ddpdoctor.runfiles import CheckEntry, Gathered, Identity, delta, patch


def snap(rank: int) -> dict:
    return {
        "vars": {"RANK": str(rank), "WORLD_SIZE": "3", "NCCL_IB_HCA": "mlx5"},
        "snapshot": {"network": {"mtu": 4092, "nics": ["ib0", "ib1"]}, "cpu": {"load": rank}},
        "host": "node-a",
    }


def test_round_trip_keeps_each_rank_data() -> None:
    odd = snap(2)
    odd["vars"].pop("NCCL_IB_HCA")
    odd["snapshot"]["network"] = ["not", "a", "dict"]
    odd["extra"] = {"$set": 1}  # data that looks like the delta syntax survives too
    entries = {0: snap(0), 1: snap(1), 2: odd, 3: {}}
    g = Gathered(nonce="n", ranks={r: Identity(host="node-a", pid=r) for r in entries})
    g.checks["env"] = {
        r: CheckEntry(status="ok", data=d, duration_s=0.1) for r, d in entries.items()
    }
    g.checks["failed"] = {0: CheckEntry(status="error", error="boom")}
    g.checks["empty"] = {0: CheckEntry(status="ok"), 1: CheckEntry(status="skip", reason="r")}
    text = json.dumps(g.to_json())
    back = Gathered.from_json(json.loads(text))
    assert {r: e.data for r, e in back.checks["env"].items()} == entries
    assert back.checks["env"][1].duration_s == 0.1 and back.checks["failed"][0].error == "boom"
    assert back.ranks[2].pid == 2
    assert [(e.status, e.reason, e.data) for e in back.checks["empty"].values()] == [
        ("ok", "", {}),
        ("skip", "r", {}),
    ]
    # what ranks 0 and 1 agree on is stored once and shared after reading
    assert text.count("mlx5") == 1
    env = back.checks["env"]
    assert env[1].data["snapshot"]["network"] is env[0].data["snapshot"]["network"]


def test_delta_is_what_differs() -> None:
    assert delta(snap(0), snap(0)) == {}
    d = delta(snap(0), snap(5))
    assert d == {"vars": {"RANK": "5"}, "snapshot": {"cpu": {"load": 5}}}
    assert patch(snap(0), d) == snap(5)


def test_report_json_beyond_detail_ranks_keeps_statuses_compressed() -> None:
    from ddpdoctor.job import collect
    from ddpdoctor.report import problems

    n = collect.DETAIL_RANKS + 100
    entries = {r: CheckEntry(status="ok", data={"v": r}) for r in range(n)}
    entries[7] = CheckEntry(status="error", error="boom")
    named = [problems.CHECK_CRASHED.finding("odd", [300])]
    details = collect._rank_details(entries, named)
    assert sorted(details) == [7, 300] and details[300] == {"v": 300, "status": "ok"}
    assert collect._rank_status(entries) == {"ok": f"0-6,8-{n - 1}", "error": "7"}
    small = {r: entries[r] for r in range(4)}
    assert sorted(collect._rank_details(small, [])) == [0, 1, 2, 3]
    assert collect._rank_status(small) == {}
