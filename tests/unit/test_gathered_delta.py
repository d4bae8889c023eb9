"""gathered.json stores each check's data once in full and, for every rank, only the values that
differ from a reference, grouped by the paths that differ: the round trip must give every rank
its own data back, whatever differs (values, nested keys, keys added or missing, a dict replaced
by a list), share the unchanged parts instead of copying, and still read version 1's files."""

from __future__ import annotations

import json

from ddpdoctor import rankdiff
from ddpdoctor.runfiles import CheckEntry, Gathered, Identity, Pulse


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
    odd["extra"] = {"$set": 1}  # data that looks like a delta syntax survives too
    odd["flag"] = 1  # not the same as True
    entries = {0: snap(0) | {"flag": True}, 1: snap(1), 2: odd, 3: snap(3), 4: {}}
    hosts = {0: "node-a", 1: "node-a", 2: "node-a", 3: "node-b", 4: "node-b"}
    g = Gathered(nonce="n", ranks={r: Identity(host=h, pid=r) for r, h in hosts.items()})
    g.checks["env"] = {
        r: CheckEntry(status="ok", data=d, duration_s=0.1 * r) for r, d in entries.items()
    }
    g.checks["failed"] = {0: CheckEntry(status="error", error="boom", phase="init")}
    g.checks["empty"] = {0: CheckEntry(status="ok"), 1: CheckEntry(status="skip", reason="r")}
    g.liveness = {4: Pulse(alive=False, pulses=3, phase="allreduce")}
    text = json.dumps(g.to_json())
    back = Gathered.from_json(json.loads(text))
    assert back.version == 2
    assert {r: e.data for r, e in back.checks["env"].items()} == entries
    assert type(back.checks["env"][2].data["flag"]) is int
    assert [e.duration_s for e in back.checks["env"].values()] == [0.1 * r for r in entries]
    assert back.checks["failed"][0].error == "boom" and back.checks["failed"][0].phase == "init"
    assert back.ranks == g.ranks and back.liveness == g.liveness
    assert [(e.status, e.reason, e.data) for e in back.checks["empty"].values()] == [
        ("ok", "", {}),
        ("skip", "r", {}),
    ]
    # what the ranks agree on is stored once and shared after reading
    assert text.count("mlx5") == 1 and text.count("node-b") == 1
    env = back.checks["env"]
    assert env[1].data["snapshot"]["network"] is env[0].data["snapshot"]["network"]


def test_the_rows_of_one_shape_share_their_paths() -> None:
    n = 64
    g = Gathered(ranks={r: Identity(host=f"n{r // 8}", pid=100 + r) for r in range(n)})
    g.checks["env"] = {r: CheckEntry(status="ok", data=snap(r)) for r in range(n)}
    doc = g.to_json()["checks"]["env"]
    # every rank but the base differs in the same two leaves: one group, two paths, n - 1 rows
    shapes = [(grp["set"], len(grp["rows"])) for grp in doc["groups"]]
    assert shapes == [
        ([], 1),
        ([["vars", "RANK"], ["snapshot", "cpu", "load"]], 7),
        (
            [["vars", "RANK"], ["snapshot", "cpu", "load"]],
            n - 8,
        ),
    ]
    rows = {row[0]: row for row in doc["groups"][2]["rows"]}
    assert rows[9][1] == 8 and rows[9][4:] == ["9", 9]  # against its host's first rank


def test_diff_is_what_differs() -> None:
    assert rankdiff.diff(snap(0), snap(0)) == (((), ()), [])
    shape, values = rankdiff.diff(snap(0), snap(5))
    assert shape == ((("vars", "RANK"), ("snapshot", "cpu", "load")), ())
    assert values == ["5", 5]
    plan = rankdiff.compile_shape(shape, offset=1)
    assert rankdiff.rebuild(snap(0), plan, ["x", *values]) == snap(5)
    smaller = snap(0)
    del smaller["vars"]["WORLD_SIZE"]
    shape, values = rankdiff.diff(snap(0), smaller)
    assert shape == ((), (("vars", "WORLD_SIZE"),))
    assert rankdiff.rebuild(snap(0), rankdiff.compile_shape(shape), values) == smaller


def test_version_1_files_are_still_read() -> None:
    v1 = {
        "version": 1,
        "nonce": "n",
        "bases": {"env": snap(0)},
        "checks": {
            "env": {
                "0": {"duration_s": 0.5, "data_delta": {}},
                "1": {
                    "delta_from": 0,
                    "data_delta": {"vars": {"RANK": "1", "NCCL_IB_HCA": {"$gone": True}}},
                },
                "2": {"status": "error", "error": "boom"},
            }
        },
        "ranks": {"1": {"host": "node-a", "pid": 7, "device": None}},
        "liveness": {"1": {"alive": True, "pulses": 2, "phase": None}},
    }
    back = Gathered.from_json(json.loads(json.dumps(v1)))
    want1 = snap(0)
    want1["vars"] = {"RANK": "1", "WORLD_SIZE": "3"}
    assert back.checks["env"][0].data == snap(0) and back.checks["env"][1].data == want1
    assert back.checks["env"][2].error == "boom" and back.checks["env"][2].data == {}
    assert back.ranks[1].pid == 7 and back.liveness[1].pulses == 2 and back.version == 1


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


def test_the_file_text_reuses_earlier_checks_and_sees_a_changed_one() -> None:
    g = Gathered(nonce="n", ranks={r: Identity(host=f"n{r // 2}") for r in range(4)})
    g.checks["env"] = {r: CheckEntry(status="ok", data=snap(r)) for r in range(4)}
    first = g.to_text()
    assert json.loads(first) == json.loads(json.dumps(g.to_json()))
    g.checks["later"] = {r: CheckEntry(status="ok", data={"v": r}) for r in range(4)}
    g.checks["env"][3] = CheckEntry(status="error", error="late news")  # a replaced entry
    g.ranks[2] = Identity(host="moved")  # and a rank whose host changed
    back = Gathered.from_json(json.loads(g.to_text()))
    assert back.checks["env"][3].error == "late news" and back.checks["later"][1].data == {"v": 1}
    assert back.ranks[2].host == "moved"
    assert json.loads(g.to_text()) == json.loads(json.dumps(g.to_json()))
