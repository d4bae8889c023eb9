"""The judges, fed with facts from a fake NVML (this machine has no GPU) and a fake InfiniBand
sysfs tree (no RDMA adapter here); each sick fact is named, a healthy node gives nothing."""

from __future__ import annotations

import re
import threading
import time

import pytest
from node_fakes import FakeNvml, fake_ib_port, healthy_gpu

from ddpdoctor.errors import UsageError
from ddpdoctor.node import expect, facts, gpu_health, health, host_health, nvml, rdma
from ddpdoctor.node.expect import Expectations
from ddpdoctor.node.host import HostFacts, XidLine
from ddpdoctor.node.perf import PerfResult

H100 = Expectations(gpu_count=8, gpu_model="H100")


def inv(*gpus: dict) -> nvml.GpuInventory:
    return nvml.inventory(lambda: FakeNvml(list(gpus)))


def seen(found) -> list[tuple[str, str, str]]:
    return [(f.code, f.level.word, f.message) for f in found]


def eight(**sick_gpu_3) -> nvml.GpuInventory:
    return inv(*[healthy_gpu(i, **(sick_gpu_3 if i == 3 else {})) for i in range(8)])


def test_a_healthy_fake_node_has_no_finding_at_all() -> None:
    """Fake NVML: eight healthy H100s; the judges must not cry wolf."""
    good = eight()
    node = facts.NodeFacts(
        node="gpu001",
        host=HostFacts(
            shm_total_bytes=64 << 30, memlock_soft_bytes=-1, governors={"performance": 96}
        ),
        gpus=good,
        versions={"torch": "2.13.0+cu128", "torch_cuda": "12.4", "nccl": "2.27.5"},
    )
    rows = health.judge(node, H100)
    assert [(r.id, r.status) for r in rows if r.findings] == []
    assert rows[0].summary == "8 × NVIDIA H100 80GB HBM3"
    assert rows[2].summary == "NVLink 144/144 active, PCIe gen5 x16"


def test_ecc_errors_are_named_with_the_gpu() -> None:
    """Fake NVML: GPU 3 has 2 volatile uncorrectable errors, GPU 5 only lifetime ones."""
    ecc3 = {"nvmlDeviceGetTotalEccErrors": lambda kind, counter: 2 if kind == 1 else 0}
    ecc5 = {
        "nvmlDeviceGetTotalEccErrors": lambda kind, counter: 4 if (kind, counter) == (1, 1) else 0
    }
    gpus = inv(*[healthy_gpu(i, **{3: ecc3, 5: ecc5}.get(i, {})) for i in range(8)])
    _summary, found = gpu_health.memory(gpus, None, H100)
    assert seen(found) == [
        (
            "DDN110",
            "fail",
            "GPU 3 (00000000:1B:00.0): 2 uncorrectable ECC errors since the driver loaded",
        ),
        ("DDN111", "warn", "GPU 5 (00000000:1D:00.0): 4 uncorrectable ECC errors in its lifetime"),
    ]
    assert found[0].data == {"gpu": 3, "count": 2}


def test_retired_pages_row_remapping_and_xid_from_the_kernel_log() -> None:
    """Fake NVML: GPU 3 with a pending remap and 12 retired pages; a fake kernel Xid 79."""
    gpus = eight(
        nvmlDeviceGetRemappedRows=(0, 1, 1, 0),
        nvmlDeviceGetRetiredPages=lambda cause: [0x1000] * 6,
    )
    xids = [
        XidLine("0000:1b:00", 79, "pid=77, GPU has fallen off the bus."),
        XidLine("0000:18:00", 13, "Graphics Exception"),
    ]
    _summary, found = gpu_health.memory(gpus, xids, H100)
    assert seen(found) == [
        ("DDN113", "fail", "GPU 3 (00000000:1B:00.0): 12 retired pages (limit 10)"),
        (
            "DDN114",
            "fail",
            "GPU 3 (00000000:1B:00.0): row remapping pending (1 rows from uncorrectable errors)",
        ),
        ("DDN116", "info", "GPU 0 (00000000:18:00.0): Xid 13: Graphics Exception"),
        ("DDN116", "fail", "GPU 3 (00000000:1B:00.0): Xid 79: pid=77, GPU has fallen off the bus."),
    ]


