"""Terminal rendering with rich: the only core module that imports it. Data classes carry no
colours or glyphs; marks and colours are decided here."""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ddpdoctor.report.model import CheckResult, Finding, Report
from ddpdoctor.report.units import human_bytes
from ddpdoctor.runfiles import Heartbeat


def catalog(doc: dict[str, Any], ascii_only: bool = False, console: Console | None = None) -> None:
    """`ddpdoctor problems`: the probes' codes, the lint rules and the log signatures."""
    from rich import box

    con = console or make_console(ascii_only)
    sections = (
        ("Run-time probes (ddpdoctor check / bench-allreduce)", "probes", "symbol"),
        ("Node health (ddpdoctor node)", "node", "symbol"),
        ("Lint rules (ddpdoctor lint)", "lint", "symbol"),
        ("Log signatures (ddpdoctor explain)", "signatures", "root_cause"),
    )
    for title, key, second in sections:
        table = Table(
            title=title, title_justify="left", box=box.ASCII if ascii_only else box.SIMPLE_HEAD
        )
        for col in ("code", second.replace("_", " "), "title", "fix"):
            table.add_column(col, overflow="fold")
        for p in doc[key]:
            table.add_row(p["code"], p[second], p["title"], p["fix"])
        con.print(table)


MARKS = {  # status → (unicode mark, ascii mark, style)
    "pass": ("✓", "+", "green"),
    "warn": ("!", "!", "yellow"),
    "fail": ("✗", "x", "red"),
    "error": ("✗", "x", "red"),
    "timeout": ("⏱", "T", "red"),
    "skip": ("-", "-", "dim"),
}
LEVEL_MARKS = {"fail": ("✗", "x", "red"), "warn": ("!", "!", "yellow"), "info": ("•", "*", "cyan")}
STATE_STYLE = {"ok": "green", "crashed": "red", "hung": "red", "missing": "red"}


def make_console(
    ascii_only: bool = False, stderr: bool = False, width: int | None = None
) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if width is None and not stream.isatty() and "COLUMNS" not in os.environ:
        width = 120  # logs and tickets: rich's 80-column default wraps every finding
    return Console(
        stderr=stderr,
        no_color=ascii_only,
        highlight=False,
        width=width,
        emoji=False,
        safe_box=ascii_only,
    )


ASCII = str.maketrans(
    {
        "—": "-",
        "·": "|",
        "↔": "<->",
        "→": "->",
        "…": "...",
        "✓": "+",
        "✗": "x",
        "×": "x",
        "⏱": "T",
        "•": "*",
        "≥": ">=",
        "≤": "<=",
    }
)


class Out:
    """Prints through one console; in ASCII mode every line is transliterated, so logs and
    tickets that mangle UTF-8 still read right."""

    def __init__(self, con: Console, ascii_only: bool) -> None:
        self.con, self.ascii_only = con, ascii_only

    def __call__(self, text: str = "", **kw: Any) -> None:
        self.con.print(text.translate(ASCII) if self.ascii_only else text, **kw)


def rows(checks: list[CheckResult], out: Out, verbose: bool = False, world_size: int = 0) -> None:
    """A row per check: its mark, title and summary, then each finding with its fix."""
    from ddpdoctor.report.ranks import ranks_txt

    arrow = "->" if out.ascii_only else "→"
    for c in checks:
        out(
            f"{_mark(MARKS, c.status, out.ascii_only)} [bold]{escape(c.title)}[/] — "
            f"{escape(c.summary)}"
        )
        shown, more = _capped_findings(c.findings)
        for f in shown:
            named = f.message.startswith(("rank ", "ranks "))
            who = f" [dim]({ranks_txt(f.ranks)})[/]" if f.ranks and not named else ""
            at = _where(f.where)
            at = f" [dim]at {escape(at)}[/]" if at and at not in f.message else ""
            out(
                f"    {_mark(LEVEL_MARKS, f.level.word, out.ascii_only)} [bold]{f.code}[/] "
                f"{escape(f.message)}{at}{who}",
                soft_wrap=False,
            )
            if f.hint:
                out(f"        [dim]{arrow} {escape(f.hint)}[/]")
        for code, (n, ranks) in more.items():
            out(f"    [dim]… and {n:,} more {code} ({ranks_txt(ranks)}; all in --json)[/]")
        if verbose and c.duration_s is not None:
            out(f"        [dim]took {c.duration_s:.2f} s[/]")


