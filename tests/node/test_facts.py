"""The collectors: the NVML wrapper over a fake NVML (no GPU on this machine), RDMA ports over a
fake sysfs tree (no RDMA adapter here), and the host facts for real."""

from __future__ import annotations

from node_fakes import FakeNvml, NotSupported, fake_ib_port, healthy_gpu

from ddpdoctor.node import host, nvml, rdma


def test_inventory_reads_every_fact_of_a_fake_gpu() -> None:
    inv = nvml.inventory(lambda: FakeNvml([healthy_gpu(0), healthy_gpu(1)]))
    assert inv.available and inv.driver == "550.54.15" and inv.cuda_driver == "12.4"
    g = inv.devices[1]
    assert (g.name, g.pci_bus_id) == ("NVIDIA H100 80GB HBM3", "00000000:19:00.0")
    assert (g.pcie_gen, g.pcie_gen_max, g.pcie_width, g.pcie_width_max) == (5, 5, 16, 16)
    assert len(g.nvlinks) == 18 and all(link.active for link in g.nvlinks)
    assert g.nvlinks[0].errors == {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}
    assert (g.power_w, g.power_limit_w, g.persistence, g.mig_enabled) == (310.0, 700.0, True, False)
    assert inv.topology == [["X", "PIX"], ["PIX", "X"]]


def test_a_probe_that_raises_gives_none_and_the_others_still_answer() -> None:
    """Fake NVML: an old board that supports neither row remapping nor ECC queries."""
    gpu = healthy_gpu()
    del gpu["nvmlDeviceGetRemappedRows"]
    gpu["nvmlDeviceGetTotalEccErrors"] = lambda kind, counter: (_ for _ in ()).throw(
        NotSupported("ecc")
    )
    g = nvml.inventory(lambda: FakeNvml([gpu])).devices[0]
    assert g.remap_pending is None and g.ecc_volatile_uncorrected is None
    assert g.temperature_c == 41 and g.sm_clock_mhz == 1980


def test_without_nvml_the_inventory_says_why_and_count_is_none() -> None:
    def no_driver() -> nvml.NvmlSource:
        raise RuntimeError("NVML Shared Library Not Found")

    inv = nvml.inventory(no_driver)
    assert not inv.available and inv.error == "NVML unavailable: NVML Shared Library Not Found"
    assert nvml.device_count(no_driver) is None
    # and for real on this machine (no GPU, no driver): unavailable, not an exception
    assert nvml.inventory().available is False


def test_count_and_lookup_by_uuid_serve_the_other_callers() -> None:
    fake = FakeNvml([healthy_gpu(0), healthy_gpu(1)])
    assert nvml.device_count(lambda: fake) == 2 and fake.closed
    found = nvml.device_by_uuid("00000001-aaaa-bbbb-cccc-dddddddddddd", lambda: fake)
    assert found is not None and found.index == 1
    assert nvml.device_by_uuid("GPU-nope", lambda: fake) is None


def test_rdma_ports_and_counter_growth_from_a_fake_sysfs_tree(tmp_path) -> None:
    """Fake /sys/class/infiniband: this machine has no RDMA adapter."""
    root = str(tmp_path)
    fake_ib_port(root, "mlx5_0", 1, link_downed=3)
    fake_ib_port(root, "mlx5_1", 1, state="1: DOWN", phys_state="3: Disabled")
    first = rdma.read_ports(root)
    assert [(p.name, p.state, p.phys_state, p.rate_gbps) for p in first] == [
        ("mlx5_0/1", "ACTIVE", "LinkUp", 400.0),
        ("mlx5_1/1", "DOWN", "Disabled", 400.0),
    ]
    fake_ib_port(root, "mlx5_0", 1, link_downed=5, symbol_error=7)
    assert rdma.deltas(first, rdma.read_ports(root)) == {
        "mlx5_0/1": {"link_downed": 2, "symbol_error": 7}
    }
    assert rdma.read_ports(str(tmp_path / "absent")) == []


def test_host_facts_for_real_and_xid_lines_from_a_log(tmp_path) -> None:
    facts = host.collect()
    assert facts.shm_total_bytes and facts.shm_total_bytes > 0
    assert facts.memlock_soft_bytes is not None and facts.cpu_count
    log = tmp_path / "kmsg"
    log.write_text(
        "6,1,2,-;usb 1-1: new device\n"
        "4,2,3,-;NVRM: Xid (PCI:0000:3B:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
    )
    assert host.kernel_xids(str(log)) == [
        host.XidLine("0000:3b:00", 79, "pid=1234, name=python, GPU has fallen off the bus.")
    ]
    assert host.kernel_xids(str(tmp_path / "none")) is None
    cpu = tmp_path / "cpu"
    for i, gov in enumerate(["performance", "powersave", "powersave"]):
        (cpu / f"cpu{i}" / "cpufreq").mkdir(parents=True)
        (cpu / f"cpu{i}" / "cpufreq" / "scaling_governor").write_text(gov + "\n")
    assert host.governors(str(cpu)) == {"performance": 1, "powersave": 2}


def test_the_cheap_inventory_serves_the_env_snapshot() -> None:
    """Fake NVML: what `ddpdoctor env` shows (names, memory, PCI bus, NVLinks up, topology)
    without the health counters."""
    inv = nvml.inventory(lambda: FakeNvml([healthy_gpu(0), healthy_gpu(1)]), health=False)
    g = inv.devices[0]
    assert (g.name, g.memory_total_bytes, g.pci_bus_id) == (
        "NVIDIA H100 80GB HBM3",
        85520809984,
        "00000000:18:00.0",
    )
    assert sum(link.active for link in g.nvlinks) == 18 and g.nvlinks[0].errors == {}
    assert g.ecc_volatile_uncorrected is None and g.temperature_c is None
    assert inv.topology == [["X", "PIX"], ["PIX", "X"]] and inv.driver == "550.54.15"


def test_the_real_source_fills_out_parameter_structs() -> None:
    """pynvml's fabric-info call fills a struct it is given; a stand-in for the pynvml module
    (no driver here) checks the real source passes one and reads its state."""
    import pynvml

    class StandIn:
        c_nvmlGpuFabricInfo_t = pynvml.c_nvmlGpuFabricInfo_t

        def nvmlDeviceGetGpuFabricInfo(self, handle: str, ref) -> int:
            assert handle == "handle-0"
            ref._obj.state = 3
            return 0

    src = nvml.PynvmlSource.__new__(nvml.PynvmlSource)  # skip nvmlInit: there is no driver
    src._nv, src._handles = StandIn(), {0: "handle-0"}
    g = nvml.device_facts(src, 0)
    assert g.fabric_state == "completed"