def test_nvlink_down_and_a_downgraded_pcie_link_are_named() -> None:
    """Fake NVML: GPU 3 has NVLink 5 down, 7 CRC errors on link 0, and trained at x8."""
    gpus = eight(
        nvmlDeviceGetNvLinkState=lambda link: 0 if link == 5 else (1 if link < 18 else None.bad),
        nvmlDeviceGetNvLinkErrorCounter=lambda link, c: 7 if (link, c) == (0, 2) else 0,
        nvmlDeviceGetCurrPcieLinkWidth=8,
    )
    summary, found = gpu_health.links(gpus, 0, None)
    assert seen(found) == [
        ("DDN120", "fail", "GPU 3 (00000000:1B:00.0): NVLink 5 down (17 of 18 active)"),
        ("DDN121", "warn", "GPU 3 (00000000:1B:00.0): NVLink errors: 7 crc flit"),
        ("DDN122", "fail", "GPU 3 (00000000:1B:00.0): PCIe x8, can run x16"),
    ]
    assert summary == "NVLink 143/144 active, PCIe gen5 x16, gen5 x8"


@pytest.mark.parametrize(("busy", "level"), [(97, "warn"), (0, "info")])
def test_a_lower_pcie_generation_counts_only_while_busy(busy: int, level: str) -> None:
    """Fake NVML: gen 3 of 5; idle GPUs lower it on purpose, busy ones must not."""
    from types import SimpleNamespace

    gpus = inv(
        healthy_gpu(
            0,
            nvmlDeviceGetCurrPcieLinkGeneration=3,
            nvmlDeviceGetUtilizationRates=SimpleNamespace(gpu=busy),
        )
    )
    _summary, found = gpu_health.links(gpus, 0, None)
    assert [(f.code, f.level.word) for f in found] == [("DDN123", level)]


def test_a_throttled_clock_is_named_with_its_reasons() -> None:
    """Fake NVML: GPU 3 held at 1100 MHz by a hardware slowdown (0x8) and the power cap (0x4)."""
    gpus = eight(
        nvmlDeviceGetCurrentClocksEventReasons=0x8 | 0x4, nvmlDeviceGetClockInfo=lambda c: 1100
    )
    _summary, found = gpu_health.clocks(gpus, H100)
    assert seen(found) == [
        (
            "DDN130",
            "fail",
            "GPU 3 (00000000:1B:00.0): clocks held down at 1100 of 1980 MHz: hardware slowdown, software power cap",
        ),
    ]


def test_temperature_power_persistence_and_mig() -> None:
    """Fake NVML: one GPU hot, capped at 500 W, persistence off and MIG on."""
    gpus = inv(
        healthy_gpu(
            0,
            nvmlDeviceGetTemperature=lambda s: 84,
            nvmlDeviceGetEnforcedPowerLimit=500_000,
            nvmlDeviceGetPersistenceMode=0,
            nvmlDeviceGetMigMode=(1, 1),
        )
    )
    _summary, found = gpu_health.clocks(gpus, H100)
    assert [f.code for f in found] == ["DDN131", "DDN132", "DDN133", "DDN134"]


def test_gpu_count_model_and_a_missing_nvml() -> None:
    """Fake NVML: 7 GPUs where 8 are expected."""
    _s, found = gpu_health.inventory(inv(*[healthy_gpu(i) for i in range(7)]), H100)
    assert seen(found) == [("DDN101", "fail", "7 GPUs, expected 8: 1 missing")]
    _s, found = gpu_health.inventory(inv(healthy_gpu(0)), Expectations(gpu_model="A100"))
    assert [f.code for f in found] == ["DDN103"]
    missing = nvml.GpuInventory(available=False, error="NVML unavailable: no driver")
    assert [f.code for f in gpu_health.inventory(missing, H100)[1]] == ["DDN102"]
    assert [f.level.word for f in gpu_health.inventory(missing, Expectations())[1]] == ["info"]


