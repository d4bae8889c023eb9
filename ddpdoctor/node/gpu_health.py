"""Pure judges over the GPU facts: each takes facts (and expectations) and returns
(summary, findings); nothing here reads hardware, so tests feed facts and compare findings.
Unknown facts (None) are never a finding: a probe the board does not support says nothing."""

from __future__ import annotations

from typing import Any

from ddpdoctor.node import codes
from ddpdoctor.node.expect import Expectations
from ddpdoctor.node.host import XidLine
from ddpdoctor.node.nvml import GpuFacts, GpuInventory
from ddpdoctor.report.model import Finding, Level
from ddpdoctor.report.problems import Problem

Verdict = tuple[str, list[Finding]]

# Clock event reasons (NVML bit masks) and how much each one matters to a training job.
CLOCK_REASONS = {
    0x8: ("hardware slowdown", Level.FAIL),
    0x40: ("hardware thermal slowdown", Level.FAIL),
    0x80: ("hardware power brake", Level.FAIL),
    0x20: ("software thermal slowdown", Level.WARN),
    0x4: ("software power cap", Level.INFO),
}
# Xids that an application causes (a bad kernel, an illegal address): a note, not a sick GPU.
APPLICATION_XIDS = {13, 31, 43, 45}
BUSY_PCT = 10  # a GPU at least this busy has no reason to lower its PCIe generation
HOT_MARGIN_C = 5


def gpu_name(g: GpuFacts) -> str:
    return f"GPU {g.index} ({g.pci_bus_id})" if g.pci_bus_id else f"GPU {g.index}"


def _finding(problem: Problem, g: GpuFacts, message: str, **kw: Any) -> Finding:
    return problem.finding(f"{gpu_name(g)}: {message}", gpu=g.index, **kw)


def inventory(inv: GpuInventory, expect: Expectations) -> Verdict:
    """How many GPUs of which model, against the machine type."""
    if not inv.available:
        if expect.gpu_count:
            return "NVML unavailable", [
                codes.NVML_MISSING.finding(
                    f"{expect.gpu_count} GPUs expected, but {inv.error}", expected=expect.gpu_count
                )
            ]
        return "no GPU", [codes.NO_GPU.finding(f"no GPU visible ({inv.error})")]
    names = sorted({g.name or "unknown model" for g in inv.devices})
    summary = f"{len(inv.devices)} × {', '.join(names)}" if inv.devices else "NVML sees no GPU"
    found: list[Finding] = []
    if expect.gpu_count is not None and len(inv.devices) != expect.gpu_count:
        fewer = len(inv.devices) < expect.gpu_count
        found.append(
            codes.GPU_COUNT.finding(
                f"{len(inv.devices)} GPUs, expected {expect.gpu_count}"
                + (f": {expect.gpu_count - len(inv.devices)} missing" if fewer else ""),
                level=Level.FAIL if fewer else Level.WARN,
                found=len(inv.devices),
                expected=expect.gpu_count,
            )
        )
    if expect.gpu_model:
        for g in inv.devices:
            if g.name is not None and expect.gpu_model not in g.name:
                found.append(_finding(codes.GPU_MODEL, g, f"{g.name}, expected {expect.gpu_model}"))
    elif len(names) > 1:
        found.append(
            codes.GPU_MODEL.finding(
                f"mixed GPU models on one node: {', '.join(names)}", level=Level.WARN
            )
        )
    return summary, found


def _pci_key(bus_id: str | None) -> tuple[int, int, int] | None:
    """'00000000:3B:00.0' and the kernel's '0000:3b:00' -> (0, 0x3b, 0)."""
    if not bus_id:
        return None
    parts = bus_id.split(".")[0].split(":")
    try:
        domain, bus, device = (int(p, 16) for p in parts[-3:])
    except ValueError:
        return None
    return domain, bus, device


