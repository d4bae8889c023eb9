"""Which files `ddpdoctor lint PATH...` reads: the files named, and `.py` files under folders,
skipping VCS, cache, virtualenv and vendored folders; sorted for deterministic output."""

from __future__ import annotations

import os
from collections.abc import Iterable

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


def _skip_dir(name: str) -> bool:
    return name in SKIP_DIRS or name.endswith(".egg-info")


def collect_files(paths: Iterable[str]) -> list[str]:
    """Expand PATH arguments to a sorted list of files. A missing path is a usage error; so is
    finding no Python file at all."""
    files: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            files.append(path)
        elif os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not _skip_dir(d))
                files.extend(os.path.join(root, n) for n in names if n.endswith(".py"))
        else:
            raise UsageError(f"{path}: no such file or folder")
    if not files:
        raise UsageError("no Python files found in " + " ".join(paths))
    return sorted(dict.fromkeys(files))
