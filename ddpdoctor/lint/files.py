"""Which files `ddpdoctor lint PATH...` reads: the files named, and `.py` files under folders,
skipping VCS, cache, virtualenv and vendored folders; sorted for deterministic output.

Only regular files are read, and only up to MAX_BYTES: a FIFO named `x.py` would block the read
forever and `zero.py -> /dev/zero` would never end. Such files are skipped, with the reason."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

from ddpdoctor.errors import UsageError

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "node_modules",
        "site-packages",
        "dist-packages",
        "build",
        "dist",
        ".eggs",
    }
)
# The largest hand-written training script we have seen is ~100 KB; generated modules reach a
# few MB. Anything past this is data, not a script.
MAX_BYTES = 8 * 1024 * 1024

KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


@dataclass
class Collected:
    """The files to lint and the ones left out, each with why."""

    files: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    named: set[str] = field(default_factory=set)  # files given as paths, not found in a folder


def skip_dir(name: str) -> bool:
    return name in SKIP_DIRS or name.endswith(".egg-info")


def unreadable_reason(path: str) -> str | None:
    """Why this path is not a file lint should read (None: it is). Follows symlinks: the
    target decides."""
    try:
        st = os.stat(path)
    except OSError as err:
        return f"cannot stat: {err.strerror or err}"
    if not stat.S_ISREG(st.st_mode):
        kind = next((word for test, word in KINDS if test(st.st_mode)), "not a regular file")
        return f"not a regular file ({kind})" if kind != "not a regular file" else kind
    if st.st_size > MAX_BYTES:
        return f"larger than {MAX_BYTES // (1024 * 1024)} MiB ({st.st_size} bytes)"
    return None


def collect(paths: Iterable[str]) -> Collected:
    """Expand PATH arguments. A missing path is a usage error; so is finding no Python file."""
    out = Collected()
    paths = list(paths)
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not skip_dir(d))
                for name in names:
                    if name.endswith(".py"):
                        _add(out, os.path.join(root, name))
        elif os.path.lexists(path):
            _add(out, path)
            out.named.add(path)
        else:
            raise UsageError(f"{path}: no such file or folder")
    if not out.files:
        why = (
            f" ({len(out.skipped)} skipped: not regular files or too large)" if out.skipped else ""
        )
        raise UsageError("no Python files found in " + " ".join(paths) + why)
    out.files = sorted(dict.fromkeys(out.files))
    return out


def _add(out: Collected, path: str) -> None:
    reason = unreadable_reason(path)
    if reason is None:
        out.files.append(path)
    else:
        out.skipped.append((path, reason))


def collect_files(paths: Iterable[str]) -> list[str]:
    """Only the files to lint (callers that do not report skips)."""
    return collect(paths).files


def read_bytes(path: str) -> bytes:
    """A regular file's bytes, at most MAX_BYTES; opened non-blocking and checked again after
    opening, so a file swapped for a FIFO in between cannot hang us. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise OSError(0, f"larger than {MAX_BYTES // (1024 * 1024)} MiB")
    return data
