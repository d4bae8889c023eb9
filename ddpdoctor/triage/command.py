"""`ddpdoctor explain` and `ddpdoctor env`: placeholders until the triage issue lands."""

from __future__ import annotations

from ddpdoctor.errors import CannotRun


def explain() -> None:
    """Explain a crash log or pasted traceback (not built yet)."""
    raise CannotRun("explain is not built yet")


def env() -> None:
    """A paste-safe snapshot of this node (not built yet)."""
    raise CannotRun("env is not built yet")
