"""Fake hardware for the node tests. This machine has no GPU and no RDMA adapter, so NVML and the
InfiniBand sysfs tree are faked here, and only those: everything else in the tests runs for real.

`FakeNvml` answers the probes of `ddpdoctor.node.nvml.NvmlSource` from plain values; a probe it
was not given raises, as NVML does for a query the board does not support.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NotSupported(Exception):
    """Stands for NVML_ERROR_NOT_SUPPORTED."""


def healthy_gpu(index: int = 0, **overrides: Any) -> dict[str, Any]:
    """An H100 SXM as NVML shows it on a good node (values a real one reports), busy, 18 NVLinks."""
    probes: dict[str, Any] = {
        "nvmlDeviceGetName": b"NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetUUID": f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd",
        "nvmlDeviceGetPciInfo": SimpleNamespace(busId=f"00000000:{0x18 + index:02X}:00.0"),
        "nvmlDeviceGetMemoryInfo": SimpleNamespace(total=85520809984, used=1 << 20),
        "nvmlDeviceGetUtilizationRates": SimpleNamespace(gpu=97),
        "nvmlDeviceGetEccMode": (1, 1),
        "nvmlDeviceGetTotalEccErrors": lambda kind, counter: 0,
        "nvmlDeviceGetRetiredPages": lambda cause: [],
        "nvmlDeviceGetRetiredPagesPendingStatus": 0,
        "nvmlDeviceGetRemappedRows": (0, 0, 0, 0),
        "nvmlDeviceGetNvLinkState": lambda link: _limit(link, 18, 1),
        "nvmlDeviceGetNvLinkErrorCounter": lambda link, counter: 0,
        "nvmlDeviceGetCurrPcieLinkGeneration": 5,
        "nvmlDeviceGetMaxPcieLinkGeneration": 5,
        "nvmlDeviceGetCurrPcieLinkWidth": 16,
        "nvmlDeviceGetMaxPcieLinkWidth": 16,
        "nvmlDeviceGetClockInfo": lambda clock: 1980,
        "nvmlDeviceGetMaxClockInfo": lambda clock: 1980,
        "nvmlDeviceGetCurrentClocksEventReasons": 0,
        "nvmlDeviceGetTemperature": lambda sensor: 41,
        "nvmlDeviceGetTemperatureThreshold": lambda kind: 87,
        "nvmlDeviceGetPowerUsage": 310_000,
        "nvmlDeviceGetEnforcedPowerLimit": 700_000,
        "nvmlDeviceGetPowerManagementDefaultLimit": 700_000,
        "nvmlDeviceGetPersistenceMode": 1,
        "nvmlDeviceGetMigMode": (0, 0),
    }
    probes.update(overrides)
    return probes


def _limit(link: int, count: int, value: Any) -> Any:
    if link >= count:
        raise NotSupported(f"link {link}")
    return value


@dataclass
class FakeNvml:
    """A fake `NvmlSource`: one dict of probes per GPU."""

    gpus: list[dict[str, Any]]
    system_probes: dict[str, Any] = field(
        default_factory=lambda: {
            "nvmlSystemGetDriverVersion": "550.54.15",
            "nvmlSystemGetCudaDriverVersion": 12040,
            "nvmlSystemGetNVMLVersion": "12.550.54.15",
        }
    )
    xids: list[tuple[int, int]] = field(default_factory=list)
    closed: bool = False

    def device_count(self) -> int:
        return len(self.gpus)

    def device(self, index: int, probe: str, *args: int) -> Any:
        if probe not in self.gpus[index]:
            raise NotSupported(probe)
        value = self.gpus[index][probe]
        return value(*args) if callable(value) else value

    def pair(self, a: int, b: int, probe: str) -> Any:
        return 10 if abs(a - b) == 1 else 50

    def system(self, probe: str) -> Any:
        if probe not in self.system_probes:
            raise NotSupported(probe)
        return self.system_probes[probe]

    def xid_events(self, seconds: float) -> list[tuple[int, int]]:
        return list(self.xids)

    def close(self) -> None:
        self.closed = True


def fake_ib_port(
    root: str,
    device: str = "mlx5_0",
    port: int = 1,
    state: str = "4: ACTIVE",
    phys_state: str = "5: LinkUp",
    rate: str = "400 Gb/sec (4X NDR)",
    **counters: int,
) -> str:
    """Write one port of a fake /sys/class/infiniband tree (no RDMA adapter on this machine)."""
    d = os.path.join(root, device, "ports", str(port))
    os.makedirs(os.path.join(d, "counters"), exist_ok=True)
    for name, text in (
        ("state", state),
        ("phys_state", phys_state),
        ("rate", rate),
        ("link_layer", "InfiniBand"),
    ):
        with open(os.path.join(d, name), "w") as fh:
            fh.write(text + "\n")
    values = {"link_downed": 0, "symbol_error": 0, "port_rcv_errors": 0, **counters}
    for name, value in values.items():
        with open(os.path.join(d, "counters", name), "w") as fh:
            fh.write(f"{value}\n")
    return d
