"""`envinfo.snapshot()`: never raises, fast, redacted, schema-valid; NCCL/gloo interface choice
as NCCL documents it; launcher detection; the /dev/shm warning.

There is no GPU or NVIDIA driver on the test machines, so the NVML part is tested with a fake
`pynvml` module injected through monkeypatch (the only faked piece; everything else is real).
"""

from __future__ import annotations

import subprocess
import sys
import types
from collections import namedtuple

import jsonschema
import pytest

from ddpdoctor.node import envinfo
from ddpdoctor.report.schema import schema_for
from ddpdoctor.triage.render import env_markdown
from ddpdoctor.triage.report import env_doc


def _fake_pynvml(count: int = 2, fail_topology: bool = False) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    Mem = namedtuple("Mem", "total free used")
    Pci = namedtuple("Pci", "busId")
    m.NVML_NVLINK_MAX_LINKS = 4
    m.nvmlInit = lambda: None
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: count
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    m.nvmlDeviceGetMemoryInfo = lambda h: Mem(80 << 30, 79 << 30, 1 << 30)
    m.nvmlDeviceGetPciInfo = lambda h: Pci(f"00000000:{h + 0x18:02X}:00.0".encode())

    def link_state(h: int, link: int) -> int:
        if link >= 3:
            raise RuntimeError("NVML_ERROR_INVALID_ARGUMENT")
        return 1 if link < 2 else 0

    def topo(a: int, b: int) -> int:
        if fail_topology:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 10

    m.nvmlDeviceGetNvLinkState = link_state
    m.nvmlDeviceGetTopologyCommonAncestor = topo
    m.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    m.nvmlSystemGetCudaDriverVersion = lambda: 12040
    return m


def test_nvml_with_fake_gpus(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    gpus = envinfo.snapshot()["gpus"]
    assert gpus["available"] and gpus["driver"] == "550.54.15"
    assert [d["pci_bus_id"] for d in gpus["devices"]] == ["00000000:18:00.0", "00000000:19:00.0"]
    assert gpus["devices"][0]["nvlink_active"] == 2 and gpus["devices"][0]["nvlink_links"] == 3
    assert gpus["topology"] == [["X", "PIX"], ["PIX", "X"]]
    assert "GPU 1" in env_markdown(env_doc(envinfo.snapshot()))


def test_nvml_partial_failure_is_unknown(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(fail_topology=True))
    gpus = envinfo.snapshot()["gpus"]
    assert gpus["available"] and gpus["topology"][0][1] == "unknown"


def test_nvml_missing_driver_is_not_a_crash(monkeypatch) -> None:
    broken = _fake_pynvml()

    def no_driver() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    broken.nvmlInit = no_driver
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    gpus = envinfo.snapshot()["gpus"]
    assert gpus["available"] is False and "Not Found" in gpus["error"]


def test_snapshot_is_schema_valid_and_redacted(monkeypatch) -> None:
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("NCCL_SECRET_THING", "hush")
    monkeypatch.setenv("TORCH_URL", "https://me:pw123456@x.example")
    doc = env_doc(envinfo.snapshot())
    jsonschema.validate(doc, schema_for("env"))
    assert doc["variables"]["NCCL_DEBUG"] == "INFO"
    assert doc["variables"]["NCCL_SECRET_THING"] == "<redacted>"
    assert "pw123456" not in str(doc)


def test_snapshot_does_not_import_torch_and_is_fast() -> None:
    code = (
        "import sys, time; from ddpdoctor.node import envinfo; envinfo.snapshot();"
        "t = time.perf_counter(); envinfo.snapshot(); dt = time.perf_counter() - t;"
        "print('torch' in sys.modules, dt)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imported, seconds = out.stdout.split()
    assert imported == "False"
    assert float(seconds) < 0.1


def test_snapshot_survives_every_probe_failing(monkeypatch) -> None:
    import psutil

    def boom(*a, **k):
        raise OSError("no /proc here")

    for name in ("net_if_addrs", "net_if_stats", "virtual_memory", "disk_usage", "cpu_count"):
        monkeypatch.setattr(psutil, name, boom)
    monkeypatch.setattr(envinfo.socket, "gethostname", boom)
    doc = env_doc(envinfo.snapshot())
    jsonschema.validate(doc, schema_for("env"))
    assert doc["memory"]["total_bytes"] is None and doc["shm"]["total_bytes"] is None
    assert "unknown" in env_markdown(doc)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, ["eth0", "ens5"]),  # default: skip lo and docker*
        ("eth", ["eth0"]),  # prefix
        ("^eth,docker", ["lo", "ens5"]),  # exclusion
        ("=ens", []),  # exact name: no interface is called "ens"
        ("=ens5", ["ens5"]),
        ("^=lo", ["eth0", "docker0", "ens5"]),
    ],
)
def test_nccl_interface_choice(spec: str | None, expected: list[str]) -> None:
    chosen, why = envinfo.nccl_interface_choice(["lo", "eth0", "docker0", "ens5"], spec)
    assert chosen == expected
    assert (spec or "default") in why


def test_nccl_prefers_infiniband_then_falls_back() -> None:
    assert envinfo.nccl_interface_choice(["lo", "eth0", "ib0"], None)[0] == ["ib0"]
    assert envinfo.nccl_interface_choice(["lo", "docker0"], None)[0] == ["docker0"]
    assert envinfo.nccl_interface_choice(["lo"], None)[0] == ["lo"]


def test_gloo_ifname_that_does_not_exist_is_reported() -> None:
    net = envinfo.interfaces({"GLOO_SOCKET_IFNAME": "nosuch0"})
    assert net["gloo"]["interfaces"] == [] and "missing here: nosuch0" in net["gloo"]["why"]


@pytest.mark.parametrize(
    ("env", "launcher", "scheduler"),
    [
        ({"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "2"}, "torchrun", None),
        ({"SLURM_JOB_ID": "12", "SLURM_PROCID": "3"}, "srun", "slurm"),
        ({"OMPI_COMM_WORLD_RANK": "1"}, "mpirun (Open MPI)", None),
        ({"PMI_RANK": "1", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "mpirun (PMI)", "kubernetes"),
        ({}, "none (plain python)", None),
    ],
)
def test_launcher_detection(env: dict, launcher: str, scheduler: str | None) -> None:
    got = envinfo.launcher(env)
    assert (got["launcher"], got["scheduler"]) == (launcher, scheduler)


def test_small_shm_warns_and_says_why(tmp_path, monkeypatch) -> None:
    import psutil

    Usage = namedtuple("Usage", "total used free percent")
    monkeypatch.setattr(psutil, "disk_usage", lambda p: Usage(64 << 20, 0, 64 << 20, 0.0))
    info = envinfo.shm()
    assert info["total_bytes"] == 64 << 20
    assert (
        "64 MiB" in info["warning"]
        and "DataLoader" in info["warning"]
        and "NCCL" in info["warning"]
    )