def _where(where: dict[str, Any] | None) -> str:
    """'train.py:17' for a finding's place in the user's code (the file's name, as ruff does
    relative to the current folder when it is below it)."""
    if not where:
        return ""
    path = str(where.get("path", ""))
    near = os.path.relpath(path) if os.path.isabs(path) else path
    return f"{path if near.startswith('..') else near}:{where.get('line')}"


MAX_PER_CODE = 3  # findings of one code printed in a row; the rest are counted


def _capped_findings(
    findings: list[Finding],
) -> tuple[list[Finding], dict[str, tuple[int, list[int]]]]:
    """The findings to print and, per code, how many more there are and the ranks they name: a
    bad node gives 8 findings of one kind, 16,384 bad ranks give 3 and a count."""
    seen: dict[str, int] = {}
    shown: list[Finding] = []
    left: dict[str, list[int]] = {}
    for f in findings:
        seen[f.code] = seen.get(f.code, 0) + 1
        if seen[f.code] <= MAX_PER_CODE:
            shown.append(f)
        else:
            left.setdefault(f.code, []).extend(f.ranks)
    more = {code: (seen[code] - MAX_PER_CODE, ranks) for code, ranks in left.items()}
    return shown, more


def count_line(
    checks: list[CheckResult], status: str, seconds: float | None, out: Out, noun: str = "check"
) -> None:
    """The closing line: what was found, in how many checks, in how long (flutter doctor's)."""
    from ddpdoctor.report.ranks import plural

    counts = {"fail": 0, "warn": 0, "info": 0}
    for c in checks:
        for f in c.findings:
            counts[f.level.word] += 1
    colour = {"pass": "green", "warn": "yellow"}.get(status, "red")
    word = {"pass": "No problems", "warn": "Warnings only"}.get(status, "Problems found")
    took = f" ({seconds:.1f} s)" if seconds is not None else ""
    out(
        f"[{colour} bold]{word}[/]: {plural(counts['fail'], 'failure')}, "
        f"{plural(counts['warn'], 'warning')}, {plural(counts['info'], 'note')} in "
        f"{plural(len(checks), noun)}{took}."
    )


def _mark(table: dict[str, tuple[str, str, str]], key: str, ascii_only: bool) -> str:
    uni, asc, style = table.get(key, ("?", "?", ""))
    mark = asc if ascii_only else uni
    return f"[{style}]\\[{mark}][/]" if style else f"\\[{mark}]"


def report(
    rep: Report,
    verbose: bool = False,
    ascii_only: bool = False,
    run_dir: str | None = None,
    console: Console | None = None,
    title: str = "ddpdoctor check",
) -> None:
    """The flutter-doctor style report: a row per check, findings with their fix, a count."""
    from ddpdoctor.report.ranks import plural, ranks_txt

    con = console or make_console(ascii_only)
    out = Out(con, ascii_only)
    hosts = len({s.host for s in rep.ranks if s.host}) or 1
    node_view = rep.launch.get("view") == "node"
    where = (
        f"{plural(rep.world_size, 'rank')} on {plural(rep.nnodes, 'node')}, this node: "
        f"{ranks_txt(s.rank for s in rep.ranks)}"
        if node_view
        else f"{plural(rep.world_size, 'rank')} on {plural(hosts, 'host')}"
    )
    out(
        f"[bold]{escape(title)}[/] · {rep.backend} ({escape(rep.backend_reason)}) · "
        f"{where} · {rep.duration_s:.1f} s"
    )
    out()
    rows(rep.checks, out, verbose=verbose)
    if rep.root_cause:
        out()
        out(f"[bold red]Root cause:[/] {escape(rep.root_cause['message'])}")
    if verbose or len(rep.hosts) > 1:
        _hosts_table(rep, con, out)
    if verbose:
        _verbose(rep, con, out)
    out()
    noun = "area" if rep.launch.get("mode") == "run" else "check"
    count_line(rep.checks, rep.status, rep.duration_s, out, noun)
    if node_view:
        master = rep.launch.get("master_addr") or "the node that runs rank 0"
        out(
            f"This is node {rep.launch.get('node_rank', '?')}'s view: the full report is printed on {master} "
            "(the node that runs rank 0)."
        )
    if run_dir:
        out(f"[dim]Rank files and logs: {run_dir}[/]")


