"""Versioned JSON documents. Every document carries `"schema": "ddpdoctor.<kind>/<major>"`; a JSON
Schema for each kind ships in `ddpdoctor/schemas/` and the tests validate real output against it."""

from __future__ import annotations

import json
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from ddpdoctor.errors import UsageError

VERSIONS = {"report": 1, "bench": 1, "env": 1, "explain": 1, "lint": 1, "node": 1}


def tag(kind: str) -> str:
    return f"ddpdoctor.{kind}/{VERSIONS[kind]}"


def schema_for(kind: str) -> dict[str, Any]:
    """The shipped JSON Schema of a document kind."""
    text = (
        resources.files("ddpdoctor").joinpath(f"schemas/{kind}-{VERSIONS[kind]}.json").read_text()
    )
    return json.loads(text)


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=False, default=str)


def check_writable(path: str | None) -> None:
    """Fail early (exit 2) for a --json/--csv path we could not write, before any work is done."""
    if path is None or path == "-":
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"{path} is a directory, not a file")
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"cannot write {path}: permission denied")


def write(doc: dict[str, Any], path: str) -> None:
    """Write a document to a file, or to stdout for '-'. Atomic for files."""
    text = dumps(doc) + "\n"
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
