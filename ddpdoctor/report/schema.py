"""Versioned JSON documents. Every document carries `"schema": "ddpdoctor.<kind>/<major>"`; a JSON
Schema for each kind ships in `ddpdoctor/schemas/` and the tests validate real output against it."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from ddpdoctor.errors import UsageError, printable

VERSIONS = {"report": 1, "bench": 1, "env": 1, "explain": 1, "lint": 1, "node": 1, "flight": 1}


def tag(kind: str) -> str:
    return f"ddpdoctor.{kind}/{VERSIONS[kind]}"


def schema_for(kind: str) -> dict[str, Any]:
    """The shipped JSON Schema of a document kind."""
    text = (
        resources.files("ddpdoctor").joinpath(f"schemas/{kind}-{VERSIONS[kind]}.json").read_text()
    )
    return json.loads(text)


MANY = 32  # a list or object with more items than this is written one compact item per line


def dumps(doc: dict[str, Any]) -> str:
    """Indented like `json.dumps(indent=2)`, except that a list or object of more than MANY
    items (a report's 16,384 ranks) has one compact item per line: json's C encoder writes
    those, where its indenting encoder is pure Python and 3x slower; one rank a line greps well."""
    return "".join(_indented(doc, "\n"))


def _indented(value: Any, nl: str) -> Any:
    if not isinstance(value, (dict, list)) or not value:
        yield json.dumps(value, default=str)
        return
    inner = nl + "  "
    items = value.items() if isinstance(value, dict) else value
    big = len(value) > MANY
    yield "{" if isinstance(value, dict) else "["
    for i, item in enumerate(items):
        yield inner if i == 0 else "," + inner
        if isinstance(value, dict):
            yield json.dumps(str(item[0])) + ": "
            item = item[1]
        if big:
            yield json.dumps(item, default=str)
        else:
            yield from _indented(item, inner)
    yield nl + ("}" if isinstance(value, dict) else "]")


def check_writable(path: str | None) -> None:
    """Fail early (exit 2) for a --json/--csv path we could not write, before any work is done:
    the path is opened for appending (nothing is truncated) and a file created only for the test
    is removed again. Devices and FIFOs are fine: they are written through."""
    if path is None or path == "-":
        return
    try:
        _probe_writable(path)
    except OSError as exc:
        raise UsageError(f"cannot write {printable(path)}: {exc.strerror or exc}") from None


def _probe_writable(path: str) -> None:
    p = Path(path)
    if path.endswith("/") or p.is_dir():
        raise UsageError(f"{printable(path)} is a directory, not a file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(
            f"cannot write {printable(path)}: folder {printable(str(parent))} does not exist"
        )
    try:
        if stat.S_ISFIFO(os.stat(p).st_mode):
            return  # opening a FIFO for writing waits for its reader: that is the writer's moment
    except OSError:
        pass
    existed = os.path.lexists(p)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise UsageError(f"cannot write {printable(path)}: {exc.strerror}") from None
    os.close(fd)
    if not existed:
        with contextlib.suppress(OSError):
            os.unlink(p)


def write_text(path: str, text: str) -> None:
    """Write a whole file. A regular file (or a new path, or a symlink to a regular file) is
    replaced atomically, so a reader never sees half of it; anything else (/dev/null,
    /dev/stdout, a FIFO) is written through: replacing a device node would turn it into a
    regular file for the whole machine."""
    target = Path(os.path.realpath(path))
    try:
        regular = stat.S_ISREG(os.stat(target).st_mode)
    except FileNotFoundError:
        regular = True  # a new file
    if not regular:
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        try:
            fh = open(tmp, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except PermissionError:  # a writable file in a folder we cannot add to
            with open(target, "w", encoding="utf-8") as direct:
                direct.write(text)
            return
        with fh:
            fh.write(text)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def try_write(write: Callable[[], None], path: str) -> str | None:
    """Run a write that comes after the work; a failure is a one-line message for the user
    (the caller still prints the report and keeps the run folder), never a lost report."""
    try:
        write()
    except OSError as exc:
        return f"cannot write {printable(path)}: {exc.strerror or exc}"
    return None


def write(doc: dict[str, Any], path: str) -> None:
    """Write a document to a file, or to stdout for '-'."""
    text = dumps(doc) + "\n"
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_text(path, text)
