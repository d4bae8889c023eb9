"""Cluster bring-up for real: four "nodes" in network namespaces on a bridge (tests/integration/
cluster.py), one `ddpdoctor check` per node with a static rendezvous on node-a. node-c is never
started (its namespace is up and answers, nothing listens); node-d's link is cut before the start
(`ip link set ... down` on the bridge side), so it never reaches anyone. One launch of the three
live nodes serves every assertion: the nodes that never joined are named within the rendezvous
deadline, `--localize` tells the node that is not running from the node that is cut off, and each
node writes the exclude file `srun --exclude` takes. The namespaces and every process in them are
removed afterwards, also when an assertion fails (Cluster.__exit__)."""

from __future__ import annotations

import time
from typing import Any

import jsonschema
import pytest
from cluster import Cluster, require_netns

from ddpdoctor.report import schema

pytestmark = pytest.mark.slow

RDZV_TIMEOUT = 15  # torchrun itself takes up to ~7 s to start here under load
PROBE_TIMEOUT = 5  # --timeout: each phase of the pair probe


@pytest.fixture(scope="module")
def bringup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_netns()
    tmp = tmp_path_factory.mktemp("bringup")
    out: dict[str, Any] = {"reports": {}, "exclude": {}, "stdout": {}, "rc": {}, "wall": {}}
    with Cluster(4) as c:
        c.cut(3)
        hosts = ",".join(n.name for n in c.nodes)
        started = time.monotonic()
        live = [c.nodes[0], c.nodes[1], c.nodes[3]]
        for node in live:
            rank = c.nodes.index(node)
            node.start(
                [
                    "check",
                    "--nnodes",
                    "4",
                    "--node-rank",
                    str(rank),
                    "--nproc",
                    "1",
                    "--master-addr",
                    "node-a",
                    "--master-port",
                    "29614",
                    "--hosts",
                    hosts,
                    "--rdzv-timeout",
                    str(RDZV_TIMEOUT),
                    "--timeout",
                    str(PROBE_TIMEOUT),
                    "--localize",
                    "--exclude-file",
                    str(tmp / f"exclude-{node.name}.txt"),
                ],
                tmp,
                hosts={n.name: n.ip for n in c.nodes},
            )
        for node in live:
            out["reports"][node.name] = node.wait(timeout=150)
            out["wall"][node.name] = time.monotonic() - started
            out["stdout"][node.name] = node.stdout
            out["rc"][node.name] = node.proc.returncode if node.proc else None
            path = tmp / f"exclude-{node.name}.txt"
            out["exclude"][node.name] = path.read_text() if path.exists() else None
    return out


def _row(report: dict[str, Any], row_id: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["id"] == row_id)


def test_the_nodes_that_never_joined_are_named_within_the_deadline(bringup) -> None:
    for name in ("node-a", "node-b"):
        report = bringup["reports"][name]
        assert report is not None, bringup["stdout"][name]
        jsonschema.validate(report, schema.schema_for("report"))
        (finding,) = _row(report, "process_group")["findings"]
        assert finding["code"] == "DDN191", bringup["stdout"][name]
        assert finding["message"] == (
            f"node-c,node-d never joined the rendezvous within {RDZV_TIMEOUT} s "
            "(--rdzv-timeout) (joined: node-a,node-b)"
        )
        assert report["root_cause"]["message"] == finding["message"]
        assert bringup["rc"][name] == 1
        # bounded: named at the rendezvous deadline (plus reading the store and the kill),
        # then at most the two phases of the probe
        probe_s = _row(report, "localize")["metrics"]["duration_s"]
        assert report["duration_s"] - probe_s < RDZV_TIMEOUT + 10
        assert probe_s < 2 * PROBE_TIMEOUT + 3
        assert bringup["wall"][name] < RDZV_TIMEOUT + 2 * PROBE_TIMEOUT + 40


def test_localize_tells_the_absent_node_from_the_cut_off_one(bringup) -> None:
    for name in ("node-a", "node-b"):
        row = _row(bringup["reports"][name], "localize")
        assert row["status"] == "fail"
        by_host = {f["host"]: f for f in row["findings"]}
        assert sorted(by_host) == ["node-c", "node-d"], row
        assert {f["code"] for f in row["findings"]} == {"DDN193"}
        assert "nothing listens" in by_host["node-c"]["message"]  # up, but not running
        assert "no route or no answer" in by_host["node-d"]["message"]  # its link is cut
        assert row["metrics"]["pairs"]["node-a,node-b"] == "ok"
        assert "Exclude: node-c,node-d (written to" in bringup["stdout"][name]


def test_the_cut_off_node_says_it_is_the_one(bringup) -> None:
    report = bringup["reports"]["node-d"]
    assert report is not None, bringup["stdout"]["node-d"]
    (store,) = _row(report, "process_group")["findings"]
    assert store["code"] == "DDN195"
    assert store["message"].startswith("node-d could not read the rendezvous store at node-a:29614")
    (self_named,) = _row(report, "localize")["findings"]
    assert self_named["code"] == "DDN193" and self_named["host"] == "node-d"
    assert "node-d (this node) reaches none of its 3 peers" in self_named["message"]
    assert bringup["rc"]["node-d"] == 1


def test_every_node_writes_the_exclude_file(bringup) -> None:
    assert bringup["exclude"]["node-a"] == "node-c,node-d\n"
    assert bringup["exclude"]["node-b"] == bringup["exclude"]["node-a"]
    assert bringup["exclude"]["node-d"] == "node-d\n"
