"""`--localize`'s verdict: from the pair results of `reach.probe`, name the node or the link
that keeps the job from forming, and the nodes to exclude. Pure: rows in, a report row out.

The idea is DLRover's two-round node check (pair the nodes; pair the failing ones again with
nodes known to be good: a node that fails with a good one is bad), done on every pair at once
because a TCP connect is cheap: the nodes that reach each other form groups; the largest group
is the healthy core; a node outside it is bad (DDN193), and a failing pair of two core nodes is
a bad link (DDN194), of which the later node in the host list is left out (the same choice on
every node, whichever rows reached it). A node that reaches nobody while the job has three nodes or more is taken
to be the sick one itself: one fault is likelier than all of its peers failing together."""

from __future__ import annotations

from ddpdoctor.job import reach
from ddpdoctor.node import codes
from ddpdoctor.node.hostlist import compress_hostlist
from ddpdoctor.report.model import CheckResult, Finding, Level

ROW_ID = "localize"
ROW_TITLE = "Nodes and links (--localize)"

NOT_RUNNING_HINT = (
    "Is the task running there (did srun start it, did it crash)? Run `ddpdoctor node` on that "
    "node, or exclude it (srun --exclude)."
)
_WHY = {
    reach.REFUSED: "the host answers but nothing listens: ddpdoctor is not running there",
    reach.UNREACHABLE: "no route or no answer: the host is down or its link is cut",
    reach.NO_ADDRESS: "its name does not resolve",
}


def pair_status(rows: dict[str, dict[str, str]], a: str, b: str) -> str | None:
    """ok if either end reached the other; else the failure one of them saw; None: unknown."""
    seen = [s for s in (rows.get(a, {}).get(b), rows.get(b, {}).get(a)) if s]
    if reach.OK in seen:
        return reach.OK
    return seen[0] if seen else None


def _groups(hosts: list[str], rows: dict[str, dict[str, str]]) -> list[list[str]]:
    """Nodes joined by working pairs, largest first (ties: the one listed first)."""
    parent = {h: h for h in hosts}

    def root(h: str) -> str:
        while parent[h] != h:
            parent[h] = parent[parent[h]]
            h = parent[h]
        return h

    for i, a in enumerate(hosts):
        for b in hosts[i + 1 :]:
            if pair_status(rows, a, b) == reach.OK:
                parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for h in hosts:
        groups.setdefault(root(h), []).append(h)
    return sorted(groups.values(), key=lambda g: (-len(g), hosts.index(g[0])))


def _failures(hosts: list[str], rows: dict[str, dict[str, str]], node: str) -> dict[str, str]:
    out = {}
    for peer in hosts:
        if peer != node:
            status = pair_status(rows, node, peer)
            if status not in (None, reach.OK):
                out[peer] = status
    return out


def judge(p: reach.Probe) -> tuple[CheckResult, list[str]]:
    """The report row and the nodes to exclude."""
    hosts, rows = p.hosts, p.rows
    pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1 :]]
    statuses = {pair: pair_status(rows, *pair) for pair in pairs}
    ok = sum(1 for s in statuses.values() if s == reach.OK)
    known = sum(1 for s in statuses.values() if s is not None)
    findings: list[Finding] = []
    exclude: list[str] = []
    core = _groups(hosts, rows)[0]
    if len(core) == 1:
        core, findings, exclude = _nobody_reached(p)
    else:
        for node in hosts:
            if node in core:
                continue
            fails = _failures(hosts, rows, node)
            kinds = sorted(set(fails.values()))
            why = "; ".join(_WHY.get(k, k) for k in kinds) or "no pair with it answered"
            findings.append(
                codes.NODE_UNREACHABLE.finding(
                    f"{node} cannot be reached from {compress_hostlist(core)} "
                    f"({len(fails)} of {len(hosts) - 1} pairs failed: {why})",
                    hint=NOT_RUNNING_HINT if kinds == [reach.REFUSED] else None,
                    host=node,
                    exclude=[node],
                    pairs=fails,
                )
            )
            exclude.append(node)
    for a, b in pairs:
        if a in core and b in core and statuses[(a, b)] not in (None, reach.OK):
            worse = b  # the later in the host list: every node, whatever it saw, picks the same
            findings.append(
                codes.LINK_DOWN.finding(
                    f"{a} and {b} cannot reach each other ({_WHY.get(statuses[(a, b)], statuses[(a, b)])}), "
                    f"although both reach the other nodes; leaving out {worse} avoids the link",
                    host=worse,
                    link=[a, b],
                    exclude=[worse],
                )
            )
            if worse not in exclude:
                exclude.append(worse)
    if p.listen_error:
        findings.append(
            codes.STORE_UNREACHABLE.finding(
                f"{p.me}: {p.listen_error}; the probe only dialled out from here",
                level=Level.WARN,
                hint="Free the port (rendezvous port + 1) or rerun when the old job has ended.",
                host=p.me,
            )
        )
    failed = known - ok
    summary = f"{len(hosts)} nodes, {known} of {len(pairs)} pairs seen from {p.me}: {ok} working"
    summary += f", {failed} failing" if failed else ", none failing"
    if exclude:
        summary += f"; exclude {compress_hostlist(exclude)}"
    levels = {f.level for f in findings}
    status = "fail" if Level.FAIL in levels else "warn" if Level.WARN in levels else "pass"
    metrics = {
        "pairs": {f"{a},{b}": s for (a, b), s in statuses.items() if s is not None},
        "exclude": exclude,
        "duration_s": p.duration_s,
    }
    return (
        CheckResult(ROW_ID, ROW_TITLE, status, summary, findings, metrics=metrics),
        exclude,
    )


def _nobody_reached(p: reach.Probe) -> tuple[list[str], list[Finding], list[str]]:
    """No working pair at all, as this node sees it."""
    mine = p.rows.get(p.me, {})
    peers = [h for h in p.hosts if h != p.me]
    if any(mine.get(h) == reach.REFUSED for h in peers):
        # a peer's host answered at the network level, so this node's own link works: the
        # peers it could not reach are the sick ones (refused: up, but ddpdoctor is not there)
        findings = [
            codes.NODE_UNREACHABLE.finding(
                f"{h} cannot be reached from {p.me} ({_WHY.get(mine.get(h, ''), 'no answer')})",
                hint=NOT_RUNNING_HINT if mine.get(h) == reach.REFUSED else None,
                host=h,
                exclude=[h],
                pairs={p.me: mine.get(h, reach.UNREACHABLE)},
            )
            for h in peers
        ]
        return [p.me], findings, peers
    if len(p.hosts) == 2:
        other = peers[0]
        finding = codes.LINK_DOWN.finding(
            f"{p.me} and {other} cannot reach each other ({_WHY.get(mine.get(other, ''), 'no answer')}); "
            "with two nodes the probe cannot tell which end is at fault: pair each with a third node",
            host=other,
            link=[p.me, other],
            exclude=[],
        )
        return [p.me], [finding], []
    kinds = sorted({mine.get(h, reach.UNREACHABLE) for h in peers})
    finding = codes.NODE_UNREACHABLE.finding(
        f"{p.me} (this node) reaches none of its {len(peers)} peers "
        f"({'; '.join(_WHY.get(k, k) for k in kinds)}): its own link is the likeliest fault",
        host=p.me,
        exclude=[p.me],
        pairs=mine,
    )
    return [p.me], [finding], [p.me]
