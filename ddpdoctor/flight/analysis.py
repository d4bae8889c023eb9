"""Where the ranks part, from their flight-recorder dumps. Per process group, each rank's last
enqueued and last completed collective (its sequence numbers: the same collective has the same
number on every rank of a group) give the collective every rank finished and the first one some
rank did not: the ranks that never enqueued it never joined it, those that did wait in it. At
one sequence number every rank must call the same op on the same shapes and dtypes; the first
number where they differ is the mismatch. Ranks without a dump (stopped, dead) are named, never
guessed at."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddpdoctor.flight.dumps import Dump, Entry
from ddpdoctor.report import problems
from ddpdoctor.report.model import Finding
from ddpdoctor.report.ranks import ranks_txt


@dataclass
class Side:
    """The ranks that called one (op, shape) at a sequence number, and where."""

    ranks: list[int]
    op: str
    shape: str
    site: str | None


@dataclass
class Group:
    """One process group across the ranks' dumps."""

    id: str
    desc: str
    members: list[int]
    no_dump: list[int]  # members that gave no dump
    last_completed: dict[int, int]
    last_enqueued: dict[int, int]
    parted_at: int | None = None  # the first collective some rank did not complete
    never_joined: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    # completed the parting collective and went on (to wait in a later one): with gloo's ring
    # a rank stopped late in a collective can still let the ranks after it finish
    ahead: list[int] = field(default_factory=list)
    op: str | None = None  # of the parting collective, as the waiting ranks recorded it
    site: str | None = None  # where the waiting ranks called it
    last_all: int = -1  # the last collective every rank with a dump completed
    last_all_op: str | None = None
    mismatch_at: int | None = None
    sides: list[Side] = field(default_factory=list)

    @property
    def label(self) -> str:
        known = self.desc and self.desc not in ("undefined", "")
        return f"group {self.id} ({self.desc})" if known else f"group {self.id}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "desc": self.desc,
            "members": self.members,
            "no_dump": self.no_dump,
            "last_completed": {str(r): s for r, s in sorted(self.last_completed.items())},
            "last_enqueued": {str(r): s for r, s in sorted(self.last_enqueued.items())},
            "parted_at": self.parted_at,
            "op": self.op,
            "site": self.site,
            "never_joined": self.never_joined,
            "waiting": self.waiting,
            "ahead": self.ahead,
            "last_completed_by_all": self.last_all,
            "last_completed_by_all_op": self.last_all_op,
            "mismatch_at": self.mismatch_at,
            "sides": [s.__dict__ for s in self.sides],
        }


@dataclass
class Flight:
    dumps: list[int]  # ranks with a dump
    world_size: int
    groups: list[Group]

    def to_json(self) -> dict[str, Any]:
        return {
            "ranks_with_dump": self.dumps,
            "world_size": self.world_size,
            "groups": [g.to_json() for g in self.groups],
        }

    def findings(
        self, where: dict[int, list[str]] | None = None, who: dict[int, str] | None = None
    ) -> list[Finding]:
        """The analysis in the catalog's codes. `where` is each rank's stack (innermost frame
        first, from the verdict's dumps) and `who` its label ("rank 1 (host, pid 42)")."""
        return _findings(self, where or {}, who or {})


def _collectives(d: Dump, gid: str) -> dict[int, Entry]:
    return {e.seq: e for e in d.entries if e.group == gid and not e.is_p2p}


def _group(gid: str, dumps: list[Dump], world_size: int) -> Group:
    mine = [d for d in dumps if gid in d.status or any(e.group == gid for e in d.entries)]
    listed = next((d.group_ranks[gid] for d in mine if d.group_ranks.get(gid)), None)
    if listed is None:  # the default group spans the world; another, the ranks that have it
        listed = list(range(world_size)) if gid == "0" else [d.rank for d in mine]
    members = sorted(set(listed) | {d.rank for d in mine})
    have = {d.rank for d in mine}
    seqs = {d.rank: _collectives(d, gid) for d in mine}
    done, enq = {}, {}
    for d in mine:
        st = d.status.get(gid)
        finished = [s for s, e in seqs[d.rank].items() if e.completed]
        done[d.rank] = max([st.last_completed if st else -1, *finished, 0])
        enq[d.rank] = max([st.last_enqueued if st else -1, *seqs[d.rank], 0, done[d.rank]])
    desc = next((e.group_desc for d in mine for e in d.entries if e.group == gid), "")
    g = Group(gid, desc, members, sorted(set(members) - have), done, enq)
    if not mine:
        return g
    g.last_all = min(done.values())
    g.last_all_op = next((seqs[r][g.last_all].op for r in seqs if g.last_all in seqs[r]), None)
    top = max(enq.values())
    if top > g.last_all or g.no_dump:
        parted = g.last_all + 1
        if top >= parted:
            g.parted_at = parted
            g.waiting = sorted(r for r in have if enq[r] >= parted and done[r] < parted)
            # no one waits: those that went ahead gave up on it (an error, a timeout), and
            # the ones behind are a consequence, not a cause
            g.never_joined = sorted(r for r in have if enq[r] < parted) if g.waiting else []
            g.ahead = sorted(r for r in have if done[r] >= parted) if g.waiting else []
            calls = [seqs[r][parted] for r in g.waiting if parted in seqs[r]]
            if calls:
                g.op, g.site = calls[0].op, calls[0].user_site()
    _mismatch(g, seqs)
    return g


