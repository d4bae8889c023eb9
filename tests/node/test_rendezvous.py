"""Naming the nodes that never joined a rendezvous: from torchrun's log lines (the text torch's
dynamic rendezvous writes, verbatim) and, for real, from the store of a torchrun that waits for
a second node that never comes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ddpdoctor.node import rendezvous
from ddpdoctor.node.rendezvous import Arrivals

LOG = """\
[INFO] 2026-12-01 10:00:01,398 dynamic_rendezvous: The node 'gpu001.cluster.local_21848_0' attempts to join the next round of the rendezvous 'job7'.
[INFO] 2026-12-01 10:00:01,512 dynamic_rendezvous: The node 'gpu002_3311_0' attempts to join the next round of the rendezvous 'job7'.
[INFO] 2026-12-01 10:00:02,101 dynamic_rendezvous: The node 'gpu001.cluster.local_21848_0' has joined round 0 of the rendezvous 'job7' as rank 0 in a world of size 3.
[INFO] 2026-12-01 10:00:02,377 dynamic_rendezvous: The node 'gpu009_77_0' attempts to join the next round of the rendezvous 'other-job'.
""".splitlines()


def test_hosts_from_log_lines_and_the_ones_that_never_came() -> None:
    seen = rendezvous.from_log(LOG, run_id="job7")
    assert seen == Arrivals(joined={"gpu001"}, waiting={"gpu002"})
    assert rendezvous.never_joined(["gpu001", "gpu002", "gpu003", "gpu004"], seen) == [
        "gpu003",
        "gpu004",
    ]
    (f,) = rendezvous.findings(["gpu001", "gpu003", "gpu004"], seen)
    assert (f.code, f.message) == (
        "DDN191",
        "gpu[003-004] never joined the rendezvous (joined: gpu001)",
    )
    assert rendezvous.findings(["gpu001"], seen) == []


def test_short_host_names() -> None:
    assert rendezvous.short_host("gpu001.cluster.local_4242_0") == "gpu001"
    assert rendezvous.short_host("node_a_12_3") == "node_a"
    assert rendezvous.short_host("plainhost") == "plainhost"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_store_of_a_waiting_torchrun_names_the_node_that_never_came(tmp_path) -> None:
    """A real torchrun (c10d rendezvous, 2 nodes expected, 1 started) waits; its store says
    who is there, so the missing node is named while the job cannot form."""
    port = _free_port()
    script = tmp_path / "noop.py"
    script.write_text("pass\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--nproc-per-node",
            "1",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"127.0.0.1:{port}",
            "--rdzv-id",
            "bringup",
            "--rdzv-conf",
            "join_timeout=20",
            str(script),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 15
        seen = None
        while time.monotonic() < deadline and not (seen and seen.joined):
            time.sleep(0.5)
            seen = rendezvous.read_store(f"127.0.0.1:{port}", "bringup", timeout_s=2)
        assert seen is not None, "the rendezvous store did not answer"
        me = socket.getfqdn().split(".")[0]
        assert seen.joined == {me}
        assert rendezvous.never_joined([me, "node-b"], seen) == ["node-b"]
        assert rendezvous.read_store(f"127.0.0.1:{port}", "no-such-run", timeout_s=0.5) is None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
