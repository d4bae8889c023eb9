"""`--localize`: the verdict over pair results (pure), the probe for real over loopback
addresses (each "node" a thread listening on its own 127.0.0.x), and the bring-up options'
usage errors."""

from __future__ import annotations

import threading

import pytest

from ddpdoctor.errors import UsageError
from ddpdoctor.job import bringup, localize, reach
from ddpdoctor.job.plan import LaunchArgs
from ddpdoctor.job.reach import OK, REFUSED, UNREACHABLE, Probe

HOSTS = ["gpu001", "gpu002", "gpu003", "gpu004"]


def _codes(row) -> list[tuple[str, str | None]]:
    return [(f.code, f.host) for f in row.findings]


def test_a_node_no_healthy_node_reaches_is_named_and_excluded() -> None:
    rows = {
        "gpu001": {"gpu002": OK, "gpu003": UNREACHABLE, "gpu004": OK},
        "gpu002": {"gpu001": OK, "gpu003": UNREACHABLE, "gpu004": OK},
        "gpu004": {"gpu001": OK, "gpu002": OK, "gpu003": UNREACHABLE},
    }
    row, exclude = localize.judge(Probe("gpu001", HOSTS, rows))
    assert exclude == ["gpu003"]
    assert row.status == "fail"
    assert _codes(row) == [("DDN193", "gpu003")]
    assert row.findings[0].message.startswith(
        "gpu003 cannot be reached from gpu[001-002,004] (3 of 3 pairs failed: no route"
    )
    assert row.summary == (
        "4 nodes, 6 of 6 pairs seen from gpu001: 3 working, 3 failing; exclude gpu003"
    )


def test_a_dead_link_between_two_healthy_nodes_names_the_link_and_one_end() -> None:
    rows = {
        "gpu001": {"gpu002": OK, "gpu003": OK, "gpu004": OK},
        "gpu002": {"gpu001": OK, "gpu003": OK, "gpu004": UNREACHABLE},
        "gpu003": {"gpu001": OK, "gpu002": OK, "gpu004": OK},
        "gpu004": {"gpu001": OK, "gpu002": UNREACHABLE, "gpu003": OK},
    }
    row, exclude = localize.judge(Probe("gpu001", HOSTS, rows))
    assert _codes(row) == [("DDN194", "gpu004")]  # the later node of the pair is left out
    assert row.findings[0].data["link"] == ["gpu002", "gpu004"]
    assert exclude == ["gpu004"]


def test_the_node_that_reaches_nobody_names_itself() -> None:
    rows = {"gpu003": {"gpu001": UNREACHABLE, "gpu002": UNREACHABLE, "gpu004": UNREACHABLE}}
    row, exclude = localize.judge(Probe("gpu003", HOSTS, rows))
    assert exclude == ["gpu003"]
    assert _codes(row) == [("DDN193", "gpu003")]
    assert "this node" in row.findings[0].message


def test_refused_means_the_peer_is_up_but_not_running_the_probe() -> None:
    rows = {"gpu001": {"gpu002": REFUSED, "gpu003": UNREACHABLE, "gpu004": REFUSED}}
    row, exclude = localize.judge(Probe("gpu001", HOSTS, rows))
    assert exclude == ["gpu002", "gpu003", "gpu004"]
    assert "nothing listens" in row.findings[0].message


def test_two_nodes_that_cannot_meet_are_not_blamed_blindly() -> None:
    row, exclude = localize.judge(Probe("gpu001", HOSTS[:2], {"gpu001": {"gpu002": UNREACHABLE}}))
    assert exclude == []
    assert _codes(row) == [("DDN194", "gpu002")] and row.status == "fail"
    assert "cannot tell which end" in row.findings[0].message


def test_every_pair_working_passes() -> None:
    rows = {h: {p: OK for p in HOSTS if p != h} for h in HOSTS}
    row, exclude = localize.judge(Probe("gpu002", HOSTS, rows))
    assert (row.status, exclude, row.findings) == ("pass", [], [])


def test_a_pair_is_known_from_either_end() -> None:
    rows = {"a": {"b": UNREACHABLE}, "b": {"a": OK}}
    assert localize.pair_status(rows, "a", "b") == OK
    assert localize.pair_status(rows, "a", "c") is None