def _hosts_table(rep: Report, con: Console, out: Out) -> None:
    """One row per group of hosts that read the same (versions, interface, MTU, device count):
    1,024 healthy nodes are one row, an odd node a row of its own."""
    from rich import box

    from ddpdoctor.report.ranks import fmt_ranks, hosts_txt

    table = Table(
        title="Hosts", title_justify="left", box=box.ASCII if out.ascii_only else box.HEAVY_HEAD
    )
    for col in ("host", "ranks", "devices", "torch", "NCCL", "driver", "interface", "MTU"):
        table.add_column(col, overflow="fold")
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for h in rep.hosts:
        v, n = h.get("versions") or {}, h.get("net") or {}
        devices = sorted(set(h.get("devices") or []))
        key = (
            _devices_txt(devices),
            str(v.get("torch") or ""),
            str(v.get("nccl") or "-"),
            str(v.get("driver") or "-"),
            str(n.get("interface") or "?"),
            str(n.get("mtu") or "?"),
        )
        groups.setdefault(key, []).append(h)
    for key, hosts in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:12]:
        names = [h["host"] for h in hosts]
        where = hosts_txt(names) if len(names) <= 8 else f"{len(names):,} hosts"
        ranks = fmt_ranks(r for h in hosts for r in h["ranks"])
        table.add_row(where, ranks, *key)
    out()
    con.print(table)
    if len(groups) > 12:
        out(f"    … and {len(groups) - 12:,} more kinds of host (see --json)")


def _devices_txt(devices: list[str]) -> str:
    """['cuda:0', ..., 'cuda:7'] -> 'cuda:0-7'; other lists as they are."""
    from ddpdoctor.report.ranks import fmt_ranks

    kinds = {d.partition(":")[0] for d in devices}
    numbers = [d.partition(":")[2] for d in devices]
    if len(kinds) == 1 and len(devices) > 2 and all(n.isdigit() for n in numbers):
        return f"{kinds.pop()}:{fmt_ranks(int(n) for n in numbers)}"
    return ", ".join(devices)


def _verbose(rep: Report, con: Console, out: Out) -> None:
    from rich import box

    table = Table(
        title="Ranks", title_justify="left", box=box.ASCII if out.ascii_only else box.HEAVY_HEAD
    )
    for col in ("rank", "local", "host", "pid", "device", "state", "last check", "exit", "detail"):
        table.add_column(col, overflow="fold")
    for s in rep.ranks:
        exit_txt = (
            "" if s.exitcode is None else f"{s.exitcode}" + (f" ({s.signal})" if s.signal else "")
        )
        table.add_row(
            str(s.rank),
            "" if s.local_rank is None else str(s.local_rank),
            s.host or "?",
            str(s.pid or ""),
            s.device or "",
            f"[{STATE_STYLE.get(s.state, '')}]{s.state}[/]",
            s.last_check or "",
            exit_txt,
            escape(s.detail),
        )
    out()
    con.print(table)
    _exchange_line(rep, out)
    cmd = rep.launch.get("command")
    if cmd:
        import shlex

        out(f"[dim]torchrun command:[/] {escape(shlex.join(cmd))}", soft_wrap=True)


def _exchange_line(rep: Report, out: Out) -> None:
    """What the result exchanges cost: rank 0 receives everything, the others a constant."""
    seen = {int(r): b for r, b in (rep.launch.get("exchange_bytes") or {}).items()}
    if not seen:
        return
    parts = []
    if 0 in seen:
        b = seen[0]
        parts.append(
            f"rank 0 received {human_bytes(b.get('received', 0))} in "
            f"{b.get('exchanges', 0)} exchanges"
        )
    others = [b for r, b in seen.items() if r != 0]
    if others:
        recv = max(b.get("received", 0) for b in others)
        sent = max(b.get("sent", 0) for b in others)
        parts.append(
            f"other ranks here at most {human_bytes(sent)} sent, {human_bytes(recv)} received"
        )
    out(f"[dim]Result exchange:[/] {'; '.join(parts)}")


