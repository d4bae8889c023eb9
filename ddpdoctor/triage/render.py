"""Terminal panels for `explain` and `env`, and the Markdown block `env --markdown` pastes.

Renders the JSON documents from `report`, nothing else: what is printed is what --json writes.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ddpdoctor.errors import printable
from ddpdoctor.report.render import make_console
from ddpdoctor.report.units import human_bytes


def console(ascii_only: bool) -> Console:
    return make_console(ascii_only)


def _unknown(v: Any) -> str:
    if v is None or v == "" or v == []:
        return "unknown"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return str(v)


def _built(torch: dict[str, Any], key: str) -> str:
    """A CUDA component of torch: its version, 'none' on a build or host without CUDA."""
    if torch.get(key) is not None:
        return str(torch[key])
    if torch.get("imported") and not torch.get("cuda_available"):
        return "none (no CUDA here)" if torch.get("cuda_build") else "none (CPU build)"
    return "unknown"


# --- explain ----------------------------------------------------------------------------------


def _box(ascii_only: bool) -> box.Box:
    return box.ASCII if ascii_only else box.ROUNDED


def explain(doc: dict[str, Any], out: Console, ascii_only: bool = False) -> None:
    matches = doc["matches"]
    for i, m in enumerate(matches):
        body = Table.grid(padding=(0, 1))
        body.add_column(style="bold", no_wrap=True)
        body.add_column(overflow="fold")
        ranks = ", ".join(map(str, m["ranks"])) if m["ranks"] else "not named in the log"
        where = f"line {m['line']}, seen {m['count']}x, ranks: {ranks}"
        if m.get("named_by_torchrun"):
            where += " (torchrun's Root Cause)"
        body.add_row("where", escape(where))
        ev = Text()
        for e in m["evidence"]:
            rank = f"[rank{e['rank']}] " if e["rank"] is not None else ""
            ev.append(f"{e['line']:>6}: ", style="dim")
            ev.append(f"{rank}{e['text']}\n")
        body.add_row("evidence", ev)
        body.add_row("why", escape(m["why"]))
        body.add_row("fix", escape(m["fix"]))
        body.add_row("confirm", escape(m["confirm_with"]))
        label = "ROOT CAUSE" if i == 0 else f"also found ({m['kind']})"
        title = f"{label}: {m['root_cause']} {m['code']} - {m['title']}"
        out.print(
            Panel(
                body,
                title=escape(title),
                title_align="left",
                border_style="red" if i == 0 else "yellow",
                box=_box(ascii_only),
            )
        )
    extra = (
        f", root cause rank {doc['root_cause_rank']}" if doc["root_cause_rank"] is not None else ""
    )
    for line in explain_summary(doc):
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    if matches:
        out.print(
            f"{len(matches)} finding(s) in {doc['lines_read']} lines ({doc['engine']} scan){extra}.",
            highlight=False,
            markup=False,
        )


def explain_summary(doc: dict[str, Any]) -> list[str]:
    """The plain-text lines after the panels: candidates with confidence and why, what to run
    next, what was read and cut; with no diagnosis, what was read and what to collect."""
    from ddpdoctor.triage.next_steps import COLLECT

    out: list[str] = []
    cands = doc.get("candidates", [])
    inp = doc.get("input", {})
    if not doc["matches"]:
        out.append(
            f"No known DDP failure recognised in {doc['lines_read']} lines "
            f"({human_bytes(doc['bytes_read'])}, {doc['engine']} scan; "
            f"{inp.get('prose_lines', 0)} line(s) of its head read as prose too)."
        )
    title = (
        "Candidates" if doc["matches"] else "Closest candidates (low confidence, not a diagnosis)"
    )
    if cands:
        out.append(f"{title}:")
        for i, c in enumerate(cands, 1):
            out.append(f"  {i}. {c['root_cause']}  confidence {c['confidence']:.2f}")
            for w in c["why"][:4]:
                out.append(f"       - {w}")
            if c["next"]["run"]:
                out.append(f"       next: {'; '.join(c['next']['run'])}")
            for v in c["next"]["set"][:2]:
                out.append(f"       set:  {v}")
    elif not doc["matches"]:
        out.append(f"{title}: none.")
    if not doc["matches"]:
        out.append("Collect and run `ddpdoctor explain` again:")
        out.extend(f"  - {c}" for c in COLLECT)
    if inp.get("long_lines_cut"):
        out.append(f"Note: {inp['long_lines_cut']} line(s) longer than 64 KiB were cut to 64 KiB.")
    if inp.get("cut_at_bytes") is not None:
        out.append(
            f"Note: reading stopped after {human_bytes(inp['cut_at_bytes'])} (--max-bytes, default "
            "8 GiB); the rest of the input was not read."
        )
    return out


# --- env ----------------------------------------------------------------------------------------


def env_sections(doc: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The snapshot as titled lists of (label, value) rows; shared by panels and Markdown."""
    host, py, torch = doc.get("host", {}), doc.get("python", {}), doc.get("torch", {})
    gpus, cpu, mem = doc.get("gpus", {}), doc.get("cpu", {}), doc.get("memory", {})
    shm, net, launch = doc.get("shm", {}), doc.get("network", {}), doc.get("launcher", {})
    sections: list[tuple[str, list[tuple[str, str]]]] = [
        (
            "System",
            [
                ("host", _unknown(host.get("hostname"))),
                ("os", _unknown(host.get("os"))),
                ("container", _unknown(host.get("container")) if host.get("container") else "no"),
            ],
        ),
        (
            "Python / torch",
            [
                ("python", f"{_unknown(py.get('version'))} ({_unknown(py.get('executable'))})"),
                (
                    "torch",
                    _unknown(torch.get("version"))
                    if torch.get("imported")
                    else _unknown(torch.get("error") or torch.get("version")),
                ),
                ("CUDA build", _built(torch, "cuda_build")),
                ("cuDNN", _built(torch, "cudnn")),
                ("NCCL", _built(torch, "nccl")),
                ("debug build", _unknown(torch.get("debug_build"))),
                (
                    "backends",
                    f"nccl={_unknown(torch.get('nccl_backend'))} gloo={_unknown(torch.get('gloo_backend'))}",
                ),
                ("GPUs torch sees", _unknown(torch.get("device_count"))),
            ],
        ),
    ]
    gpu_rows = [("NVML", "available" if gpus.get("available") else _unknown(gpus.get("error")))]
    if gpus.get("available"):
        gpu_rows.append(
            ("driver", f"{_unknown(gpus.get('driver'))} (CUDA {_unknown(gpus.get('cuda_driver'))})")
        )
        for d in gpus.get("devices", []):
            nvl = d.get("nvlink_active")
            link = f", NVLink {nvl}/{d.get('nvlink_links')} up" if nvl is not None else ""
            gpu_rows.append(
                (
                    f"GPU {d['index']}",
                    f"{_unknown(d.get('name'))}, "
                    f"{human_bytes(d.get('memory_total_bytes'))}, bus {_unknown(d.get('pci_bus_id'))}{link}",
                )
            )
        topo = gpus.get("topology") or []
        if len(topo) > 1:
            gpu_rows.append(
                ("topology", " | ".join(f"GPU{i}: " + " ".join(row) for i, row in enumerate(topo)))
            )
    sections.append(("GPUs (NVML)", gpu_rows))
    sections.append(
        (
            "CPU / memory",
            [
                ("cpu", _unknown(cpu.get("model"))),
                (
                    "cores",
                    f"{_unknown(cpu.get('logical'))} logical, {_unknown(cpu.get('physical'))} physical",
                ),
                (
                    "affinity",
                    f"{_unknown(cpu.get('affinity'))} ({_unknown(cpu.get('affinity_count'))} cores)",
                ),
                (
                    "NUMA",
                    _unknown(
                        [f"node{n['node']}: {n['cpus']}" for n in cpu.get("numa_nodes") or []]
                    ),
                ),
                (
                    "memory",
                    f"{human_bytes(mem.get('total_bytes'))} total, {human_bytes(mem.get('available_bytes'))} available",
                ),
                (
                    "/dev/shm",
                    f"{human_bytes(shm.get('total_bytes'))} total, {human_bytes(shm.get('free_bytes'))} free"
                    + (" - WARNING: " + shm["warning"] if shm.get("warning") else ""),
                ),
            ],
        )
    )
    net_rows = []
    for i in net.get("interfaces", []):
        addrs = ", ".join(i.get("ipv4", []) + i.get("ipv6", [])) or "no address"
        speed = f", {i['speed_mbps']} Mb/s" if i.get("speed_mbps") else ""
        net_rows.append(
            (
                i["name"],
                f"{'up' if i.get('up') else 'down'}, MTU {_unknown(i.get('mtu'))}{speed}, {addrs}",
            )
        )
    for who in ("nccl", "gloo"):
        pick = net.get(who) or {}
        net_rows.append(
            (
                f"{who.upper()} picks",
                f"{_unknown(pick.get('interfaces'))} ({_unknown(pick.get('why'))})",
            )
        )
    sections.append(("Network", net_rows))
    sections.append(
        (
            "Launcher",
            [
                ("launcher", _unknown(launch.get("launcher"))),
                (
                    "scheduler",
                    _unknown(launch.get("scheduler"))
                    if launch.get("scheduler")
                    else "none detected",
                ),
                (
                    "rank / local / world",
                    f"{_unknown(launch.get('rank'))} / {_unknown(launch.get('local_rank'))} / {_unknown(launch.get('world_size'))}",
                ),
                *[(k, v) for k, v in (launch.get("details") or {}).items()],
            ],
        )
    )
    variables = doc.get("variables") or {}
    sections.append(
        (
            "Variables",
            list(variables.items())
            or [("(none)", "no NCCL_/TORCH_/GLOO_/CUDA_/... variables set")],
        )
    )
    if doc.get("warnings"):
        sections.append(("Warnings", [(str(i + 1), w) for i, w in enumerate(doc["warnings"])]))
    return sections


def env(doc: dict[str, Any], out: Console, ascii_only: bool = False) -> None:
    for title, rows in env_sections(doc):
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column(overflow="fold")
        for label, value in rows:
            table.add_row(escape(printable(str(label))), escape(printable(str(value))))
        style = "red" if title == "Warnings" else "blue"
        out.print(
            Panel(
                Group(table),
                title=title,
                title_align="left",
                border_style=style,
                box=_box(ascii_only),
            )
        )


def env_markdown(doc: dict[str, Any]) -> str:
    """A paste-ready block: a heading and one fenced text block (keeps alignment in tickets)."""
    lines = ["### ddpdoctor env", "", "```text"]
    for title, rows in env_sections(doc):
        lines.append(f"== {title}")
        rows = [(printable(str(label)), printable(str(value))) for label, value in rows]
        width = max((len(label) for label, _ in rows), default=0)
        lines.extend(f"  {label.ljust(width)}  {value}" for label, value in rows)
    lines.append("```")
    return "\n".join(lines) + "\n"
