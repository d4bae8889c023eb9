"""Which frame is the user's: findings point at the first frame in the user's own files (not
torch, not ddpdoctor, not the standard library or site-packages), because that is the line the
user has to change. Pure: no torch import, so the judges and the stack-dump parser share it."""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from types import FrameType
from typing import Any


@dataclass(frozen=True)
class Site:
    """A place in the user's code: `where: {path, line}` in findings and records."""

    path: str
    line: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Site | None:
        if not d:
            return None
        return cls(str(d["path"]), int(d["line"]))

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def _library_roots() -> tuple[str, ...]:
    roots = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # the ddpdoctor package
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path))
            roots.add(os.path.abspath(path))
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots))


_ROOTS = _library_roots()
_MARKERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
_CACHE: dict[str, bool] = {}


def is_user_file(path: str) -> bool:
    """True for a file the user wrote: not frozen/generated code, not a library."""
    known = _CACHE.get(path)
    if known is not None:
        return known
    if not path or path.startswith("<"):
        mine = False
    else:
        full = os.path.abspath(path)
        mine = not any(m in full for m in _MARKERS) and not full.startswith(_ROOTS)
    _CACHE[path] = mine
    return mine


def caller_site(skip: int = 1) -> Site | None:
    """The first user frame above the caller (None when the call came from libraries only)."""
    frame: FrameType | None = sys._getframe(skip)
    while frame is not None:
        path = frame.f_code.co_filename
        if is_user_file(path):
            return Site(path, frame.f_lineno)
        frame = frame.f_back
    return None


def first_user_site(frames: Iterable[tuple[str, int]]) -> Site | None:
    """The innermost user frame of (path, line) pairs given innermost first."""
    for path, line in frames:
        if is_user_file(path):
            return Site(path, line)
    return None


def traceback_site(tb: Any) -> Site | None:
    """The innermost user frame of a traceback: where the user's code was when it raised."""
    frames: list[tuple[str, int]] = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return first_user_site(reversed(frames))
