"""The per-rank record of a traced run, `trace-R.json` in the run folder: the only thing that
crosses from a traced rank to the judges. Written atomically and often (a side thread, every
epoch end, every K steps, at exit and on SIGTERM), so a crash or a kill loses at most a second.
Bounded in size: indices become digests and sketches, sequences keep their first entries.
Pure data: no torch import."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ddpdoctor.trace.sites import Site

SCHEMA = "ddpdoctor.trace/1"
VERSION = 1

# Event kinds (the `kind` of an Event).
INIT = "init"  # init_process_group called
DESTROY = "destroy"  # destroy_process_group called; data: after_barrier
DDP_BUILT = "ddp"  # DistributedDataParallel constructed; data: devices facts
BEFORE_INIT = "before-init"  # data: what (ddp, collective, sampler)
GROUP_ALIVE = "group-alive-at-exit"  # the script ended with the group still initialised
SCALER_CREATED = "scaler-created"  # data: nth, after_steps
CLIP_SCALED = "clip-scaled"  # clip_grad_norm_ on still-scaled gradients
ZERO_GRAD_BEFORE_STEP = "zero-grad-before-step"  # zero_grad between backward and step
STEP_WITHOUT_UPDATE = "step-without-update"  # scaler.step() never followed by update()
SCALE_WITHOUT_BACKWARD = (
    "scaler-step-without-backward"  # scaler.step() with no backward since scale
)

MAX_EVENTS = 200
MAX_COLLECTIVES = 256
MAX_STEPS_KEPT = 2000
MAX_FINGERPRINTS = 64
MAX_WRITES = 200


def trace_file(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / f"trace-{rank}.json"


def stack_file(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / f"stack-{rank}.txt"


@dataclass
class Event:
    """Something that happened once (or the first time) at a place in the user's code."""

    kind: str
    where: Site | None = None
    step: int = 0
    t: float = 0.0
    count: int = 1
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["where"] = self.where.to_json() if self.where else None
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Event:
        return cls(
            kind=d["kind"],
            where=Site.from_json(d.get("where")),
            step=int(d.get("step", 0)),
            t=float(d.get("t", 0.0)),
            count=int(d.get("count", 1)),
            data=dict(d.get("data") or {}),
        )


@dataclass
class DataPass:
    """One pass over one DataLoader on one rank (an epoch, as the loader sees it)."""

    loader: int  # the loader's creation ordinal on this rank (same script: same on every rank)
    epoch: int  # how many passes this loader had before this one
    created: Site | None = None  # where the DataLoader was built
    where: Site | None = None  # where it was iterated (the `for` line)
    kind: str = "indices"  # "indices" (map-style) or "batches" (iterable: batch fingerprints)
    sampler: str = ""  # class name of the index sampler (or the sampler inside a batch sampler)
    distributed: bool = False  # a DistributedSampler shards it
    shuffle: bool | None = None
    sampler_site: Site | None = None  # where that sampler was built
    set_epoch: int | None = None  # the value passed to set_epoch before this pass (None: never)
    dataset_len: int | None = None
    batches: int = 0
    items: int = 0
    complete: bool = False
    order_digest: str = ""
    set_digest: str = ""
    sketch: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)  # shallow: asdict's deep copy of the sketch costs milliseconds
        for key in ("created", "where", "sampler_site"):
            site = getattr(self, key)
            d[key] = site.to_json() if site else None
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DataPass:
        d = dict(d)
        for key in ("created", "where", "sampler_site"):
            d[key] = Site.from_json(d.get(key))
        return cls(**d)


@dataclass
class Collective:
    """One collective the script called: op, dtype, shape, group, and where."""

    op: str
    dtype: str = ""
    shape: list[int] = field(default_factory=list)
    group: str = "world"
    where: Site | None = None

    def key(self) -> str:
        return f"{self.op}|{self.dtype}|{self.shape}|{self.group}"

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "group": self.group,
            "where": self.where.to_json() if self.where else None,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Collective:
        return cls(
            d["op"], d.get("dtype", ""), list(d.get("shape", [])), d.get("group", "world"),
            Site.from_json(d.get("where")),
        )  # fmt: skip


@dataclass
class Fingerprint:
    """Parameters and buffers after an optimizer step: [sum, sum of squares] per tensor, float64."""

    step: int
    values: list[list[float]]
    names_digest: str = ""
    where: Site | None = None  # the optimizer step that took it

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["where"] = self.where.to_json() if self.where else None
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Fingerprint:
        return cls(
            int(d["step"]), [list(v) for v in d["values"]], d.get("names_digest", ""),
            Site.from_json(d.get("where")),
        )  # fmt: skip


