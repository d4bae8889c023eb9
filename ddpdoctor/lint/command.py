"""`ddpdoctor lint`: placeholder until the lint issue lands."""

from __future__ import annotations

from ddpdoctor.errors import CannotRun


def lint() -> None:
    """Find DDP mistakes in a training script without running it (not built yet)."""
    raise CannotRun("lint is not built yet")
