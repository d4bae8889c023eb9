"""Writes: torch.save and open() for writing, called directly from the user's code. Only the
path and the call site are kept (several ranks writing one path is the finding)."""

from __future__ import annotations

import builtins
import os
import sys
from typing import Any

from ddpdoctor.trace.patching import wrap
from ddpdoctor.trace.sites import Site, is_user_file
from ddpdoctor.trace.state import Tracer

_WRITE_MODES = frozenset("wax+")
_IGNORED = ("/dev/", "/proc/")


def _direct_user_caller() -> Site | None:
    frame = sys._getframe(2)
    path = frame.f_code.co_filename
    return Site(path, frame.f_lineno) if is_user_file(path) else None


def _path_of(target: Any) -> str | None:
    if isinstance(target, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(target))
        return None if path.startswith(_IGNORED) else path
    return None


def install(tracer: Tracer) -> None:
    import torch

    def save_wrapper(original: Any) -> Any:
        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            where = _direct_user_caller()
            path = _path_of(f)
            if where is not None and path is not None:
                tracer.write_path(path, "torch.save", where)
            return original(obj, f, *args, **kwargs)

        return save

    def open_wrapper(original: Any) -> Any:
        def open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:  # noqa: A001
            if isinstance(mode, str) and not _WRITE_MODES.isdisjoint(mode):
                where = _direct_user_caller()
                path = _path_of(file) if where is not None else None
                if path is not None:
                    tracer.write_path(path, "open", where)
            return original(file, mode, *args, **kwargs)

        return open

    wrap(torch, "save", save_wrapper)
    wrap(builtins, "open", open_wrapper)
