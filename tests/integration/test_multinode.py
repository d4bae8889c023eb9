"""Multi-node for real on one machine: separate `ddpdoctor` invocations as nodes (each with its own
hostname), over loopback with static and c10d rendezvous, under Slurm's variables, and in network
namespaces where one link is slowed or cut."""

from __future__ import annotations

import json
import random
import socket
import time
from pathlib import Path

import jsonschema
import pytest
from cluster import Cluster, Node, job_view, require_netns, require_uts, wait_all

from ddpdoctor.report import schema

pytestmark = pytest.mark.slow


def free_port(lo: int = 0, hi: int = 0) -> int:
    """A free port; within [lo, hi) when asked (Slurm job ids map to 20000-39999)."""
    for port in [0] if not lo else random.sample(range(lo, hi), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise AssertionError("no free port")


def test_two_nodes_static_rendezvous(tmp_path: Path) -> None:
    require_uts()
    port = free_port()
    nodes = [Node("node-a"), Node("node-b")]
    for rank, node in enumerate(nodes):
        node.start(
            [
                "check",
                "--nnodes",
                "2",
                "--node-rank",
                str(rank),
                "--nproc",
                "1",
                "--master-addr",
                "127.0.0.1",
                "--master-port",
                str(port),
                "--timeout",
                "20",
            ],
            tmp_path,
        )
    reports = wait_all(nodes)
    full = job_view(reports)
    jsonschema.validate(full, schema.schema_for("report"))
    assert full["status"] == "pass", nodes[0].stdout
    assert (full["world_size"], full["nnodes"]) == (2, 2)
    assert [(r["rank"], r["host"], r["state"]) for r in full["ranks"]] == [
        (0, "node-a", "ok"),
        (1, "node-b", "ok"),
    ]
    assert [h["host"] for h in full["hosts"]] == ["node-a", "node-b"]
    assert all(h["versions"]["torch"] for h in full["hosts"])
    assert "Hosts" in nodes[0].stdout and "node-b" in nodes[0].stdout
    other = reports[1]
    assert other["launch"]["view"] == "node" and [r["rank"] for r in other["ranks"]] == [1]
    assert "the full report is printed on 127.0.0.1" in nodes[1].stdout


def test_three_nodes_c10d_rendezvous_flags_differences(tmp_path: Path) -> None:
    require_uts()
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = [Node(f"node-{c}") for c in "abc"]
    for i, node in enumerate(nodes):
        env = {"NCCL_IB_HCA": "mlx5_0"} if i < 2 else {"NCCL_IB_HCA": "mlx5_1"}
        node.start(
            [
                "check",
                "--nnodes",
                "3",
                "--nproc",
                "1",
                "--rdzv-endpoint",
                endpoint,
                "--rdzv-id",
                "t3",
                "--rdzv-backend",
                "c10d",
                "--timeout",
                "20",
                "--only",
                "env,process_group,allreduce",
            ],
            tmp_path,
            env=env,
            hosts={n.name: "127.0.0.1" for n in nodes},
        )
    reports = wait_all(nodes)
    full = job_view(reports)
    assert full["world_size"] == 3 and len(full["hosts"]) == 3
    assert {r["state"] for r in full["ranks"]} == {"ok"}
    env_findings = full["checks"][0]["findings"]
    assert [f["code"] for f in env_findings] == ["DDP109"]
    msg = env_findings[0]["message"]
    # c10d assigns ranks in arrival order: name the hosts, not the rank numbers
    assert msg.startswith("NCCL_IB_HCA differs: ") and "mlx5_1 on node-c (rank" in msg
    assert "mlx5_0 on node-a,node-b (ranks" in msg
    assert full["checks"][2]["status"] == "pass"  # allreduce across the three nodes


def test_slurm_variables_as_srun_sets_them(tmp_path: Path) -> None:
    require_uts()
    port = free_port(20000, 40000)
    job = {
        "SLURM_JOB_ID": str(port - 20000),
        "SLURM_NNODES": "2",
        "SLURM_NTASKS": "2",
        "SLURM_JOB_NODELIST": "localhost,localhost",
        "SLURM_PROCID": "0",
    }
    nodes = [Node("node-a"), Node("node-b")]
    for i, node in enumerate(nodes):
        node.start(
            ["check", "--nproc", "1", "--timeout", "20", "--only", "env,process_group"],
            tmp_path,
            env=job | {"SLURM_NODEID": str(i), "SLURM_PROCID": str(i)},
        )
    reports = wait_all(nodes)
    full = job_view(reports)
    assert full["status"] == "pass", nodes[0].stdout
    assert (full["world_size"], full["nnodes"]) == (2, 2)
    assert full["launch"]["master_port"] == port
    assert "--master-addr localhost" in " ".join(full["launch"]["command"])
    assert full["checks"][0]["ranks"]["1"]["vars"]["SLURM_NODEID"] == "1"


@pytest.mark.serial  # its verdict hangs on timing: one at a time
def test_pairs_names_the_slow_node(tmp_path: Path) -> None:
    require_netns()
    with Cluster(3) as c:
        c.slow(2)
        port = "29611"
        for i, node in enumerate(c.nodes):
            node.start(
                [
                    "bench-allreduce",
                    "--pairs",
                    "--nnodes",
                    "3",
                    "--node-rank",
                    str(i),
                    "--nproc",
                    "1",
                    "--master-addr",
                    c.nodes[0].ip,
                    "--master-port",
                    port,
                    "--max-bytes",
                    "1M",
                    "--iters",
                    "4",
                    "--warmup",
                    "1",
                    "--timeout",
                    "60",
                ],
                tmp_path,
                hosts={n.name: n.ip for n in c.nodes},
            )
        reports = wait_all(c.nodes)
    full = next(r for r in reports if r and r.get("units"))
    jsonschema.validate(full, schema.schema_for("bench"))
    assert full["units"] == ["node-a", "node-b", "node-c"]
    slow = {(p["a"], p["b"]): p["slow"] for p in full["pairs"]}
    assert slow == {
        ("node-a", "node-b"): False,
        ("node-a", "node-c"): True,
        ("node-b", "node-c"): True,
    }
    assert [f["code"] for f in full["findings"]] == ["DDP406"]
    assert full["findings"][0]["message"].startswith("node-c is slow to its peers")
    assert full["status"] == "fail"


@pytest.mark.serial  # its verdict hangs on timing: one at a time
def test_check_names_the_node_that_is_cut_off(tmp_path: Path) -> None:
    require_netns()
    timeout = 8
    with Cluster(3) as c:
        for i, node in enumerate(c.nodes):
            node.start(
                [
                    "check",
                    "--nnodes",
                    "3",
                    "--node-rank",
                    str(i),
                    "--nproc",
                    "1",
                    "--master-addr",
                    c.nodes[0].ip,
                    "--master-port",
                    "29612",
                    "--timeout",
                    str(timeout),
                ],
                tmp_path,
                hosts={n.name: n.ip for n in c.nodes},
            )
        deadline = time.monotonic() + 120
        while c.nodes[2].beat(2).get("check") != "allreduce":
            assert time.monotonic() < deadline, "node-c never reached allreduce"
            time.sleep(0.02)
        c.cut(2)
        cut_at = time.monotonic()
        first = c.nodes[0].wait(timeout=120)
        verdict_s = time.monotonic() - cut_at
        wait_all(c.nodes[1:])
    assert first is not None and first["status"] == "fail"
    seen = json.dumps({"ranks": first["ranks"], "root_cause": first["root_cause"]}, indent=1)
    cutoff = [r for r in first["ranks"] if r["host"] == "node-c"]
    assert cutoff and cutoff[0]["rank"] == 2 and cutoff[0]["state"] != "ok", seen
    assert cutoff[0]["state"] == "hung" and "cut off or stuck" in cutoff[0]["detail"], seen
    assert [r["state"] for r in first["ranks"] if r["host"] != "node-c"] == ["ok", "ok"], seen
    assert first["root_cause"]["rank"] == 2 and first["root_cause"]["host"] == "node-c", seen
    assert verdict_s < 2 * timeout + 15


def test_a_rank_of_another_job_on_the_same_store_is_named(tmp_path: Path) -> None:
    """Two different jobs pointed at one master port: job B's node joins job A's store and init
    'succeeds'. Their nonces differ (different options), and the report names the stranger."""
    require_uts()
    port = free_port()
    a, b = Node("node-a"), Node("node-b")
    common = [
        "check",
        "--nnodes",
        "2",
        "--nproc",
        "1",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(port),
        "--only",
        "env,process_group",
    ]
    a.start([*common, "--node-rank", "0", "--timeout", "20"], tmp_path)
    b.start([*common, "--node-rank", "1", "--timeout", "25"], tmp_path)  # another job's options
    full = job_view(wait_all([a, b]))
    finding = full["checks"][0]["findings"][0]
    assert finding["code"] == "DDP108" and finding["rank"] == 1
    assert finding["message"].startswith("rank 1 belongs to another ddpdoctor run")
    assert full["status"] == "fail"
