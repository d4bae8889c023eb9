"""Many nodes for real on this 2-core machine: 4 `ddpdoctor check` invocations as 4 nodes (own
hostnames, over loopback) of 2 ranks each (8 nodes took 55 s of CI's budget and showed nothing
more). The joined report on node-00 covers all 8 ranks and groups the 4 hosts into one row;
every rank but 0 received 24 bytes per exchange, and rank 0 exactly what the 7 others sent."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from cluster import Node, job_view, require_uts, wait_all

from ddpdoctor.runfiles import RunFolder

pytestmark = pytest.mark.slow
NODES, PER_NODE = 4, 2


def test_four_nodes_of_two_ranks(tmp_path: Path) -> None:
    require_uts()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nodes = [Node(f"node-{i:02d}") for i in range(NODES)]
    for i, node in enumerate(nodes):
        node.start(
            [
                "check",
                "--nnodes",
                str(NODES),
                "--node-rank",
                str(i),
                "--nproc",
                str(PER_NODE),
                "--master-addr",
                "127.0.0.1",
                "--master-port",
                str(port),
                "--timeout",
                "60",
                "--only",
                "env,process_group,sampler",
                "--ascii",
            ],
            tmp_path,
            hosts={n.name: "127.0.0.1" for n in nodes},
        )
    reports = wait_all(nodes, timeout=400)
    full = job_view(reports)
    n = NODES * PER_NODE
    assert full["status"] in ("pass", "warn"), nodes[0].stdout
    assert (full["world_size"], full["nnodes"]) == (n, NODES)
    assert [r["state"] for r in full["ranks"]] == ["ok"] * n
    assert sorted({r["host"] for r in full["ranks"]}) == [x.name for x in nodes]
    sampler = next(c for c in full["checks"] if c["id"] == "sampler")
    assert sampler["status"] == "pass" and sorted(map(int, sampler["ranks"])) == list(range(n))
    # the host table groups the 8 identical nodes into one row
    rows = [line for line in nodes[0].stdout.splitlines() if "node-" in line and "| " in line]
    assert len(rows) == 1 and "node-[00-03]" in rows[0] and "| 0-7 " in rows[0], nodes[0].stdout
    received = {}
    for node in nodes:
        for r, doc in RunFolder(node.run_dir).read_ranks().items():
            received[r] = doc.exchange_bytes
    assert sorted(received) == list(range(n))
    assert {b["received"] for r, b in received.items() if r != 0} == {3 * 24}
    # the others all send the same padded size S (24 + the longest document, per exchange)
    (sent,) = {b["sent"] for r, b in received.items() if r != 0}
    assert received[0]["received"] == 3 * 24 + (n - 1) * (sent - 3 * 24)