def _sweep(doc: dict[str, Any], out: Out, ascii_only: bool) -> None:
    """nccl-tests' table (plus the slowest/fastest rank), a busbw bar chart, the average line."""
    # nccl-tests' fixed-width layout, so admins can read it the way they read all_reduce_perf
    head = f"{'size':>12} {'count':>11} {'type':>8} {'redop':>5} {'time':>10} {'algbw':>8} {'busbw':>8} {'wrong':>6}"
    out(f"[bold]#{head[1:]}  {'slowest':>14}  {'fastest':>14}[/]", soft_wrap=True)
    out(
        f"#{'(B)':>11} {'(elements)':>11} {'':>8} {'':>5} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8} {'':>6}"
        f"  {'rank (us)':>14}  {'rank (us)':>14}",
        soft_wrap=True,
    )
    for r in doc["rows"]:
        wrong = f"[red]{r['wrong']:>6}[/]" if r["wrong"] else f"{0:>6}"
        slow = f"{r['slowest_rank']} ({r['slowest_us']:.1f})"
        fast = f"{r['fastest_rank']} ({r['fastest_us']:.1f})"
        out(
            f"{r['bytes']:>12} {r['count']:>11} {doc['dtype']:>8} {doc['op']:>5} {r['time_us']:>10.1f} "
            f"{r['algbw_gbps']:>8.3f} {r['busbw_gbps']:>8.3f} {wrong}  {slow:>14}  {fast:>14}",
            soft_wrap=True,
        )
    rows = doc["rows"]
    if rows:
        top = max(r["busbw_gbps"] for r in rows) or 1.0
        out("[bold]busbw by size[/]")
        for r in rows:
            width = int(round(40 * r["busbw_gbps"] / top))
            bar = ("#" if ascii_only else "█") * width
            out(f"  {human_bytes(r['bytes']):>9} [cyan]{bar}[/] {r['busbw_gbps']:.3f}")
    avg = doc.get("avg_busbw_gbps")
    out(
        f"# Avg bus bandwidth    : {avg:.4f} GB/s (sizes >= 1 MiB)"
        if avg is not None
        else "# Avg bus bandwidth    : n/a (no size >= 1 MiB)"
    )


def _pairs(doc: dict[str, Any], out: Out) -> None:
    """The pair matrix: busbw (GB/s) between every two units, slow pairs marked."""
    units, pairs = doc.get("units") or [], doc["pairs"]
    if not pairs:
        out("No pairs to measure (one unit).")
        return
    cell = {(p["a"], p["b"]): p for p in pairs} | {(p["b"], p["a"]): p for p in pairs}
    width = max(10, *(len(u) for u in units)) + 1
    out(
        f"[bold]pair busbw (GB/s), {human_bytes(pairs[0]['bytes'])} messages; * = a slow node's or link's pair "
        f"(below {doc.get('slow_ratio', 0.7):g} x {doc.get('median_busbw_gbps') or 0:.3f}, the median of each "
        f"node's best pair)[/]",
        soft_wrap=True,
    )
    out(" " * width + "".join(f"{u:>{width}}" for u in units), soft_wrap=True)
    for a in units:
        row = ""
        for b in units:
            p = cell.get((a, b))
            txt = "-" if p is None else f"{p['busbw_gbps']:.3f}" + ("*" if p["slow"] else " ")
            row += f"{txt:>{width}}"
        out(f"{a:<{width}}{row}", soft_wrap=True)


