"""The project's one NVML wrapper: typed facts per GPU and per system, read through a small
`NvmlSource` so tests can fake the hardware this machine lacks.

Every probe is guarded: a GPU that does not support a query (NVML_ERROR_NOT_SUPPORTED on older
boards, MIG, vGPU) or a driver that cannot answer gives None for that fact, never an exception,
so one broken query cannot hide the others (torch's collect_env habit). Only the judges decide
what "unknown" means. pynvml is imported lazily: `ddpdoctor --help` must not pay for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

# NVML's enum values, spelled out so the fake and the real source agree without pynvml.
MEMORY_ERROR_CORRECTED, MEMORY_ERROR_UNCORRECTED = 0, 1
VOLATILE_ECC, AGGREGATE_ECC = 0, 1
RETIRED_SINGLE_BIT, RETIRED_DOUBLE_BIT = 0, 1
CLOCK_SM = 1
TEMPERATURE_GPU, TEMPERATURE_THRESHOLD_SLOWDOWN = 0, 1
NVLINK_MAX_LINKS = 18  # NVML allows more, but no shipped board has over 18 per GPU
NVLINK_COUNTERS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
FABRIC_STATES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}


# pynvml functions that take an out-parameter: probe -> the ctypes struct to pass.
_OUT_STRUCTS = {"nvmlDeviceGetGpuFabricInfo": "c_nvmlGpuFabricInfo_t"}


class NvmlSource(Protocol):
    """What the wrapper needs from NVML. Probes are pynvml's function names
    (`nvmlDeviceGetTotalEccErrors`); a probe that cannot answer raises any exception."""

    def device_count(self) -> int: ...

    def device(self, index: int, probe: str, *args: int) -> Any: ...

    def pair(self, a: int, b: int, probe: str) -> Any: ...

    def system(self, probe: str) -> Any: ...

    def xid_events(self, seconds: float) -> list[tuple[int, int]]: ...

    def close(self) -> None: ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PynvmlSource:
    """The real NVML through nvidia-ml-py. Construction initialises NVML (raises when it cannot:
    no driver, no libnvidia-ml); `close` shuts it down."""

    def __init__(self) -> None:
        import pynvml

        self._nv = pynvml
        pynvml.nvmlInit()
        self._handles: dict[int, Any] = {}

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._nv.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]

    def device_count(self) -> int:
        return int(self._nv.nvmlDeviceGetCount())

    def device(self, index: int, probe: str, *args: int) -> Any:
        if probe in _OUT_STRUCTS:  # the few calls that fill a struct instead of returning one
            import ctypes

            out = getattr(self._nv, _OUT_STRUCTS[probe])()
            getattr(self._nv, probe)(self._handle(index), ctypes.byref(out))
            return out
        return getattr(self._nv, probe)(self._handle(index), *args)

    def pair(self, a: int, b: int, probe: str) -> Any:
        return getattr(self._nv, probe)(self._handle(a), self._handle(b))

    def system(self, probe: str) -> Any:
        return getattr(self._nv, probe)()

    def xid_events(self, seconds: float) -> list[tuple[int, int]]:
        """Xids NVML raises while we listen (NVML keeps no history: the kernel log does)."""
        nv = self._nv
        events = nv.nvmlEventSetCreate()
        try:
            uuids = {}
            for i in range(self.device_count()):
                uuids[_text(nv.nvmlDeviceGetUUID(self._handle(i)))] = i
                _guard(  # a board without event support must not hide the others' Xids
                    lambda i=i: nv.nvmlDeviceRegisterEvents(
                        self._handle(i), nv.nvmlEventTypeXidCriticalError, events
                    )
                )
            found: list[tuple[int, int]] = []
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                try:
                    ev = nv.nvmlEventSetWait_v2(events, max(1, int(left * 1000)))
                except nv.NVMLError:  # NVML_ERROR_TIMEOUT: nothing happened in the window
                    break
                index = uuids.get(_text(nv.nvmlDeviceGetUUID(ev.device)), -1)
                found.append((index, int(ev.eventData)))
            return found
        finally:
            nv.nvmlEventSetFree(events)

    def close(self) -> None:
        self._nv.nvmlShutdown()


@dataclass
class NvLink:
    link: int
    active: bool | None
    errors: dict[str, int | None] = field(default_factory=dict)


@dataclass
class GpuFacts:
    """One GPU as NVML sees it; None = NVML could not say."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    utilization_pct: int | None = None
    ecc_enabled: bool | None = None
    ecc_pending: bool | None = None
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    retired_single_bit: int | None = None
    retired_double_bit: int | None = None
    retired_pending: bool | None = None
    remapped_correctable: int | None = None
    remapped_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    nvlinks: list[NvLink] = field(default_factory=list)
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    clock_event_reasons: int | None = None
    temperature_c: int | None = None
    temperature_slowdown_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    persistence: bool | None = None
    mig_enabled: bool | None = None
    mig_pending: bool | None = None
    fabric_state: str | None = None