def _mismatch(g: Group, seqs: dict[int, dict[int, Entry]]) -> None:
    common = sorted({s for per in seqs.values() for s in per})
    for s in common:
        calls = {r: per[s] for r, per in seqs.items() if s in per}
        if len(calls) < 2:
            continue
        by_sig: dict[tuple[str, str], list[int]] = {}
        for r, e in sorted(calls.items()):
            by_sig.setdefault(e.signature(), []).append(r)
        if len(by_sig) > 1:
            g.mismatch_at = s
            g.sides = [
                Side(rs, op, shape, calls[rs[0]].user_site()) for (op, shape), rs in by_sig.items()
            ]
            return


def analyze(dumps: list[Dump], world_size: int | None = None) -> Flight:
    world = world_size or (max((d.rank for d in dumps), default=-1) + 1)
    ids = sorted(
        {e.group for d in dumps for e in d.entries} | {g for d in dumps for g in d.status},
        key=lambda x: (len(x), x),
    )
    return Flight(sorted(d.rank for d in dumps), world, [_group(i, dumps, world) for i in ids])


def _is(ranks: list[int]) -> str:
    return "is" if len(ranks) == 1 else "are"


def _at(rank: int, where: dict[int, list[str]]) -> str:
    frames = where.get(rank) or []
    if not frames:
        return ""
    called = f" (called from {frames[1]})" if len(frames) > 1 else ""
    return f"; it is at {frames[0]}{called}"


def _findings(f: Flight, where: dict[int, list[str]], who: dict[int, str]) -> list[Finding]:
    def name(r: int) -> str:
        return who.get(r) or f"rank {r}"

    out: list[Finding] = []
    for g in f.groups:
        if g.mismatch_at is not None:
            sides = "; ".join(
                f"{ranks_txt(s.ranks)} {s.op} {s.shape}" + (f" at {s.site}" if s.site else "")
                for s in g.sides
            )
            out.append(
                problems.FR_COLLECTIVE_MISMATCH.finding(
                    f"collective #{g.mismatch_at} of {g.label} differs across ranks: {sides}",
                    sorted(r for s in g.sides for r in s.ranks),
                    group=g.id,
                    seq=g.mismatch_at,
                )
            )
        if g.parted_at is None:
            continue
        call = f"{g.op or 'collective'} #{g.parted_at} of {g.label}"
        site = f" (called at {g.site})" if g.site else ""
        last = f"#{g.last_all}" + (f" ({g.last_all_op})" if g.last_all_op else "")
        tail = f"; the last collective every rank completed is {last}"
        waiting = f"; {ranks_txt(g.waiting)} {_is(g.waiting)} stuck in it{site}"
        for r in g.never_joined:
            out.append(
                problems.FR_NEVER_JOINED.finding(
                    f"{name(r)} never joined {call}{_at(r, where)}"
                    f"{waiting if g.waiting else ''}{tail}",
                    [r],
                    group=g.id,
                    seq=g.parted_at,
                    last_completed_by_all=g.last_all,
                    waiting=g.waiting,
                )
            )
        if not g.never_joined and g.waiting:
            gone = (
                f"; {', '.join(name(r) for r in g.no_dump)} gave no dump (stopped or dead)"
                f"{''.join(_at(r, where) for r in g.no_dump[:1])}"
                if g.no_dump
                else "; only this rank's dump was given: the others' dumps tell who did not join"
                if len(f.dumps) == 1
                else ""
                if g.ahead
                else "; every rank joined it and none finished (a transport stall, or a rank"
                " stopped inside it)"
            )
            went_on = (
                f"; {ranks_txt(g.ahead)} completed it and went on to a later collective"
                if g.ahead
                else ""
            )
            out.append(
                problems.FR_STUCK_IN_COLLECTIVE.finding(
                    f"{ranks_txt(g.waiting)} {_is(g.waiting)} stuck in {call}{site}{gone}"
                    f"{went_on}{tail}",
                    sorted(g.waiting + g.ahead + g.no_dump),
                    group=g.id,
                    seq=g.parted_at,
                    last_completed_by_all=g.last_all,
                    no_dump=g.no_dump,
                    ahead=g.ahead,
                )
            )
    named = {r for x in out for r in x.ranks}
    silent = [r for r in range(f.world_size) if r not in f.dumps and r not in named]
    if silent:
        out.append(
            problems.FR_NO_DUMP.finding(
                f"{', '.join(name(r) for r in silent)} left no flight-recorder dump", silent
            )
        )
    calm = all(g.parted_at is None and g.mismatch_at is None for g in f.groups)
    if calm and f.groups:
        done = "; ".join(
            f"{g.label} #{g.last_all}" + (f" ({g.last_all_op})" if g.last_all_op else "")
            for g in f.groups
        )
        out.append(
            problems.FR_IN_STEP.finding(
                f"flight recorder: {len(f.dumps)} dump(s), every group in step, nothing pending "
                f"(last collective every rank completed: {done})",
                f.dumps,
            )
        )
    return out
