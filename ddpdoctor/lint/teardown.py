"""DDL007 (a note): a script that sets the process group up (itself or through a helper of its
project) but never destroys it, here or in a helper of its project."""

from __future__ import annotations

from ddpdoctor.lint.finding import Hit
from ddpdoctor.lint.index import ModuleIndex, dotted
from ddpdoctor.lint.project import external_effects, program_effects

TEARDOWN_WORDS = ("destroy", "cleanup", "clean_up", "teardown", "shutdown", "finalize")


def check(index: ModuleIndex) -> list[Hit]:
    inits = index.all_init_calls
    if not inits:
        return []
    at_top_level = any(index.scope_of(c) is index.tree for c in inits)
    if not (index.has_main_guard or at_top_level):
        return []  # a helper module: its caller decides when training ends
    # Called, or handed over (`atexit.register(dist.destroy_process_group)`).
    if {"destroy_process_group"} & (
        index.calls_by_name.keys() | index.attr_names | index.name_loads
    ):
        return []
    if "destroy" in program_effects(index):
        return []  # a helper of the project destroys it (read there)
    # A cleanup()/teardown() helper we cannot read: trust its name. A local one is read, and
    # so is one of the project's other modules.
    for name, calls in index.calls_by_name.items():
        if any(w in name.lower() for w in TEARDOWN_WORDS) and not all(
            index.resolve_call(c) or external_effects(index, c) is not None for c in calls
        ):
            return []
    first = inits[0]
    how = (
        ""
        if index.callee_name(first) == "init_process_group"
        else (f" (set up through {dotted(first.func) or 'a helper'}())")
    )
    return [
        Hit(
            first,
            "DDL007",
            f"init_process_group without destroy_process_group at the end of training{how}",
        )
    ]