@dataclass
class Write:
    """A path opened for writing (torch.save or open(..., 'w'/'a'/'x'/'+')) and where."""

    path: str
    api: str
    where: Site | None = None
    count: int = 1

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "api": self.api, "count": self.count,
                "where": self.where.to_json() if self.where else None}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Write:
        return cls(d["path"], d["api"], Site.from_json(d.get("where")), int(d.get("count", 1)))


@dataclass
class Exit:
    """How the rank's script ended. kind: returned | exit | exception | steps | max-time |
    signal | running (not ended yet: the rank is still working, hung, or was killed)."""

    kind: str = "running"
    code: int | None = None
    exception: str = ""
    message: str = ""
    where: Site | None = None
    traceback_tail: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["where"] = self.where.to_json() if self.where else None
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Exit:
        if not d:
            return cls()
        d = dict(d)
        d["where"] = Site.from_json(d.get("where"))
        return cls(**d)


@dataclass
class TraceRecord:
    """Everything one rank recorded. Fields are declared up front; unknown stays None/empty."""

    rank: int
    world_size: int
    local_rank: int = 0
    host: str = ""
    pid: int = 0
    script: str = ""
    argv: list[str] = field(default_factory=list)
    started: float = 0.0
    updated: float = 0.0
    steps_limit: int = 0
    fingerprint_every: int = 0
    backend: str | None = None
    steps: int = 0  # optimizer steps taken (the largest count of any optimizer)
    events: list[Event] = field(default_factory=list)
    passes: list[DataPass] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)  # the first MAX_COLLECTIVES
    collective_count: int = 0
    collective_digest: str = ""
    fingerprint_names: list[str] = field(default_factory=list)
    fingerprints: list[Fingerprint] = field(default_factory=list)
    scales: dict[int, float] = field(
        default_factory=dict
    )  # GradScaler scale after update, per step
    skipped_steps: list[int] = field(default_factory=list)  # steps where scaler.step() skipped
    skipped_count: int = 0
    writes: list[Write] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)  # wall time between optimizer steps
    data_s: list[float] = field(default_factory=list)  # of which: waiting for the DataLoader
    forward_s: list[float] = field(default_factory=list)  # of which: batch in hand to backward()
    exit: Exit = field(default_factory=Exit)
    role: str = "rank"  # "rank", or "spawner": a process that only started ranks (mp.spawn)
    spawned: bool = False  # started by mp.spawn inside the user's script
    schema: str = SCHEMA
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schema": self.schema, "version": self.version}
        for key, value in self.__dict__.items():
            if key in d:
                continue
            if isinstance(value, list) and value and hasattr(value[0], "to_json"):
                d[key] = [v.to_json() for v in value]
            elif hasattr(value, "to_json"):
                d[key] = value.to_json()
            elif key == "scales":
                d[key] = {str(k): v for k, v in value.items()}
            else:
                d[key] = value
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TraceRecord:
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} record: schema {d.get('schema')!r}")
        kinds = {
            "events": Event, "passes": DataPass, "collectives": Collective,
            "fingerprints": Fingerprint, "writes": Write,
        }  # fmt: skip
        args = dict(d)
        for key, kind in kinds.items():
            args[key] = [kind.from_json(x) for x in d.get(key) or []]
        args["exit"] = Exit.from_json(d.get("exit"))
        args["scales"] = {int(k): float(v) for k, v in (d.get("scales") or {}).items()}
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in args.items() if k in known})

    def path(self, run_dir: Path) -> Path:
        if self.role == "spawner":
            return Path(run_dir) / f"spawner-{self.pid}.json"
        return trace_file(run_dir, self.rank)

    def write(self, run_dir: Path) -> None:
        """Atomic: a reader sees the previous or the new record, never half of one."""
        path = self.path(run_dir)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        text = json.dumps(self.to_json(), default=str)  # one C call: no thread switch inside
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)


def read_records(run_dir: Path) -> dict[int, TraceRecord]:
    """Every readable trace-R.json of a run folder, by rank; unreadable ones are left out."""
    out: dict[int, TraceRecord] = {}
    for path in Path(run_dir).glob("trace-*.json"):
        try:
            with open(path, encoding="utf-8") as fh:
                rec = TraceRecord.from_json(json.load(fh))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out[rec.rank] = rec
    return out
