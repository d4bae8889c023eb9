"""DDL007 (a note): a script that calls init_process_group but never destroy_process_group."""

from __future__ import annotations

from ddpdoctor.lint.finding import Hit
from ddpdoctor.lint.index import ModuleIndex

TEARDOWN_WORDS = ("destroy", "cleanup", "clean_up", "teardown", "shutdown", "finalize")


def check(index: ModuleIndex) -> list[Hit]:
    if not index.init_calls:
        return []
    at_top_level = any(index.scope_of(c) is index.tree for c in index.init_calls)
    if not (index.has_main_guard or at_top_level):
        return []  # a helper module: its caller decides when training ends
    # Called, or handed over (`atexit.register(dist.destroy_process_group)`).
    if {"destroy_process_group"} & (
        index.calls_by_name.keys() | index.attr_names | index.name_loads
    ):
        return []
    # A cleanup()/teardown() helper from another module: trust its name. A local one is read.
    for name, calls in index.calls_by_name.items():
        if any(w in name.lower() for w in TEARDOWN_WORDS) and not all(
            index.resolve_call(c) for c in calls
        ):
            return []
    return [
        Hit(
            index.init_calls[0],
            "DDL007",
            "init_process_group without destroy_process_group at the end of training",
        )
    ]
