"""The run folder shared by the launcher and its workers: names of the files, atomic writes, and
tolerant reads. Every rank writes its own partial truth here after every check, so a crash or a
hang loses nothing that was already known."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SPEC = "spec.json"
GATHERED = "gathered.json"
LAUNCHER_LOG = "torchrun.log"


def rank_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank-{rank}.json"


def beat_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank-{rank}.beat"


def log_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank-{rank}.log"


def write_json(path: Path, data: Any) -> None:
    """Write so that a reader never sees half a file (write a sibling, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, default=str)
    os.replace(tmp, path)


def read_json(path: Path) -> Any | None:
    """None when the file is absent or unreadable: collectors never raise."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _ranked(run_dir: Path, suffix: str) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for p in run_dir.glob(f"rank-*.{suffix}"):
        try:
            rank = int(p.name[len("rank-") : -len(suffix) - 1])
        except ValueError:
            continue
        data = read_json(p)
        if isinstance(data, dict):
            out[rank] = data
    return out


def read_rank_files(run_dir: Path) -> dict[int, dict[str, Any]]:
    return _ranked(run_dir, "json")


def read_beats(run_dir: Path) -> dict[int, dict[str, Any]]:
    return _ranked(run_dir, "beat")
