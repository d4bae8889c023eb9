"""What became of each rank: from its rank file and heartbeat on this node, from what the
launcher saw (hung, stopped, dead, killed), or, for ranks on other nodes, from rank 0's exchanges
and their pulse in the rendezvous store. Also the root cause: the earliest failure."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from ddpdoctor.job.launch import LaunchOutcome
from ddpdoctor.report import problems
from ddpdoctor.report.model import CRASHED, HUNG, MISSING, OK, Finding, Level, RankState
from ddpdoctor.report.ranks import ranks_txt
from ddpdoctor.runfiles import ORPHANED, Gathered, Heartbeat, Pulse, RankDoc


def signal_name(exitcode: int | None) -> str | None:
    """torchrun reports death by signal N as exit code -N (a shell would say 128+N)."""
    if exitcode is None:
        return None
    num = -exitcode if exitcode < 0 else exitcode - 128 if 128 < exitcode < 160 else None
    if num is None:
        return None
    try:
        return signal.Signals(num).name
    except ValueError:
        return None


@dataclass
class Seen:
    """What rank 0's exchanges tell about a rank: all we know of ranks on other nodes, or under
    the user's launcher."""

    host: str | None = None
    pid: int | None = None
    device: str | None = None
    last_check: str | None = None


def remote_view(gathered: Gathered | None, order: list[str]) -> dict[int, Seen]:
    """Each rank's identity and the last check (in run order) that it reported through rank 0."""
    if gathered is None:
        return {}
    last: dict[int, str] = {}
    for cid in order:  # a later check overwrites: a rank's last check in run order
        last.update(dict.fromkeys(gathered.checks.get(cid, {}), cid))
    view = {r: Seen(last_check=cid) for r, cid in last.items()}
    for r, who in gathered.ranks.items():
        seen = view.get(r) or view.setdefault(r, Seen())
        seen.host, seen.pid, seen.device = who.host or None, who.pid or None, who.device
    return view


def assess(
    world_size: int,
    docs: dict[int, RankDoc],
    beats: dict[int, Heartbeat],
    outcome: LaunchOutcome | None,
    remote: dict[int, Seen] | None = None,
    last_check: str | None = None,
    pulses: dict[int, Pulse] | None = None,
    waited_in: str | None = None,
) -> list[RankState]:
    states = []
    o = outcome
    hung = set(o.hung_ranks) if o else set()
    killed = set(o.killed_ranks) if o else set()
    stopped = set(o.stopped_ranks) if o else set()
    dead_at, exitcodes, pids = (o.dead_at, o.exitcodes, o.pids) if o else ({}, {}, {})
    killed_at = (o.killed_at if o else None) or time.time()
    remote, pulses = remote or {}, pulses or {}
    known = set(range(world_size)) if world_size else set(docs) | set(beats) | set(remote)
    for rank in sorted(known):
        doc, beat = docs.get(rank), beats.get(rank)
        if doc is None and beat is None and rank in remote:
            states.append(remote_state(rank, remote[rank], last_check, pulses.get(rank), waited_in))
            continue
        st = RankState(
            rank=rank,
            local_rank=doc.local_rank if doc else None,
            host=(doc.host if doc else "") or (beat.host if beat else "") or None,
            pid=(doc.pid if doc else 0) or (beat.pid if beat else 0) or pids.get(rank),
            device=doc.device if doc else None,
            last_check=(beat.check if beat else None) or (doc.last_check if doc else None),
            phase=beat.phase if beat else None,
            exitcode=exitcodes.get(rank),
        )
        st.signal = signal_name(st.exitcode)
        if (doc and doc.finished) or (beat and beat.finished):
            st.state = OK
        elif doc and doc.terminated:
            term = doc.terminated
            st.state, st.signal = CRASHED, term.signal
            st.failed_at = term.t
            who = (
                "ended itself when its launcher died"
                if term.signal == ORPHANED
                else "terminated by the launcher"
            )
            st.detail = f"{who} while in {term.check} ({term.phase})"
        elif rank in hung and beat:
            st.state = HUNG
            # a stopped process stops its alive ticks too: that is when it stopped responding
            last = beat.t_alive if rank in stopped else beat.t_phase
            st.failed_at = last or killed_at
            how = "; the process was stopped (SIGSTOP or a debugger)" if rank in stopped else ""
            idle = f"{killed_at - st.failed_at:.1f} s"
            cores = o.busy.get(rank) if o else None
            if cores is not None:  # computing, not blocked: slow for this deadline
                st.detail = (
                    f"made no progress in {beat.check} ({beat.phase}) for {idle} while busy on "
                    f"the CPU ({cores:g} cores): not blocked, but slower than --timeout allows"
                )
            else:
                st.detail = (
                    f"stopped responding in {beat.check} ({beat.phase}) {idle} before the "
                    f"verdict{how}"
                )
        elif rank in killed and beat:
            st.state = OK
            when = (
                f"when the run was interrupted ({o.signal})"
                if o and o.verdict == "interrupted"
                else "when ddpdoctor ended the run"
            )
            st.detail = f"alive, waiting in {beat.check} ({beat.phase}) {when}"
        elif beat is None and doc is None:
            st.state = MISSING
            st.failed_at = o.started_at if o else None
            st.detail = "never reached init_process_group (no heartbeat at all)"
            if rank in stopped:
                st.detail += "; the process was stopped (SIGSTOP or a debugger)"
        else:
            st.state = CRASHED
            st.failed_at = (
                dead_at.get(rank)
                or (beat.t_alive if beat else None)
                or (doc.started_at if doc else None)
            )
            why = f"exit code {st.exitcode}" if st.exitcode is not None else "the process ended"
            if st.signal:
                why = f"killed by {st.signal}"
            st.detail = f"{why} in {st.last_check} ({st.phase})"
        states.append(st)
    return states