def memory(inv: GpuInventory, kernel_xids: list[XidLine] | None, expect: Expectations) -> Verdict:
    """ECC, retired pages, row remapping and Xid errors."""
    found: list[Finding] = []
    for g in inv.devices:
        if g.ecc_volatile_uncorrected:
            found.append(
                _finding(
                    codes.ECC_UNCORRECTED,
                    g,
                    f"{g.ecc_volatile_uncorrected} uncorrectable ECC errors since the driver loaded",
                    count=g.ecc_volatile_uncorrected,
                )
            )
        elif g.ecc_aggregate_uncorrected:
            found.append(
                _finding(
                    codes.ECC_HISTORY,
                    g,
                    f"{g.ecc_aggregate_uncorrected} uncorrectable ECC errors in its lifetime",
                    count=g.ecc_aggregate_uncorrected,
                )
            )
        if g.ecc_enabled is False:
            found.append(_finding(codes.ECC_OFF, g, "ECC is off"))
        elif g.ecc_enabled and g.ecc_pending is False:
            found.append(_finding(codes.ECC_OFF, g, "ECC will be off after the next reboot"))
        retired = (g.retired_single_bit or 0) + (g.retired_double_bit or 0)
        if g.retired_pending:
            found.append(
                _finding(codes.RETIRED_PAGES, g, "a page retirement waits for a driver reload")
            )
        elif retired > expect.retired_pages_max:
            found.append(
                _finding(
                    codes.RETIRED_PAGES,
                    g,
                    f"{retired} retired pages (limit {expect.retired_pages_max})",
                    count=retired,
                )
            )
        if g.remap_failed:
            found.append(_finding(codes.REMAP_FAILED, g, "a row remapping failed"))
        if g.remap_pending:
            found.append(
                _finding(
                    codes.REMAP_PENDING,
                    g,
                    f"row remapping pending ({g.remapped_uncorrectable or 0} rows from "
                    "uncorrectable errors)",
                )
            )
    found += _xids(inv, kernel_xids)
    checked = [g for g in inv.devices if g.ecc_volatile_uncorrected is not None]
    summary = (
        f"{len(checked)} of {len(inv.devices)} GPUs report their ECC counters"
        if inv.devices
        else "no GPU"
    )
    return summary, found


def _xids(inv: GpuInventory, kernel_xids: list[XidLine] | None) -> list[Finding]:
    by_pci = {_pci_key(g.pci_bus_id): g for g in inv.devices}
    seen: dict[tuple[int, int], list[str]] = {}  # (gpu index or -1, xid) -> texts
    for line in kernel_xids or []:
        g = by_pci.get(_pci_key(line.pci))
        seen.setdefault((g.index if g else -1, line.xid), []).append(line.text or line.pci)
    for index, xid in inv.xid_events or []:
        seen.setdefault((index, xid), []).append("while ddpdoctor listened")
    found = []
    for (index, xid), texts in sorted(seen.items()):
        level = Level.INFO if xid in APPLICATION_XIDS else Level.FAIL
        where = gpu_name(inv.devices[index]) if 0 <= index < len(inv.devices) else "a GPU"
        times = f" ({len(texts)} times)" if len(texts) > 1 else ""
        found.append(
            codes.XID.finding(
                f"{where}: Xid {xid}{times}: {texts[-1]}",
                level=level,
                gpu=index if index >= 0 else None,
                xid=xid,
                hint=(
                    "Usually the application (a bad kernel or address); look at the job that ran then."
                    if level is Level.INFO
                    else None
                ),
            )
        )
    return found


def links(inv: GpuInventory, nvswitches: int | None, fabric_manager: bool | None) -> Verdict:
    """NVLink state and errors, PCIe generation and width, and the NVSwitch fabric."""
    found: list[Finding] = []
    total = active = 0
    for g in inv.devices:
        down = [link.link for link in g.nvlinks if link.active is False]
        total += len(g.nvlinks)
        active += len(g.nvlinks) - len(down)
        if down:
            found.append(
                _finding(
                    codes.NVLINK_DOWN,
                    g,
                    f"NVLink {', '.join(map(str, down))} down ({len(g.nvlinks) - len(down)} of "
                    f"{len(g.nvlinks)} active)",
                    links=down,
                )
            )
        errors: dict[str, int] = {}
        for link in g.nvlinks:
            for name, value in link.errors.items():
                if value:
                    errors[name] = errors.get(name, 0) + value
        if errors:
            text = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(errors.items()))
            found.append(_finding(codes.NVLINK_ERRORS, g, f"NVLink errors: {text}", **errors))
        if g.pcie_width and g.pcie_width_max and g.pcie_width < g.pcie_width_max:
            found.append(
                _finding(
                    codes.PCIE_WIDTH,
                    g,
                    f"PCIe x{g.pcie_width}, can run x{g.pcie_width_max}",
                    width=g.pcie_width,
                    width_max=g.pcie_width_max,
                )
            )
        if g.pcie_gen and g.pcie_gen_max and g.pcie_gen < g.pcie_gen_max:
            busy = g.utilization_pct is not None and g.utilization_pct >= BUSY_PCT
            found.append(
                _finding(
                    codes.PCIE_GEN,
                    g,
                    f"PCIe gen {g.pcie_gen}, can run gen {g.pcie_gen_max}"
                    + ("" if busy else " (read while idle: GPUs lower it to save power)"),
                    level=Level.WARN if busy else Level.INFO,
                    gen=g.pcie_gen,
                    gen_max=g.pcie_gen_max,
                )
            )
    found += _fabric(inv, nvswitches, fabric_manager)
    if not inv.devices:
        return "no GPU", found
    widths = sorted({f"gen{g.pcie_gen} x{g.pcie_width}" for g in inv.devices if g.pcie_width})
    parts = [f"NVLink {active}/{total} active" if total else "no NVLink"]
    if widths:
        parts.append("PCIe " + ", ".join(widths))
    return ", ".join(parts), found


