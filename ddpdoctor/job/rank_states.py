"""What became of each rank: from its rank file and heartbeat on this node, from what the
launcher saw (hung, stopped, dead, killed), or, for ranks on other nodes, from rank 0's exchanges
and their pulse in the rendezvous store. Also the root cause: the earliest failure."""

from __future__ import annotations

import signal
import time
from typing import Any

from ddpdoctor.report.model import CRASHED, HUNG, MISSING, OK, Finding, Level, RankState
from ddpdoctor.report.problems import get
from ddpdoctor.report.ranks import ranks_txt


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


def remote_view(
    by_check: dict[str, dict[int, dict[str, Any]]], order: list[str]
) -> dict[int, dict[str, Any]]:
    """What rank 0's exchanges tell about each rank: its host/pid (from env) and the last check
    it reported. This is all we know of ranks on other nodes, or under the user's launcher."""
    view: dict[int, dict[str, Any]] = {}
    for cid in order:
        for r, entry in by_check.get(cid, {}).items():
            v = view.setdefault(r, {})
            v["last_check"] = cid
            data = entry.get("data") or {}
            if cid == "env":
                v["host"], v["pid"] = data.get("host"), data.get("pid")
            if cid == "process_group":
                v["device"] = data.get("device")
    return view


def assess(
    world_size: int,
    docs: dict[int, dict[str, Any]],
    beats: dict[int, dict[str, Any]],
    outcome: Any,
    remote: dict[int, dict[str, Any]] | None = None,
    last_check: str | None = None,
    pulses: dict[int, dict[str, Any]] | None = None,
) -> list[RankState]:
    states = []
    hung = set(getattr(outcome, "hung_ranks", ()) or ())
    killed = set(getattr(outcome, "killed_ranks", ()) or ())
    dead_at: dict[int, float] = dict(getattr(outcome, "dead_at", {}) or {})
    stopped = set(getattr(outcome, "stopped_ranks", ()) or ())
    exitcodes: dict[int, int] = dict(getattr(outcome, "exitcodes", {}) or {})
    pids: dict[int, int] = dict(getattr(outcome, "pids", {}) or {})
    killed_at = getattr(outcome, "killed_at", None) or time.time()
    remote, pulses = remote or {}, pulses or {}
    known = set(range(world_size)) if world_size else set(docs) | set(beats) | set(remote)
    for rank in sorted(known):
        doc, beat = docs.get(rank, {}), beats.get(rank, {})
        if not doc and not beat and rank in remote:
            states.append(remote_state(rank, remote[rank], last_check, pulses.get(rank)))
            continue
        st = RankState(
            rank=rank,
            local_rank=doc.get("local_rank"),
            host=doc.get("host") or beat.get("host"),
            pid=doc.get("pid") or beat.get("pid") or pids.get(rank),
            device=doc.get("device"),
            last_check=beat.get("check") or doc.get("last_check"),
            phase=beat.get("phase"),
            exitcode=exitcodes.get(rank),
        )
        st.signal = signal_name(st.exitcode)
        if doc.get("finished") or beat.get("finished"):
            st.state = OK
        elif doc.get("terminated"):
            term = doc["terminated"]
            st.state, st.signal = CRASHED, term.get("signal")
            st.failed_at = term.get("t")
            st.detail = (
                f"terminated by the launcher while in {term.get('check')} ({term.get('phase')})"
            )
        elif rank in hung and beat:
            st.state = HUNG
            # a stopped process stops its alive ticks too: that is when it stopped responding
            last = beat.get("t_alive") if rank in stopped else beat.get("t_phase")
            st.failed_at = last or killed_at
            how = "; the process was stopped (SIGSTOP or a debugger)" if rank in stopped else ""
            st.detail = (
                f"stopped responding in {beat.get('check')} ({beat.get('phase')}) "
                f"{killed_at - st.failed_at:.1f} s before the verdict{how}"
            )
        elif rank in killed and beat:
            st.state = OK
            st.detail = (
                f"alive, waiting in {beat.get('check')} ({beat.get('phase')}) when ddpdoctor "
                f"ended the run"
            )
        elif not beat and not doc:
            st.state = MISSING
            st.failed_at = getattr(outcome, "started_at", None)
            st.detail = "never reached init_process_group (no heartbeat at all)"
            if rank in stopped:
                st.detail += "; the process was stopped (SIGSTOP or a debugger)"
        else:
            st.state = CRASHED
            st.failed_at = dead_at.get(rank) or beat.get("t_alive") or doc.get("started_at")
            why = f"exit code {st.exitcode}" if st.exitcode is not None else "the process ended"
            if st.signal:
                why = f"killed by {st.signal}"
            st.detail = f"{why} in {st.last_check} ({st.phase})"
        states.append(st)
    return states


def remote_state(
    rank: int, seen: dict[str, Any], last_check: str | None, pulse: dict[str, Any] | None
) -> RankState:
    """A rank known only through rank 0: its exchanges, and (after a failure) its pulse in the store."""
    st = RankState(
        rank=rank,
        host=seen.get("host"),
        pid=seen.get("pid"),
        device=seen.get("device"),
        last_check=seen.get("last_check"),
    )
    if seen.get("last_check") == last_check:
        st.state, st.detail = OK, "reported every check through rank 0"
        return st
    where = f"(see the output on {st.host or 'its node'})"
    if pulse is None:
        st.state, st.detail = CRASHED, f"stopped reporting after {seen.get('last_check')} {where}"
    elif pulse.get("alive") or pulse.get("phase") == "finished":
        st.state = OK
        now = (
            "finished"
            if pulse.get("phase") == "finished"
            else f"alive, last in {pulse.get('phase')}"
        )
        st.detail = (
            f"{now}; its results after {seen.get('last_check')} did not reach rank 0 {where}"
        )
    else:
        st.state, st.phase = HUNG, pulse.get("phase")
        last = pulse.get("phase") or "an unknown phase"
        st.detail = (
            f"stopped reporting after {seen.get('last_check')} and its pulse in the rendezvous store "
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
            s.signal == "SIGTERM",
            s.failed_at if s.failed_at is not None else float("inf"),
            s.rank,
        ),
    )


def rank_finding(st: RankState, waited: list[int]) -> Finding:
    where = f"{st.host or '?'}, pid {st.pid}" if st.pid else st.host or "?"
    if st.state == HUNG:
        msg = f"rank {st.rank} ({where}) {st.detail}"
        if waited:
            msg += f"; {ranks_txt(waited)} waited for it"
        return get("rank-hung").finding(msg, [st.rank], host=st.host, phase=st.phase)
    if st.state == MISSING:
        msg = f"rank {st.rank} {st.detail}"
        if waited:
            msg += f"; {ranks_txt(waited)} waited for it"
        return get("rank-missing").finding(msg, [st.rank], host=st.host)
    level = Level.WARN if st.signal == "SIGTERM" else Level.FAIL
    return get("rank-crashed").finding(
        f"rank {st.rank} ({where}) crashed: {st.detail}",
        [st.rank],
        level=level,
        host=st.host,
        exitcode=st.exitcode,
        signal=st.signal,
    )
