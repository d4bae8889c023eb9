"""Install (and remove) every hook of the tracer, in one place and one order."""

from __future__ import annotations

from ddpdoctor.trace import hooks_data, hooks_dist, hooks_io, hooks_train, spawned
from ddpdoctor.trace.patching import unwrap_all
from ddpdoctor.trace.state import Tracer


def install(tracer: Tracer) -> None:
    hooks_dist.install(tracer)
    hooks_data.install(tracer)
    hooks_train.install(tracer)
    hooks_io.install(tracer)
    spawned.install(tracer)


def uninstall(tracer: Tracer) -> None:
    for handle in tracer.hook_handles:
        handle.remove()
    tracer.hook_handles.clear()
    unwrap_all()
    tracer.close()
    if Tracer.current is tracer:
        Tracer.current = None