@dataclass
class GpuInventory:
    """Every GPU of this node, the driver, and the topology between the GPUs."""

    available: bool
    error: str | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    nvml_version: str | None = None
    devices: list[GpuFacts] = field(default_factory=list)
    topology: list[list[str]] | None = None
    xid_events: list[tuple[int, int]] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _guard(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - a probe that cannot answer means "unknown"
        return None


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else round(int(milliwatts) / 1000, 1)


def _flag(value: Any) -> bool | None:
    return None if value is None else bool(int(value))


def _cuda_version(value: Any) -> str | None:
    """12040 -> '12.4' (NVML's encoding: 1000 * major + 10 * minor)."""
    if value is None:
        return None
    v = int(value)
    return f"{v // 1000}.{(v % 1000) // 10}"


def _links(src: NvmlSource, i: int, counters: bool) -> list[NvLink]:
    links = []
    for link in range(NVLINK_MAX_LINKS):
        state = _guard(lambda link=link: src.device(i, "nvmlDeviceGetNvLinkState", link))
        if state is None:
            break  # links are numbered densely: the first that does not answer ends the list
        errors = {
            name: _guard(
                lambda link=link, c=counter: int(
                    src.device(i, "nvmlDeviceGetNvLinkErrorCounter", link, c)
                )
            )
            for name, counter in (NVLINK_COUNTERS.items() if counters else ())
        }
        links.append(NvLink(link, bool(state), errors))
    return links


def _clock_events(src: NvmlSource, i: int) -> int | None:
    """The clock event ("throttle") reasons bit mask; the newer name first."""
    for probe in (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ):
        value = _guard(lambda probe=probe: int(src.device(i, probe)))
        if value is not None:
            return value
    return None


def device_facts(src: NvmlSource, i: int, health: bool = True) -> GpuFacts:
    """One GPU. health=False reads only what identifies it and its NVLink states (cheap: what
    `env` and every rank of `check` need)."""

    def q(probe: str, *args: int) -> Any:
        return _guard(lambda: src.device(i, probe, *args))

    mem = q("nvmlDeviceGetMemoryInfo")
    pci = q("nvmlDeviceGetPciInfo")
    g = GpuFacts(
        index=i,
        name=_guard(lambda: _text(src.device(i, "nvmlDeviceGetName"))),
        uuid=_guard(lambda: _text(src.device(i, "nvmlDeviceGetUUID"))),
        pci_bus_id=_guard(lambda: _text(pci.busId)),
        memory_total_bytes=getattr(mem, "total", None),
        memory_used_bytes=getattr(mem, "used", None),
    )
    g.nvlinks = _links(src, i, counters=health)
    if not health:
        return g
    g.utilization_pct = _guard(lambda: int(src.device(i, "nvmlDeviceGetUtilizationRates").gpu))
    ecc = q("nvmlDeviceGetEccMode")
    g.ecc_enabled = _guard(lambda: bool(ecc[0]))
    g.ecc_pending = _guard(lambda: bool(ecc[1]))
    for attr, kind, counter in (
        ("ecc_volatile_corrected", MEMORY_ERROR_CORRECTED, VOLATILE_ECC),
        ("ecc_volatile_uncorrected", MEMORY_ERROR_UNCORRECTED, VOLATILE_ECC),
        ("ecc_aggregate_corrected", MEMORY_ERROR_CORRECTED, AGGREGATE_ECC),
        ("ecc_aggregate_uncorrected", MEMORY_ERROR_UNCORRECTED, AGGREGATE_ECC),
    ):
        setattr(
            g, attr, _guard(lambda k=kind, c=counter: int(q("nvmlDeviceGetTotalEccErrors", k, c)))
        )
    g.retired_single_bit = _guard(lambda: len(q("nvmlDeviceGetRetiredPages", RETIRED_SINGLE_BIT)))
    g.retired_double_bit = _guard(lambda: len(q("nvmlDeviceGetRetiredPages", RETIRED_DOUBLE_BIT)))
    g.retired_pending = _flag(q("nvmlDeviceGetRetiredPagesPendingStatus"))
    rows = q("nvmlDeviceGetRemappedRows")  # (correctable, uncorrectable, pending, failed)
    if rows is not None:
        g.remapped_correctable, g.remapped_uncorrectable = int(rows[0]), int(rows[1])
        g.remap_pending, g.remap_failed = bool(rows[2]), bool(rows[3])
    g.pcie_gen = _guard(lambda: int(q("nvmlDeviceGetCurrPcieLinkGeneration")))
    g.pcie_gen_max = _guard(lambda: int(q("nvmlDeviceGetMaxPcieLinkGeneration")))
    g.pcie_width = _guard(lambda: int(q("nvmlDeviceGetCurrPcieLinkWidth")))
    g.pcie_width_max = _guard(lambda: int(q("nvmlDeviceGetMaxPcieLinkWidth")))
    g.sm_clock_mhz = _guard(lambda: int(q("nvmlDeviceGetClockInfo", CLOCK_SM)))
    g.sm_clock_max_mhz = _guard(lambda: int(q("nvmlDeviceGetMaxClockInfo", CLOCK_SM)))
    g.clock_event_reasons = _clock_events(src, i)
    g.temperature_c = _guard(lambda: int(q("nvmlDeviceGetTemperature", TEMPERATURE_GPU)))
    g.temperature_slowdown_c = _guard(
        lambda: int(q("nvmlDeviceGetTemperatureThreshold", TEMPERATURE_THRESHOLD_SLOWDOWN))
    )
    g.power_w = _watts(q("nvmlDeviceGetPowerUsage"))
    g.power_limit_w = _watts(q("nvmlDeviceGetEnforcedPowerLimit"))
    g.power_default_limit_w = _watts(q("nvmlDeviceGetPowerManagementDefaultLimit"))
    g.persistence = _flag(q("nvmlDeviceGetPersistenceMode"))
    mig = q("nvmlDeviceGetMigMode")
    g.mig_enabled = _guard(lambda: bool(mig[0]))
    g.mig_pending = _guard(lambda: bool(mig[1]))
    g.fabric_state = _guard(lambda: FABRIC_STATES.get(int(q("nvmlDeviceGetGpuFabricInfo").state)))
    return g


def _topology(src: NvmlSource, count: int) -> list[list[str]]:
    def level(a: int, b: int) -> str:
        if a == b:
            return "X"
        value = _guard(lambda: int(src.pair(a, b, "nvmlDeviceGetTopologyCommonAncestor")))
        return "unknown" if value is None else TOPOLOGY_LEVELS.get(value, "?")

    return [[level(a, b) for b in range(count)] for a in range(count)]


@contextmanager
def opened(
    factory: Callable[[], NvmlSource] | None = None,
) -> Iterator[tuple[NvmlSource | None, str | None]]:
    """(source, None) when NVML answers, else (None, why not); always shut down after."""
    try:
        src = (factory or PynvmlSource)()
    except ImportError:
        yield None, "pynvml not installed"
        return
    except Exception as e:  # noqa: BLE001 - no driver / no libnvidia-ml
        yield None, f"NVML unavailable: {_text(e) or type(e).__name__}"
        return
    try:
        yield src, None
    finally:
        _guard(src.close)


def inventory(
    factory: Callable[[], NvmlSource] | None = None,
    health: bool = True,
    topology: bool = True,
    xid_window_s: float = 0.0,
) -> GpuInventory:
    """Every GPU of this node. Never raises; `available=False` with the reason when NVML is
    absent. xid_window_s > 0 listens that long for Xid events."""
    with opened(factory) as (src, error):
        if src is None:
            return GpuInventory(available=False, error=error)
        count = _guard(src.device_count)
        if count is None:
            return GpuInventory(available=False, error="NVML answered, but not the device count")
        inv = GpuInventory(
            available=True,
            driver=_guard(lambda: _text(src.system("nvmlSystemGetDriverVersion"))),
            cuda_driver=_guard(lambda: _cuda_version(src.system("nvmlSystemGetCudaDriverVersion"))),
            nvml_version=_guard(lambda: _text(src.system("nvmlSystemGetNVMLVersion"))),
            devices=[device_facts(src, i, health) for i in range(count)],
        )
        if topology:
            inv.topology = _topology(src, count)
        if xid_window_s > 0:
            inv.xid_events = _guard(lambda: src.xid_events(xid_window_s))
        return inv


def device_count(factory: Callable[[], NvmlSource] | None = None) -> int | None:
    """How many GPUs NVML sees (not honouring CUDA_VISIBLE_DEVICES); None without NVML."""
    with opened(factory) as (src, _error):
        return None if src is None else _guard(src.device_count)


def device_by_uuid(uuid: str, factory: Callable[[], NvmlSource] | None = None) -> GpuFacts | None:
    """The GPU a rank runs on, found by the UUID torch reports (with or without 'GPU-')."""
    wanted = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    with opened(factory) as (src, _error):
        if src is None:
            return None
        for i in range(_guard(src.device_count) or 0):
            if _guard(lambda i=i: _text(src.device(i, "nvmlDeviceGetUUID"))) == wanted:
                return device_facts(src, i)
    return None