def _fabric(
    inv: GpuInventory, nvswitches: int | None, fabric_manager: bool | None
) -> list[Finding]:
    if nvswitches and fabric_manager is False:
        return [
            codes.FABRIC.finding(
                f"{nvswitches} NVSwitches but no nv-fabricmanager process", nvswitches=nvswitches
            )
        ]
    stuck = [g for g in inv.devices if g.fabric_state in ("not started", "in progress")]
    return [_finding(codes.FABRIC, g, f"GPU fabric registration {g.fabric_state}") for g in stuck]


def clocks(inv: GpuInventory, expect: Expectations) -> Verdict:
    """Throttling (reasons decoded), temperature, power limit, persistence and MIG mode."""
    found: list[Finding] = []
    for g in inv.devices:
        reasons = [
            (name, level)
            for bit, (name, level) in CLOCK_REASONS.items()
            if g.clock_event_reasons and g.clock_event_reasons & bit
        ]
        if reasons:
            worst = max(level for _n, level in reasons)
            clock = (
                f" at {g.sm_clock_mhz} of {g.sm_clock_max_mhz} MHz"
                if g.sm_clock_mhz and g.sm_clock_max_mhz
                else ""
            )
            found.append(
                _finding(
                    codes.THROTTLED,
                    g,
                    f"clocks held down{clock}: {', '.join(n for n, _l in reasons)}",
                    level=worst,
                    reasons=[n for n, _l in reasons],
                    mask=g.clock_event_reasons,
                )
            )
        slowdown = g.temperature_slowdown_c
        if g.temperature_c is not None and slowdown and g.temperature_c >= slowdown - HOT_MARGIN_C:
            found.append(
                _finding(
                    codes.HOT,
                    g,
                    f"{g.temperature_c} °C, slowdown at {slowdown} °C",
                    level=Level.FAIL if g.temperature_c >= slowdown else Level.WARN,
                )
            )
        default = g.power_default_limit_w
        if g.power_limit_w and default and g.power_limit_w < 0.95 * default:
            found.append(
                _finding(
                    codes.POWER_CAP,
                    g,
                    f"power limit {g.power_limit_w:.0f} W, default {default:.0f} W",
                )
            )
        if g.persistence is False:
            found.append(_finding(codes.PERSISTENCE, g, "persistence mode off"))
        if g.mig_enabled is not None and g.mig_enabled != expect.mig:
            found.append(
                _finding(
                    codes.MIG, g, "MIG enabled" if g.mig_enabled else "MIG disabled, expected on"
                )
            )
        elif (
            g.mig_pending is not None
            and g.mig_enabled is not None
            and g.mig_pending != g.mig_enabled
        ):
            found.append(_finding(codes.MIG, g, "a MIG mode change waits for a GPU reset"))
    temps = [g.temperature_c for g in inv.devices if g.temperature_c is not None]
    power = [g.power_w for g in inv.devices if g.power_w is not None]
    if not inv.devices:
        return "no GPU", found
    parts = []
    if temps:
        parts.append(f"{min(temps)}–{max(temps)} °C")
    if power:
        parts.append(f"{sum(power):.0f} W in all")
    return ", ".join(parts) or "clocks, temperature and power not readable", found
