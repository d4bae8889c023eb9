"""The run folder: the only thing that crosses between the parent (`ddpdoctor.job`) and the ranks
(`ddpdoctor.rank`). Each file has a typed document with a version, written atomically and read
tolerantly, so a crash or a hang loses nothing already known and a reader never raises.

    spec.json        JobSpec     the parent → every rank: what to run, how, with which nonce
    rank-R.json      RankDoc     rank R → the parent: its identity and every check's entry so far
    rank-R.beat      Heartbeat   rank R → the parent: where it is now; `t_alive` ticks while it waits
    rank-R.log       text        rank R's own stdout and stderr under the ddpdoctor launcher
    gathered.json    Gathered    rank 0 → the parent: every rank's entries, as exchanged
    torchrun.log     text        torchrun's own output

Every document carries the run's nonce: a file left in a reused `--run-dir` by another run is
ignored rather than mixed into this run's report."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from ddpdoctor import rankdiff

VERSION = 1
SPEC = "spec.json"
GATHERED = "gathered.json"
LAUNCHER_LOG = "torchrun.log"

# Check entry statuses on the rank side (the report's statuses are judged from these).
ENTRY_OK, ENTRY_SKIP, ENTRY_ERROR, ENTRY_TIMEOUT = "ok", "skip", "error", "timeout"

LOCK = ".ddpdoctor.lock"
_OURS = re.compile(
    r"rank-\d+\.(?:json|beat|log|claim)|(?:trace|spawner)-\d+\.json|stack-\d+\.txt|fr-\d+\.json"
    r"|fr-request"
)

T = TypeVar("T")


@functools.cache
def _names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def _known(cls: type[T], d: dict[str, Any]) -> dict[str, Any]:
    """The keys of `d` that `cls` declares: a newer writer's extra fields are ignored."""
    names = _names(cls)
    return {k: v for k, v in d.items() if k in names}


@dataclass
class JobSpec:
    """What the parent asks every rank to do. Under the user's own launcher there is no spec file
    and each rank builds the same one locally (`managed` is then False)."""

    checks: list[str]
    timeout: float
    backend: str
    backend_reason: str = ""
    nonce: str = ""
    managed: bool = False
    nnodes: int = 1
    world_size: int = 1
    master_addr: str | None = None
    master_port: int | None = None
    node_rank: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> JobSpec:
        d = _known(cls, d)
        d["checks"] = [str(c) for c in d.get("checks") or []]
        d["nnodes"] = int(d.get("nnodes") or 1)
        d["world_size"] = int(d.get("world_size") or 1)
        return cls(**d)


@dataclass
class CheckEntry:
    """One check's outcome on one rank: `data` on success, the error and the phase it happened in
    otherwise. Keys of `data` starting with "_" are raw material for the judge only."""

    status: str
    data: dict[str, Any] = field(default_factory=dict)
    reason: str = ""  # why it was skipped
    error: str = ""
    traceback: str = ""
    phase: str | None = None
    duration_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == ENTRY_OK

    @property
    def failed(self) -> bool:
        return self.status in (ENTRY_ERROR, ENTRY_TIMEOUT)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CheckEntry:
        d = _known(cls, d)
        d["data"] = d.get("data") or {}
        return cls(**d)


ORPHANED = "launcher gone"  # a Termination's signal when the rank ended itself: torchrun died


@dataclass
class Termination:
    """The launcher tore this rank down (SIGTERM after another rank failed), or the rank ended
    itself because its launcher was gone (ORPHANED)."""

    signal: str
    t: float
    check: str | None = None
    phase: str | None = None


@dataclass
class ExchangeError:
    """This rank could not exchange its results after `check`; later collective checks skip."""

    check: str
    error: str


@dataclass
class RankDoc:
    """Everything one rank knows about itself, rewritten after every check."""

    rank: int
    local_rank: int = 0
    host: str = ""
    pid: int = 0
    nonce: str = ""
    device: str | None = None
    started_at: float = 0.0
    finished: bool = False
    finished_at: float | None = None
    terminated: Termination | None = None
    last_check: str | None = None
    checks: dict[str, CheckEntry] = field(default_factory=dict)
    exchange_error: ExchangeError | None = None
    exchange_bytes: dict[str, int] = field(default_factory=dict)  # sent, received, exchanges
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RankDoc:
        d = _known(cls, d)
        d["checks"] = {
            str(k): CheckEntry.from_json(v)
            for k, v in (d.get("checks") or {}).items()
            if isinstance(v, dict)
        }
        term, exch = d.get("terminated"), d.get("exchange_error")
        d["terminated"] = Termination(**_known(Termination, term)) if term else None
        d["exchange_error"] = ExchangeError(**_known(ExchangeError, exch)) if exch else None
        return cls(**d)