def bench(
    rep: Report,
    doc: dict[str, Any],
    verbose: bool = False,
    ascii_only: bool = False,
    console: Console | None = None,
    run_dir: str | None = None,
) -> None:
    """nccl-tests' table (plus the slowest/fastest rank), a busbw bar chart, the average line,
    then any finding (wrong values, the gate, a crashed or hung rank)."""
    from ddpdoctor.report.ranks import plural

    con = console or make_console(ascii_only)
    out = Out(con, ascii_only)
    hosts = max(rep.nnodes, len({s.host for s in rep.ranks if s.host}))
    out(
        f"[bold]ddpdoctor bench-allreduce[/] · {rep.backend} · {plural(rep.world_size, 'rank')} on "
        f"{plural(hosts or 1, 'host')} · {doc['dtype']} {doc['op']} · {doc['iters']} iters, {doc['warmup']} warm-up"
    )
    if "pairs" in doc:
        _pairs(doc, out)
    else:
        _sweep(doc, out, ascii_only)
    for c in rep.checks:
        for f in c.findings:
            out(
                f"{_mark(LEVEL_MARKS, f.level.word, ascii_only)} [bold]{f.code}[/] {escape(f.message)}"
            )
            if f.hint:
                out(f"    [dim]→ {escape(f.hint)}[/]")
    if rep.root_cause:
        out(f"[bold red]Root cause:[/] {escape(rep.root_cause['message'])}")
    if verbose:
        _verbose(rep, con, out)
    word = {"pass": "[green bold]OK[/]", "warn": "[yellow bold]Warnings[/]"}.get(
        rep.status, "[red bold]FAILED[/]"
    )
    out(f"{word} ({rep.duration_s:.1f} s)")
    if run_dir:
        out(f"[dim]Rank files and logs: {run_dir}[/]")


PER_RANK_LINES = 8  # up to one node: a line per rank; beyond, one bar


def progress_lines(beats: dict[int, Heartbeat], now: float | None = None) -> list[str]:
    """A line per rank for one node's worth of ranks; beyond, a bar of checks × ranks done and
    the slowest rank (furthest behind, then longest in its phase), so the display keeps its size."""
    import time

    from ddpdoctor import registry

    if len(beats) <= PER_RANK_LINES:
        lines = []
        for r in sorted(beats):
            b = beats[r]
            state = "done" if b.finished else f"{b.check or 'starting'}: {b.phase}"
            lines.append(f"  rank {r:>3}  {escape(str(state))}")
        return lines
    order = list(registry.BUILTIN)
    extra = sorted({b.check for b in beats.values() if b.check and b.check not in order})
    order += extra
    n = len(order)

    def done(b: Heartbeat) -> int:
        return n if b.finished else order.index(b.check) if b.check in order else 0

    total, got = n * len(beats), sum(done(b) for b in beats.values())
    width = 30
    filled = width * got // total if total else 0
    bar = "#" * filled + "-" * (width - filled)
    line = f"  checks × ranks done [{bar}] {got:,}/{total:,}"
    behind = [b for b in beats.values() if not b.finished]
    if behind:
        now = time.time() if now is None else now
        slow = min(behind, key=lambda b: (done(b), b.t_phase or now, b.rank))
        line += (
            f" · slowest: rank {slow.rank} ({escape(slow.host or '?')}) in {slow.check or 'start-up'}"
            f" ({escape(str(slow.phase))}) for {max(0.0, now - (slow.t_phase or now)):.1f} s"
        )
    return [line]


class progress:
    """A live one-line status per rank on stderr while the ranks work; silent when stderr is not
    a terminal (CI logs) or when JSON goes to stdout."""

    def __init__(
        self,
        enabled: bool = True,
        ascii_only: bool = False,
        world_size: int = 0,
        title: str = "ddpdoctor check",
        console: Console | None = None,
    ) -> None:
        self.title = title
        self.console = console or make_console(ascii_only, stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.world_size = world_size
        self.live: Any = None

    def __enter__(self) -> Any:
        if self.enabled:
            from rich.live import Live

            self.live = Live(console=self.console, refresh_per_second=8, transient=True)
            self.live.__enter__()
        return self.tick

    def tick(self, beats: dict[int, Heartbeat], elapsed: float) -> None:
        if not self.live:
            return
        head = (
            f"[bold]{escape(self.title)}[/] · {elapsed:4.1f} s · {len(beats)}/{self.world_size} "
            "ranks reporting"
        )
        self.live.update(Text.from_markup("\n".join([head, *progress_lines(beats)])), refresh=True)

    def __exit__(self, *exc: Any) -> None:
        if self.live:
            self.live.__exit__(*exc)
