"""Flight-recorder dumps as data: torch's `_dump_fr_trace_json()` JSON, its pickles
(`TORCH_FR_DUMP_TEMP_FILE` / `TORCH_NCCL_DEBUG_INFO_TEMP_FILE` files, loaded only through
`safe_pickle`), and the JSON our ranks write at a verdict. A dump does not say whose it is: the
rank is the `rank` key ours add, else the digits that end the file name (torch names its files
PREFIX + rank), else its place in the folder."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpdoctor.flight.safe_pickle import UnsafePickle, loads

MAX_FILE_BYTES = 256 << 20  # a dump of a 20k-entry buffer is tens of MB
_TRAILING_RANK = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle|txt))?$")


class DumpError(ValueError):
    """A file that is not a readable flight-recorder dump (one line, for the user)."""


@dataclass
class Entry:
    """One collective as a rank recorded it."""

    group: str  # the pg id: the same group has the same id on every rank
    group_desc: str
    name: str  # the pg name (torch's group_name)
    seq: int  # collective_seq_id (p2p_seq_id for point-to-point)
    op: str  # "all_reduce", "broadcast", ... (the backend prefix dropped)
    input_sizes: list[Any]
    input_dtypes: list[str]
    state: str
    completed: bool
    is_p2p: bool = False
    created_ns: int = 0
    frames: list[tuple[str, int, str]] = field(default_factory=list)  # (path, line, function)

    def shape(self) -> str:
        sizes = ", ".join("x".join(map(str, s)) if s else "scalar" for s in self.input_sizes)
        dtypes = ",".join(sorted(set(self.input_dtypes)))
        return f"[{sizes}] {dtypes}".strip()

    def signature(self) -> tuple[str, str]:
        return self.op, self.shape()

    def user_site(self) -> str | None:
        """Where the user's code called it: the innermost frame in the user's own files, else
        the innermost outside torch (a library's). ddpdoctor's own frames are known by the
        package folder in their path, not by where it is installed here: the dump may come
        from another checkout or machine."""
        from ddpdoctor.trace.sites import is_user_file

        outside = [
            f
            for f in self.frames
            if "/torch/" not in f[0] and not f[0].startswith("<") and not _OWN.search(f[0])
        ]
        for path, line, func in [f for f in outside if is_user_file(f[0])] or outside:
            return f"{path}:{line} ({func})"
        return None


_OWN = re.compile(
    r"/ddpdoctor/(?:trace|rank|bench|job|flight|report|node|triage|lint)/[^/]+\.py$"
    r"|/ddpdoctor/[a-z_]+\.py$"
)  # ddpdoctor's own modules, wherever the checkout is (not a project folder named ddpdoctor)


@dataclass
class GroupStatus:
    last_enqueued: int = -1
    last_completed: int = -1


@dataclass
class Dump:
    rank: int
    source: str
    entries: list[Entry]
    status: dict[str, GroupStatus]  # by group id
    group_ranks: dict[str, list[int]]  # by group id, where the dump says
    host: str | None = None
    pid: int | None = None


def _int(v: Any, default: int = -1) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _frames(raw: Any) -> list[tuple[str, int, str]]:
    out = []
    for f in raw if isinstance(raw, list) else []:
        if isinstance(f, dict):
            out.append((str(f.get("filename", "")), _int(f.get("line"), 0), str(f.get("name", ""))))
    return out


def _entry(e: dict[str, Any]) -> Entry | None:
    pg = e.get("process_group") or ("", "")
    pg_id = e.get("pg_id")
    group = str(pg_id) if pg_id is not None else str(pg[0])
    is_p2p = bool(e.get("is_p2p"))
    seq = _int(e.get("p2p_seq_id") if is_p2p else e.get("collective_seq_id"))
    if seq < 0:
        return None
    name = str(e.get("profiling_name") or "")
    state = str(e.get("state") or "")
    return Entry(
        group=group,
        group_desc=str(pg[1]) if len(pg) > 1 else "",
        name=str(pg[0]),
        seq=seq,
        op=name.split(":", 1)[-1] or "?",
        input_sizes=list(e.get("input_sizes") or []),
        input_dtypes=[str(d) for d in e.get("input_dtypes") or []],
        state=state,
        # gloo never moves `state` past "scheduled"; a retired entry's work is done
        completed=state == "completed" or e.get("retired") is True,
        is_p2p=is_p2p,
        created_ns=_int(e.get("time_created_ns"), 0),
        frames=_frames(e.get("frames")),
    )


def _ranks_text(v: Any) -> list[int]:
    if isinstance(v, list):
        return [_int(x) for x in v]
    return [int(x) for x in re.findall(r"\d+", str(v or ""))]


def from_dict(d: Any, source: str, rank: int) -> Dump:
    """A dump from its decoded form; DumpError when it is not one."""
    if not isinstance(d, dict) or not isinstance(d.get("entries", []), list):
        raise DumpError(f"{source}: not a flight-recorder dump (no 'entries')")
    if "entries" not in d and "pg_status" not in d:
        raise DumpError(f"{source}: not a flight-recorder dump (no 'entries')")
    own = {str(g) for g in d.get("ddpdoctor_groups") or []}  # ddpdoctor's own traffic
    entries = [
        x
        for x in (_entry(e) for e in d.get("entries", []) if isinstance(e, dict))
        if x and x.name not in own
    ]
    kept = {e.group for e in entries}
    status = {}
    for gid, st in (d.get("pg_status") or {}).items():
        if isinstance(st, dict) and (not own or str(gid) in kept):
            status[str(gid)] = GroupStatus(
                _int(st.get("last_enqueued_collective")), _int(st.get("last_completed_collective"))
            )
    names = {e.group_desc: e.group for e in entries} | {str(e.group): e.group for e in entries}
    group_ranks = {}
    for name, cfg in (d.get("pg_config") or {}).items():
        ranks = _ranks_text(cfg.get("ranks")) if isinstance(cfg, dict) else []
        if ranks and str(name) in names:
            group_ranks[names[str(name)]] = ranks
    mine = d.get("rank")
    return Dump(
        rank=mine if isinstance(mine, int) else rank,
        source=source,
        entries=entries,
        status=status,
        group_ranks=group_ranks,
        host=d.get("host") if isinstance(d.get("host"), str) else None,
        pid=d.get("pid") if isinstance(d.get("pid"), int) else None,
    )


def decode(data: bytes, source: str) -> Any:
    """JSON or a pickle (safely) → plain data; DumpError otherwise."""
    if data[:1] == b"\x80":
        try:
            return loads(data)
        except UnsafePickle as exc:
            raise DumpError(f"{source}: refused, {exc}; nothing in it was run") from None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise DumpError(f"{source}: neither JSON nor a pickle") from None


def rank_from_name(path: Path) -> int | None:
    m = _TRAILING_RANK.search(path.name)
    return int(m.group(1)) if m else None


def read_file(path: Path, fallback_rank: int = 0) -> Dump:
    try:
        if not path.is_file():
            raise DumpError(f"{path}: not a regular file")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise DumpError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB")
        data = path.read_bytes()
    except OSError as exc:
        raise DumpError(f"cannot read {path}: {exc.strerror or exc}") from None
    rank = rank_from_name(path)
    return from_dict(decode(data, str(path)), str(path), fallback_rank if rank is None else rank)


def looks_like_dump(path: Path) -> bool:
    """Cheap sniff: a pickle, or JSON that mentions flight-recorder keys near its start."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    if head[:1] == b"\x80":
        return True
    text = head.lstrip()
    return text[:1] == b"{" and (
        b'"entries"' in head or b'"pg_status"' in head or b'"pg_config"' in head
    )


@dataclass
class Folder:
    dumps: list[Dump]
    refused: list[str]  # one line per file that was not read, and why


def read_path(path: Path) -> Folder:
    """Every dump in a folder (or one file). Files that are not dumps are skipped; a pickle
    that names code is refused and listed, never loaded."""
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    dumps, refused = [], []
    for i, p in enumerate(files):
        if path.is_dir() and not looks_like_dump(p):
            continue
        try:
            d = read_file(p, fallback_rank=i)
        except DumpError as exc:
            refused.append(str(exc))
            continue
        first = next((x for x in dumps if x.rank == d.rank), None)
        if first is not None:  # e.g. torch's JSON and pickle of one rank side by side
            refused.append(f"{p}: a second dump of rank {d.rank} (kept {first.source})")
            continue
        dumps.append(d)
    return Folder(dumps, refused)