def remote_state(
    rank: int,
    seen: Seen,
    last_check: str | None,
    pulse: Pulse | None,
    waited_in: str | None = None,
) -> RankState:
    """A rank known only through rank 0: its exchanges, and (after a failure) its pulse in the
    store. Without a pulse sample, how rank 0's own wait ended is the evidence: a peer that dies
    closes its connections and rank 0 fails at once; one that is cut off or stuck lets rank 0 run
    into its deadline (`waited_in`, the check where a rank on rank 0's node timed out)."""
    st = RankState(
        rank=rank, host=seen.host, pid=seen.pid, device=seen.device, last_check=seen.last_check
    )
    if seen.last_check == last_check:
        st.state, st.detail = OK, "reported every check through rank 0"
        return st
    where = f"(see the output on {st.host or 'its node'})"
    if pulse is None and waited_in:
        st.state = HUNG
        st.detail = (
            f"stopped reporting after {seen.last_check} and rank 0 timed out waiting in "
            f"{waited_in}: cut off or stuck (no pulse was sampled from the store) {where}"
        )
    elif pulse is None:
        st.state, st.detail = CRASHED, f"stopped reporting after {seen.last_check} {where}"
    elif pulse.alive or pulse.phase == "finished":
        st.state = OK
        now = "finished" if pulse.phase == "finished" else f"alive, last in {pulse.phase}"
        st.detail = f"{now}; its results after {seen.last_check} did not reach rank 0 {where}"
    else:
        st.state, st.phase = HUNG, pulse.phase
        last = pulse.phase or "an unknown phase"
        st.detail = (
            f"stopped reporting after {seen.last_check} and its pulse in the rendezvous store "
            f"stopped: cut off or stuck, last in {last} {where}"
        )
    return st


def root_cause(states: list[RankState]) -> RankState | None:
    """The earliest failure; ranks the launcher tore down after someone else failed come last."""
    bad = [s for s in states if s.state != OK]
    if not bad:
        return None
    return min(
        bad,
        key=lambda s: (
            s.signal in ("SIGTERM", ORPHANED),
            s.failed_at if s.failed_at is not None else float("inf"),
            s.rank,
        ),
    )


def rank_finding(st: RankState, waited: list[int], others_failed: bool = True) -> Finding:
    """The finding for a failed rank. A rank that torchrun tore down (SIGTERM) after another
    rank failed is a consequence (a warning); torn down with nobody else failing, the run was
    cut short from outside and its unrun checks are no pass (a failure)."""
    where = f"{st.host or '?'}, pid {st.pid}" if st.pid else st.host or "?"
    if st.state == HUNG:
        msg = f"rank {st.rank} ({where}) {st.detail}"
        if waited:
            msg += f"; {ranks_txt(waited)} waited for it"
        return problems.RANK_HUNG.finding(msg, [st.rank], host=st.host, phase=st.phase)
    if st.state == MISSING:
        msg = f"rank {st.rank} {st.detail}"
        if waited:
            msg += f"; {ranks_txt(waited)} waited for it"
        return problems.RANK_MISSING.finding(msg, [st.rank], host=st.host)
    level = Level.WARN if st.signal == "SIGTERM" and others_failed else Level.FAIL
    return problems.RANK_CRASHED.finding(
        f"rank {st.rank} ({where}) crashed: {st.detail}",
        [st.rank],
        level=level,
        host=st.host,
        exitcode=st.exitcode,
        signal=st.signal,
    )


_EXCEPTION = re.compile(
    r"^(?:\[[^\]]*\]:?\s*)?((?:[\w.]+(?:Error|Exception|Interrupt)|OSError)\b.*)$"
)


def last_error(log: str) -> str | None:
    """The last exception line a crashed rank printed (its log under the ddpdoctor launcher):
    what `exit code 1` meant, e.g. OSError: [Errno 28] No space left on device."""
    for line in reversed(log.splitlines()[-200:]):
        m = _EXCEPTION.match(line.strip())
        if m:
            return m.group(1)[:300]
    return None


def explain_crashes(states: list[RankState], read_log: Callable[[int], str]) -> None:
    """Add the rank's own last error to a crash that only has an exit code."""
    for st in states:
        if st.state == CRASHED and not st.signal:
            err = last_error(read_log(st.rank))
            if err:
                st.detail += f": {err}"