@dataclass
class Heartbeat:
    """Where a rank is now. `t_phase` moves when it starts a new phase, `t_alive` ticks every half
    second from a side thread: a stale `t_alive` means the process itself is stopped."""

    rank: int
    pid: int = 0
    host: str = ""
    nonce: str = ""
    check: str | None = None
    phase: str | None = "starting"
    t_phase: float = 0.0
    t_alive: float = 0.0
    finished: bool = False
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Heartbeat:
        return cls(**_known(cls, d))


@dataclass
class Pulse:
    """A rank's pulse in the rendezvous store as rank 0 sampled it after a failure (multi-node)."""

    alive: bool
    pulses: int | None = None
    phase: str | None = None


@dataclass
class Identity:
    """Who a rank is, sent with every exchange: all that is known of a rank on another node."""

    host: str = ""
    pid: int = 0
    device: str | None = None


GATHERED_VERSION = 2  # 1: per-rank objects with nested deltas; 2: rows grouped by shape


@dataclass
class Gathered:
    """Rank 0's copy of every rank's entries, as the exchanges delivered them; the only source for
    ranks on other nodes. `liveness` is filled after a failure on multi-node runs."""

    nonce: str = ""
    checks: dict[str, dict[int, CheckEntry]] = field(default_factory=dict)
    ranks: dict[int, Identity] = field(default_factory=dict)
    liveness: dict[int, Pulse] = field(default_factory=dict)
    version: int = GATHERED_VERSION
    # each check's encoded text, with the entries and hosts it was encoded from (see to_text)
    _encoded: dict[str, tuple[tuple[Any, ...], str]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def to_text(self) -> str:
        """The file's text, as json.dumps(to_json()) would write it, but each check's part is
        encoded once and reused while its entries are the same objects on the same hosts: rank 0
        rewrites the file after every check, and re-encoding the earlier checks each time made
        its writes at 16,384 ranks grow with the square of the number of checks. The cache keeps
        the entries themselves, so a replaced entry (or a new identity's host) is seen."""
        parts = []
        for cid, per in self.checks.items():
            key = (*per.items(), *(self.ranks[r].host if r in self.ranks else "" for r in per))
            hit = self._encoded.get(cid)
            if hit is None or hit[0] != key:
                hit = self._encoded[cid] = (key, _dumps(_encode_check(per, self.ranks)))
            parts.append(f"{_dumps(cid)}: {hit[1]}")
        head = _dumps(self.to_json(checks=False))
        return f'{head[:-1]}, "checks": {{{", ".join(parts)}}}}}'

    def to_json(self, checks: bool = True) -> dict[str, Any]:
        """Version 2: each check's data once in full (`base`, the lowest rank's), and every rank
        as one row `[rank, ref, meta, duration_s, *values]`: the values that differ from its
        reference (`ref` -1: the base; else its host's first rank, whose row comes earlier),
        in groups that share the paths of those values (`rankdiff`). Statuses, errors and phases
        are a table of distinct `meta` rows; identities are `[rank, host, pid, device]` rows with
        the host names listed once. At 16,384 ranks the file holds what differs, not N copies."""
        hosts: dict[str, int] = {}
        ranks = [
            [r, hosts.setdefault(i.host, len(hosts)), i.pid, i.device]
            for r, i in sorted(self.ranks.items())
        ]
        doc = {
            "version": GATHERED_VERSION,
            "nonce": self.nonce,
            "hosts": list(hosts),
            "ranks": ranks,
            "liveness": [[r, p.alive, p.pulses, p.phase] for r, p in sorted(self.liveness.items())],
        }
        if checks:
            doc["checks"] = {
                cid: _encode_check(per, self.ranks) for cid, per in self.checks.items()
            }
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Gathered:
        version = int(d.get("version") or 1)
        if version < 2:
            return _from_json_v1(d)
        hosts = [str(h) for h in d.get("hosts") or []]
        return cls(
            nonce=str(d.get("nonce") or ""),
            checks={str(cid): _decode_check(doc) for cid, doc in (d.get("checks") or {}).items()},
            ranks={int(r): Identity(hosts[h], pid, dev) for r, h, pid, dev in d.get("ranks") or []},
            liveness={
                int(r): Pulse(bool(alive), pulses, phase)
                for r, alive, pulses, phase in d.get("liveness") or []
            },
            version=version,
        )


_ROW = 4  # a row's fields before its values: rank, ref, meta, duration_s


def _encode_check(per: dict[int, CheckEntry], identities: dict[int, Identity]) -> dict[str, Any]:
    base = next((e.data for _r, e in sorted(per.items()) if e.data), {})
    metas: dict[tuple[Any, ...], int] = {}
    groups: dict[tuple[bool, rankdiff.Shape], list[list[Any]]] = {}
    leaders: dict[str, int] = {}
    for r, e in sorted(per.items()):
        host = identities[r].host if r in identities else ""
        lead = leaders.setdefault(host, r) if host else r
        ref = lead if lead != r else -1
        shape, values = rankdiff.diff(per[lead].data if ref >= 0 else base, e.data)
        meta = metas.setdefault((e.status, e.reason, e.error, e.traceback, e.phase), len(metas))
        groups.setdefault((ref >= 0, shape), []).append([r, ref, meta, e.duration_s, *values])
    # rows against the base first: every host's first rank is rebuilt before its host's others
    ordered = sorted(groups.items(), key=lambda kv: kv[0][0])
    return {
        "base": base,
        "meta": [list(m) for m in metas],
        "groups": [rankdiff.paths_json(shape) | {"rows": rows} for (_, shape), rows in ordered],
    }


def _decode_check(doc: dict[str, Any]) -> dict[int, CheckEntry]:
    base = doc.get("base") or {}
    metas = [
        (str(s or ENTRY_OK), str(rs), str(er), str(tb), ph) for s, rs, er, tb, ph in doc["meta"]
    ]
    out: dict[int, CheckEntry] = {}
    for group in doc.get("groups") or []:
        plan = rankdiff.compile_shape(rankdiff.shape_from_json(group), _ROW)
        for row in group["rows"]:
            ref = row[1]
            data = rankdiff.rebuild(base if ref < 0 else out[ref].data, plan, row)
            status, reason, error, tb, phase = metas[row[2]]
            out[int(row[0])] = CheckEntry(status, data, reason, error, tb, phase, row[3])
    return dict(sorted(out.items()))


def _from_json_v1(d: dict[str, Any]) -> Gathered:
    """gathered.json as version 1 wrote it (per-rank objects with nested `data_delta`s): still
    read, so that `ddpdoctor report` works on the run folders of earlier versions."""
    bases = d.get("bases") or {}
    checks: dict[str, dict[int, CheckEntry]] = {}
    for cid, per in (d.get("checks") or {}).items():
        base = bases.get(cid)
        out = checks[str(cid)] = {}
        # the writer lists ranks in order, so the rank a delta is taken from comes first
        for r, e in (per or {}).items():
            change = e.get("data_delta")
            if base is not None and change is not None:
                ref = out.get(int(e.get("delta_from", -1)))
                data = _patch_v1(ref.data if ref else base, change)
            else:
                data = e.get("data") or {}
            out[int(r)] = CheckEntry(
                status=e.get("status", ENTRY_OK),
                data=data,
                reason=e.get("reason", ""),
                error=e.get("error", ""),
                traceback=e.get("traceback", ""),
                phase=e.get("phase"),
                duration_s=e.get("duration_s"),
            )
    return Gathered(
        nonce=str(d.get("nonce") or ""),
        checks=checks,
        ranks={int(r): Identity(**_known(Identity, i)) for r, i in (d.get("ranks") or {}).items()},
        liveness={int(r): Pulse(**_known(Pulse, p)) for r, p in (d.get("liveness") or {}).items()},
        version=1,
    )


def _patch_v1(base: Any, change: Any) -> Any:
    """Version 1's nested delta undone: {"$set": v} replaces, {"$gone": true} removes a key."""
    if not isinstance(change, dict):
        return change
    if "$set" in change and len(change) == 1:
        return change["$set"]
    if not change or not isinstance(base, dict):
        return base
    out = dict(base)
    for k, c in change.items():
        if type(c) is dict and len(c) == 1 and c.get("$gone") is True:
            out.pop(k, None)
        else:
            out[k] = _patch_v1(base.get(k), c)
    return out


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Reading 16,384 ranks' results makes a few million containers that all stay alive: with the
    cyclic collector running, each of its passes walks all of them again and the read turns
    quadratic (18 s instead of 2 s at 16,384 ranks). Nothing read here forms cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _dumps(data: Any) -> str:
    return json.dumps(data, default=str)


def write_json(path: Path, data: Any) -> None:
    """Write so that a reader never sees half a file (write a sibling, then rename)."""
    write_text(path, _dumps(data))


def write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def read_json(path: Path) -> Any | None:
    """None when the file is absent or unreadable: collectors never raise."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


class RunFolder:
    """Names and typed reads/writes of one run folder. Reads skip what is unreadable, malformed, or
    stamped with another run's nonce (when this run's nonce is known)."""

    def __init__(self, path: Path | str, nonce: str | None = None) -> None:
        self.path = Path(path)
        self.nonce = nonce

    def rank_file(self, rank: int) -> Path:
        return self.path / f"rank-{rank}.json"

    def beat_file(self, rank: int) -> Path:
        return self.path / f"rank-{rank}.beat"

    def log_file(self, rank: int) -> Path:
        return self.path / f"rank-{rank}.log"

    def stack_file(self, rank: int) -> Path:
        """Every thread's Python stack, written by the rank itself on SIGUSR1 (faulthandler)."""
        return self.path / f"stack-{rank}.txt"

    def flight_file(self, rank: int) -> Path:
        """The rank's flight-recorder dump, written by its side thread on request (rank/flight.py)."""
        return self.path / f"fr-{rank}.json"

    @property
    def flight_request(self) -> Path:
        """Touched by the launcher at a verdict: every rank dumps its flight recorder."""
        return self.path / "fr-request"

    @property
    def spec_file(self) -> Path:
        return self.path / SPEC

    @property
    def gathered_file(self) -> Path:
        return self.path / GATHERED

    @property
    def launcher_log(self) -> Path:
        return self.path / LAUNCHER_LOG

    def _ours(self, nonce: str) -> bool:
        return not self.nonce or nonce == self.nonce

    def write_spec(self, spec: JobSpec) -> None:
        write_json(self.spec_file, spec.to_json())

    def read_spec(self) -> JobSpec | None:
        raw = read_json(self.spec_file)
        try:
            return JobSpec.from_json(raw) if isinstance(raw, dict) else None
        except (TypeError, ValueError):
            return None

    def write_rank(self, doc: RankDoc) -> None:
        write_json(self.rank_file(doc.rank), doc.to_json())

    def write_beat(self, beat: Heartbeat) -> None:
        write_json(self.beat_file(beat.rank), beat.to_json())

    def write_gathered(self, gathered: Gathered) -> None:
        write_text(self.gathered_file, gathered.to_text())

    def read_gathered(self) -> Gathered | None:
        with paused_gc():
            raw = read_json(self.gathered_file)
            try:
                g = Gathered.from_json(raw) if isinstance(raw, dict) else None
            except (TypeError, ValueError, KeyError, IndexError, AttributeError):
                return None
        return g if g is not None and self._ours(g.nonce) else None

    def read_ranks(self) -> dict[int, RankDoc]:
        docs = self._ranked("json", RankDoc.from_json)
        return {r: d for r, d in docs.items() if d.rank == r and self._ours(d.nonce)}

    def read_beats(self) -> dict[int, Heartbeat]:
        beats = self._ranked("beat", Heartbeat.from_json)
        return {r: b for r, b in beats.items() if b.rank == r and self._ours(b.nonce)}

    def _ranked(self, suffix: str, parse: Any) -> dict[int, Any]:
        out: dict[int, Any] = {}
        for p in self.path.glob(f"rank-*.{suffix}"):
            try:
                rank = int(p.name[len("rank-") : -len(suffix) - 1])
            except ValueError:
                continue
            raw = read_json(p)
            if not isinstance(raw, dict):
                continue
            try:
                out[rank] = parse(raw)
            except (TypeError, ValueError, KeyError):
                continue
        return out

    def lock(self) -> Any | None:
        """Take the folder for this run (an open file with an exclusive lock, held until closed or
        the process ends), or None when another run holds it. Raises OSError when the folder
        cannot be written at all (a read-only file system)."""
        import fcntl

        fh = open(self.path / LOCK, "a+")  # noqa: SIM115 - the caller holds it for the run
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return None
        return fh

    def remove_stale(self) -> None:
        """Remove what an earlier run left here: ddpdoctor's own files only (rank-N.json|beat|log,
        spec, gathered, torchrun's log), never another tool's `rank-*` files."""
        for p in self.path.iterdir():
            if p.name in (SPEC, GATHERED, LAUNCHER_LOG) or _OURS.fullmatch(p.name):
                if p.is_dir() and not p.is_symlink():
                    raise IsADirectoryError(21, "Is a directory", str(p))
                p.unlink(missing_ok=True)

    def claim_file(self, rank: int) -> Path:
        """The pids that started as this rank on this node, one per line, the owner first."""
        return self.path / f"rank-{rank}.claim"

    def claim(self, rank: int) -> int | None:
        """Take `rank` for this process, or return the pid of the live process that holds it.

        Under a hand launch two processes can be given one RANK; both would write the same rank
        files and each would wait for the rank nobody runs. The first one wins (O_EXCL); a later
        one is added to the list, so that the owner's report can name the duplicate. A claim left
        by a process that is gone is replaced."""
        path = self.claim_file(rank)
        me = f"{os.getpid()}\n".encode()
        for _ in range(3):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                owner = self.claimants(rank)[:1]
                if owner and owner[0] != os.getpid() and _alive_worker(owner[0]):
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(me)
                    return owner[0]
                path.unlink(missing_ok=True)  # left by a process that is gone
                continue
            with os.fdopen(fd, "wb") as fh:
                fh.write(me)
            return None
        return None

    def claimants(self, rank: int) -> list[int]:
        try:
            text = self.claim_file(rank).read_text()
        except (OSError, UnicodeDecodeError):
            return []
        return [int(x) for x in text.split() if x.isdigit()]

    def duplicates(self) -> dict[int, list[int]]:
        """{rank: pids} for every rank this node saw claimed by more than one process."""
        out: dict[int, list[int]] = {}
        for p in self.path.glob("rank-*.claim"):
            m = re.fullmatch(r"rank-(\d+)\.claim", p.name)
            pids = self.claimants(int(m.group(1))) if m else []
            if m and len(pids) > 1:
                out[int(m.group(1))] = pids
        return out

    def remove_rank_files(self, rank: int) -> None:
        """A folder reused by an earlier run of the same job id: drop this rank's old files."""
        for stale in (self.rank_file(rank), self.beat_file(rank)):
            stale.unlink(missing_ok=True)


def _alive_worker(pid: int) -> bool:
    """A live ddpdoctor process (a pid reused by another program is not a claimant)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"ddpdoctor" in fh.read()
    except OSError:
        return True  # no /proc: trust the pid


class UnsafeRunDir(Exception):
    """A default run folder that exists but is not safely ours (a symlink, another user's, or
    open to others): never written into, never deleted from."""


def private_dir(name: str) -> Path:
    """`$TMPDIR/<name>-<uid>`, created mode 0700, or reused when it is a real folder owned by us
    and closed to others. The ranks of one job on one node agree on it without talking (they
    share the name); a folder planted by someone else at that path is refused, not trusted."""
    import contextlib
    import stat
    import tempfile

    path = Path(tempfile.gettempdir()) / f"{name}-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafeRunDir(f"{path} is not a folder (a symlink or a file): refusing to use it")
    if st.st_uid != os.getuid():
        raise UnsafeRunDir(f"{path} belongs to uid {st.st_uid}, not to you: refusing to use it")
    if st.st_mode & 0o077:
        raise UnsafeRunDir(f"{path} is open to other users (mode {st.st_mode & 0o777:o})")
    return path
