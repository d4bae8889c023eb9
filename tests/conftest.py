"""Shared test setup."""

from __future__ import annotations

import os
import signal

import pytest

# pytest-xdist's workers export COLUMNS=80 (and LINES): every ddpdoctor a test starts would then
# render for an 80-column terminal instead of its 120-column default for pipes and logs.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

# A shell that starts pytest in the background without job control (`cmd &` in a script) hands it
# SIGINT ignored, and every process a test starts inherits that: the Ctrl-C tests would then
# fail (ddpdoctor and the ranks never see the signal). Restore the default for what we start.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

LONGEST_FIRST = ("tests/trace/test_trace_fixtures.py",)  # ~28 real launches in one module


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The module with the most launches first: under `-n 2 --dist loadfile` one worker takes it
    at once while the other works through the rest (otherwise it would start last and be the
    whole tail)."""
    items.sort(key=lambda item: 0 if item.nodeid.startswith(LONGEST_FIRST) else 1)