def test_the_probe_over_loopback_names_the_node_that_never_started() -> None:
    """Three 'nodes' on 127.0.0.1-3 (real sockets, one port, as on a cluster); the third never
    runs the probe, so the other two see its address refuse and agree on it."""
    hosts = ["node-a", "node-b", "node-c"]
    where = {"node-a": "127.0.0.1", "node-b": "127.0.0.2", "node-c": "127.0.0.3"}
    port = _free_port()
    results: dict[str, Probe] = {}

    def node(name: str) -> None:
        results[name] = reach.probe(
            name, hosts, port, "nonce1", deadline_s=2.0, bind=where[name], resolve=where
        )

    threads = [threading.Thread(target=node, args=(h,)) for h in hosts[:2]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=15)
    assert set(results) == {"node-a", "node-b"}
    for name in ("node-a", "node-b"):
        p = results[name]
        assert p.rows[name]["node-c"] == REFUSED
        other = "node-b" if name == "node-a" else "node-a"
        assert p.rows[name][other] == OK and p.rows[other]["node-c"] == REFUSED  # row shared
        row, exclude = localize.judge(p)
        assert exclude == ["node-c"] and _codes(row) == [("DDN193", "node-c")]
        assert p.duration_s < 2 * 2.0 + 2.5  # bounded: two phases and one connect timeout


def test_another_jobs_probe_is_ignored() -> None:
    port = _free_port()
    where = {"a": "127.0.0.1", "b": "127.0.0.2"}
    out: dict[str, Probe] = {}
    t = threading.Thread(
        target=lambda: out.setdefault(
            "b", reach.probe("b", ["a", "b"], port, "job-2", 1.0, bind="127.0.0.2", resolve=where)
        )
    )
    t.start()
    mine = reach.probe("a", ["a", "b"], port, "job-1", 1.0, bind="127.0.0.1", resolve=where)
    t.join(timeout=10)
    assert mine.rows["a"]["b"] != OK and out["b"].rows["b"]["a"] != OK


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hosts": "gpu[01-02]"}, "--hosts names the nodes of a multi-node job"),
        ({"hosts": "gpu[01-03]", "nnodes": 2}, "--hosts names 3 node(s) (gpu[01-03])"),
        ({"localize": True, "nnodes": 2}, "--localize probes the links"),
        ({"rdzv_timeout": 0.0, "nnodes": 2}, "--rdzv-timeout must be a positive number"),
        (
            {"localize": True, "nnodes": 2, "hosts": "gpu[01-02]"},
            "this node (elsewhere) is not in the host list gpu[01-02]",
        ),
    ],
)
def test_bring_up_options_are_usage_errors_before_anything_starts(kwargs, message) -> None:
    with pytest.raises(UsageError, match=None) as err:
        bringup.resolve(LaunchArgs(**kwargs), 29500, env={"SLURMD_NODENAME": "elsewhere"})
    assert str(err.value).startswith(message)


def test_hosts_come_from_the_slurm_step_and_the_node_rank_names_this_node() -> None:
    env = {"SLURM_STEP_NODELIST": "gpu[07-09]", "SLURM_JOB_NODELIST": "gpu[01-16]"}
    b = bringup.resolve(LaunchArgs(nnodes=3, node_rank=1, localize=True), 29500, env=env)
    assert (b.hosts, b.me, b.probe_port) == (["gpu07", "gpu08", "gpu09"], "gpu08", 29501)
    assert bringup.hosts_from_env({"SLURM_JOB_NODELIST": "gpu[01-16]"}, 3) == []


def test_when_every_node_runs_the_probe_it_ends_at_once_and_passes() -> None:
    """Every node probes after its run, also a healthy one: the phases end as soon as every
    peer has answered and sent its row, far before the deadline."""
    hosts = ["node-a", "node-b", "node-c"]
    where = {"node-a": "127.0.0.1", "node-b": "127.0.0.2", "node-c": "127.0.0.3"}
    port = _free_port()
    results: dict[str, Probe] = {}

    def node(name: str) -> None:
        results[name] = reach.probe(name, hosts, port, "n", 20.0, bind=where[name], resolve=where)

    threads = [threading.Thread(target=node, args=(h,)) for h in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for name, p in results.items():
        assert set(p.rows) == set(hosts), name  # every row reached every node
        row, exclude = localize.judge(p)
        assert (row.status, exclude) == ("pass", [])
        assert p.duration_s < 20.0  # did not wait for the deadline