def test_fabric_manager_missing_on_an_nvswitch_node() -> None:
    _s, found = gpu_health.links(eight(), 4, False)
    assert seen(found) == [("DDN124", "fail", "4 NVSwitches but no nv-fabricmanager process")]


def test_versions_against_the_expectation_and_torch_cuda_against_the_driver() -> None:
    gpus = inv(healthy_gpu(0))  # fake NVML: driver 550.54.15, CUDA 12.4
    versions = {"torch": "2.13.0+cu128", "torch_cuda": "12.8", "nccl": "2.27.5"}
    _s, found = host_health.software(gpus, versions, Expectations(driver="550", nccl="2.21"))
    assert seen(found) == [
        ("DDN140", "fail", "nccl 2.27.5, expected 2.21"),
        ("DDN140", "fail", "torch is built for CUDA 12.8, the driver supports CUDA 12.4 at most"),
    ]


def test_rdma_port_down_and_rate(tmp_path) -> None:
    """Fake /sys/class/infiniband: one port down, one trained at 100 of 400 Gb/s."""
    fake_ib_port(str(tmp_path), "mlx5_0")
    fake_ib_port(str(tmp_path), "mlx5_1", state="1: DOWN", phys_state="3: Disabled")
    fake_ib_port(str(tmp_path), "mlx5_2", rate="100 Gb/sec (4X EDR)")
    summary, found = host_health.rdma(
        rdma.read_ports(str(tmp_path)), {}, None, Expectations(rdma_ports=3)
    )
    assert seen(found) == [
        ("DDN150", "fail", "mlx5_1/1 is DOWN (Disabled)"),
        ("DDN150", "fail", "2 active RDMA ports, expected 3"),
        ("DDN153", "warn", "mlx5_2/1 runs at 100 Gb/s, the others at 400 Gb/s"),
    ]
    assert summary == "2 of 3 ports active (100 Gb/s, 400 Gb/s)"


def test_a_flapping_port_is_caught_between_two_real_samples(tmp_path) -> None:
    """Fake sysfs tree, real sampling: link_downed grows while `gather` waits between samples."""
    root = str(tmp_path)
    fake_ib_port(root, "mlx5_0", link_downed=4)

    def flap() -> None:
        time.sleep(0.3)
        fake_ib_port(root, "mlx5_0", link_downed=6, symbol_error=31)

    t = threading.Thread(target=flap)
    t.start()
    opts = facts.GatherOptions(timeout_s=10, rdma_root=root, rdma_interval_s=1.0, run_perf=False)
    node = facts.gather(opts)
    t.join()
    assert node.rdma_growth == {"mlx5_0/1": {"link_downed": 2, "symbol_error": 31}}
    rows = {r.id: r for r in health.judge(node, Expectations())}
    assert [f.code for f in rows["rdma"].findings] == ["DDN151", "DDN152"]
    assert re.fullmatch(
        r"mlx5_0/1 went down 2 times in \d+\.\d s", rows["rdma"].findings[0].message
    )
    # and the host row knows this is an RDMA node: a finite ulimit -l matters here
    assert ("DDN161" in [f.code for f in rows["host"].findings]) == (
        node.host.memlock_soft_bytes != -1
    )


def test_host_settings() -> None:
    h = HostFacts(shm_total_bytes=64 << 20, memlock_soft_bytes=64 << 10, governors={"powersave": 4})
    summary, found = host_health.host(h, has_rdma=True)
    assert seen(found) == [
        ("DDN160", "warn", "/dev/shm is 64 MiB"),
        ("DDN161", "fail", "ulimit -l is 64 KiB on a node with RDMA ports"),
        ("DDN162", "warn", "CPU governor: 4 CPUs on powersave"),
    ]
    assert host_health.host(h, has_rdma=False)[1][1].code == "DDN162"


