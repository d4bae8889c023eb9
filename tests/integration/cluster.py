"""Several "nodes" on this machine for multi-node tests: one `ddpdoctor` invocation per node,
each with its own hostname (a UTS namespace via `unshare`), optionally each in its own network
namespace joined to the others by veth pairs through a bridge, so a link can be slowed
(`tc qdisc ... tbf`) or cut (`ip link set ... down`) for real. All traffic stays inside the
namespaces the test made; they are removed afterwards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

SUBNET = "10.213.7"  # addresses exist only inside this test's namespaces


def _ok(cmd: list[str]) -> bool:
    return subprocess.run(cmd, capture_output=True).returncode == 0


def require_uts() -> None:
    if shutil.which("unshare") is None or not _ok(["unshare", "--uts", "--mount", "true"]):
        pytest.skip("needs `unshare --uts --mount` (root) to give each node its own hostname")


def require_netns() -> None:
    require_uts()
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("needs root and iproute2 (ip, tc) for network namespaces")
    probe = f"ddpp{uuid.uuid4().hex[:6]}"
    if not _ok(["ip", "netns", "add", probe]):
        pytest.skip("network namespaces are not permitted here")
    _ok(["ip", "netns", "del", probe])


@dataclass
class Node:
    name: str
    netns: str | None = None
    ip: str = "127.0.0.1"
    ifname: str | None = None
    proc: subprocess.Popen | None = None
    json_path: Path | None = None
    run_dir: Path | None = None
    stdout: str = ""

    def start(
        self,
        args: list[str],
        tmp: Path,
        env: dict[str, str] | None = None,
        hosts: dict[str, str] | None = None,
    ) -> None:
        """Run `ddpdoctor ARGS` as this node: its own hostname, and an /etc/hosts (bind-mounted in
        a private mount namespace) that resolves every node's name, as a cluster's DNS would."""
        self.run_dir = tmp / f"run-{self.name}"
        self.json_path = tmp / f"{self.name}.json"
        hosts_file = tmp / f"hosts-{self.name}"
        lines = [
            "127.0.0.1 localhost",
            *(f"{ip} {name}" for name, ip in (hosts or {self.name: self.ip}).items()),
        ]
        hosts_file.write_text("\n".join(lines) + "\n")
        inner = [
            sys.executable,
            "-m",
            "ddpdoctor",
            *args,
            "--run-dir",
            str(self.run_dir),
            "--json",
            str(self.json_path),
        ]
        shell = (
            f"mount --bind {_quote(str(hosts_file))} /etc/hosts && hostname {self.name} && exec "
            + " ".join(_quote(a) for a in inner)
        )
        cmd = ["unshare", "--uts", "--mount", "sh", "-c", shell]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        full_env = {k: v for k, v in os.environ.items() if k != "DDPDOCTOR_FAULT"}
        if self.ifname:
            full_env["GLOO_SOCKET_IFNAME"] = self.ifname
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env
        )

    def wait(self, timeout: float = 240) -> dict[str, Any] | None:
        assert self.proc is not None
        self.stdout, _ = self.proc.communicate(timeout=timeout)
        if self.json_path and self.json_path.exists():
            return json.loads(self.json_path.read_text())
        return None

    def beat(self, rank: int) -> dict[str, Any]:
        try:
            return json.loads((self.run_dir / f"rank-{rank}.beat").read_text())  # type: ignore[operator]
        except (OSError, ValueError, TypeError):
            return {}


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


@dataclass
class Cluster:
    """n nodes in network namespaces on a bridge (in a hub namespace)."""

    n: int
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:5])
    nodes: list[Node] = field(default_factory=list)

    @property
    def hub(self) -> str:
        return f"ddph{self.tag}"

    def hub_if(self, i: int) -> str:
        return f"h{self.tag}{i}"

    def _ip(self, *args: str, ns: str | None = None) -> None:
        cmd = ["ip", *(["-n", ns] if ns else []), *args]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")

    def __enter__(self) -> Cluster:
        self._ip("netns", "add", self.hub)
        self._ip("link", "set", "lo", "up", ns=self.hub)
        self._ip("link", "add", "br0", "type", "bridge", ns=self.hub)
        self._ip("link", "set", "br0", "up", ns=self.hub)
        for i in range(self.n):
            ns, name = f"ddpn{self.tag}{i}", f"node-{chr(ord('a') + i)}"
            self._ip("netns", "add", ns)
            self._ip("link", "set", "lo", "up", ns=ns)
            self._ip(
                "link",
                "add",
                "eth0",
                "netns",
                ns,
                "type",
                "veth",
                "peer",
                "name",
                self.hub_if(i),
                "netns",
                self.hub,
            )
            self._ip("addr", "add", f"{SUBNET}.{i + 1}/24", "dev", "eth0", ns=ns)
            self._ip("link", "set", "eth0", "up", ns=ns)
            self._ip("link", "set", self.hub_if(i), "master", "br0", ns=self.hub)
            self._ip("link", "set", self.hub_if(i), "up", ns=self.hub)
            self.nodes.append(Node(name=name, netns=ns, ip=f"{SUBNET}.{i + 1}", ifname="eth0"))
        return self

    def slow(self, i: int, rate: str = "40mbit") -> None:
        """Throttle node i's link both ways (tbf: netem is not available here)."""
        for ns, dev in ((self.nodes[i].netns, "eth0"), (self.hub, self.hub_if(i))):
            r = subprocess.run(
                [
                    "tc",
                    "-n",
                    ns,
                    "qdisc",
                    "add",
                    "dev",
                    dev,
                    "root",
                    "tbf",
                    "rate",
                    rate,
                    "burst",
                    "32kbit",
                    "latency",
                    "400ms",
                ],
                capture_output=True,
                text=True,
            )
            if r.returncode != 0:
                pytest.skip(f"tc tbf not available: {r.stderr.strip()}")

    def block(self, i: int, j: int) -> None:
        """Cut only the path between nodes i and j: node i's replies to j are refused by a route
        (`unreachable`), so a connection fails both ways while both still reach everyone else."""
        self._ip("route", "add", "unreachable", f"{self.nodes[j].ip}/32", ns=self.nodes[i].netns)

    def cut(self, i: int) -> None:
        self._ip("link", "set", self.hub_if(i), "down", ns=self.hub)

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            if node.proc and node.proc.poll() is None:
                node.proc.kill()
                node.proc.wait()
        for ns in [n.netns for n in self.nodes] + [self.hub]:
            if ns:
                # processes left in a namespace would keep it alive: end them first
                pids = subprocess.run(
                    ["ip", "netns", "pids", ns], capture_output=True, text=True
                ).stdout.split()
                for pid in pids:
                    subprocess.run(["kill", "-9", pid], capture_output=True)
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def wait_all(nodes: list[Node], timeout: float = 240) -> list[dict[str, Any] | None]:
    deadline = time.monotonic() + timeout
    return [n.wait(max(1.0, deadline - time.monotonic())) for n in nodes]


def job_view(reports: list[dict[str, Any] | None]) -> dict[str, Any]:
    """The report of the node that ran rank 0 (its launch view is 'job')."""
    full = [r for r in reports if r and r["launch"].get("view") == "job"]
    assert len(full) == 1, [r and r["launch"].get("view") for r in reports]
    return full[0]