def test_speed_against_floors_and_against_the_other_gpus() -> None:
    results = [
        PerfResult(f"cuda:{i}", "H100", 650_000.0 if i != 2 else 300_000.0, 2900.0)
        for i in range(4)
    ]
    results.append(PerfResult("cpu", "2 threads", 20.0, 8.0))
    _s, found = host_health.speed(results, Expectations(gpu_gemm_tflops=500, cpu_copy_gbps=10))
    assert seen(found) == [
        ("DDN170", "fail", "cuda:2: GEMM 300 TFLOP/s, floor 500 TFLOP/s"),
        ("DDN171", "fail", "cpu: copy 8 GB/s, floor 10 GB/s"),
        ("DDN172", "fail", "cuda:2: GEMM at 0.46 of this node's median"),
    ]


def test_expect_files_pick_the_machine_type_and_reject_typos(tmp_path) -> None:
    toml = tmp_path / "cluster.toml"
    toml.write_text(
        'driver = "550"\ngpu_count = 8\n'
        '[machines.old]\nhosts = "gpu[001-004]"\ngpu_count = 4\n'
        '[machines.h200]\ngpu_model = "H200"\ngpu_gemm_tflops = 700\n'
    )
    assert expect.load(str(toml), "gpu003", "NVIDIA H100").gpu_count == 4
    h200 = expect.load(str(toml), "gpu100", "NVIDIA H200")
    assert (h200.machine, h200.gpu_count, h200.gpu_gemm_tflops, h200.driver) == (
        "h200",
        8,
        700,
        "550",
    )
    assert expect.load(str(toml), "cpu1", None).machine is None
    bad = tmp_path / "bad.json"
    bad.write_text('{"gpu_cout": 8}')
    with pytest.raises(UsageError, match="unknown key 'gpu_cout'"):
        expect.load(str(bad), "x", None)
    bad.write_text('{"gpu_count": "eight"}')
    with pytest.raises(UsageError, match="gpu_count must be a whole number"):
        expect.load(str(bad), "x", None)


def test_a_probe_that_hangs_is_named_and_the_rest_still_reports() -> None:
    """Fake NVML that never answers (as NVML does when a GPU fell off the bus)."""

    class Hung(FakeNvml):
        def device_count(self) -> int:
            time.sleep(30)
            return 0

    start = time.monotonic()
    opts = facts.GatherOptions(timeout_s=1.0, run_perf=False, nvml_factory=lambda: Hung([]))
    node = facts.gather(opts)
    assert time.monotonic() - start < 2.0
    assert node.unfinished == ["nvml", "versions"] or node.unfinished == ["nvml"]
    rows = {r.id: r for r in health.judge(node, Expectations())}
    assert rows["gpus"].status == "timeout"
    assert rows["gpus"].findings[-1].code == "DDN190"
    assert rows["host"].status != "timeout"


def test_a_probe_that_crashes_is_a_result_shown_in_its_row(monkeypatch) -> None:
    """A collector with a bug (here: reading the RDMA ports raises) is shown in its row; the
    other rows still report."""

    def boom(root: str) -> None:
        raise OSError("boom")

    monkeypatch.setattr(rdma, "read_ports", boom)
    node = facts.gather(facts.GatherOptions(timeout_s=10, run_perf=False))
    assert node.errors == {"rdma": "OSError: boom"} and node.unfinished == []
    rows = {r.id: r for r in health.judge(node, Expectations())}
    assert seen(rows["rdma"].findings) == [("DDN192", "warn", "rdma crashed: OSError: boom")]
    assert rows["rdma"].status == "warn" and rows["host"].status in ("pass", "warn")
