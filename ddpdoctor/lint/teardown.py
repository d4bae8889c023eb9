"""DDL007 (a note): a process that sets the process group up (itself or through a helper of its
project) but never destroys it, here or in a helper of its project.

A process starts in one of two places. A script: its `if __name__ == "__main__":` block or its
top level, judged as a whole file. A spawned worker (`mp.spawn(fn)`, `Process(target=fn)`,
`start_processes`): the worker's own program, what fn runs, is judged alone, since a destroy in
the launching process cannot tear down a group that only the worker has. The worker may be
started from another module of the project (detectron2-style `launch()` helpers)."""

from __future__ import annotations

import ast
from collections.abc import Collection

from ddpdoctor.lint.finding import Hit
from ddpdoctor.lint.guards import implies_rank0
from ddpdoctor.lint.index import (
    FUNC_TYPES,
    ModuleIndex,
    destroys_default_group,
    last_name,
    position,
)
from ddpdoctor.lint.project import (
    SPAWNED,
    Project,
    callee_label,
    external_effects,
    method_target,
    program_effects,
    project_target,
)

TEARDOWN_WORDS = ("destroy", "cleanup", "clean_up", "teardown", "shutdown", "finalize")
DESTROY = "destroy_process_group"


def check(index: ModuleIndex) -> list[Hit]:
    inits = index.all_init_calls
    if not inits:
        return _launched_without_destroy(index)
    hits: list[Hit] = []
    judged: set[int] = set()
    for worker in sorted(_workers(index, inits), key=position):
        reach = index.reachable(worker)
        own = [c for c in inits if index.scope_of(c) in reach]
        judged.update(id(c) for c in own)
        if own and not _destroys(index, reach):
            name = getattr(worker, "name", "the worker")
            first = _set_up_call_in(index, worker, own[0])
            where = f"before the spawned worker {name}() returns" + _partial_note(index, reach)
            hits.append(_hit(index, first, where, own))
    rest = [c for c in inits if id(c) not in judged and not _in_unused_helper(index, c)]
    # `def run_local(rank, n): init; main(); destroy` that nothing runs, beside a `main()` with
    # an init of its own that the script runs: the unused one's destroy tears nothing down.
    unused = {index.scope_of(c) for c in rest if _unused_program(index, index.scope_of(c))}
    if any(index.scope_of(c) not in unused for c in rest):
        rest = [c for c in rest if index.scope_of(c) not in unused]
    else:
        unused = set()
    if rest and _script_misses_destroy(index, rest, unused):
        named = index.calls_by_name.get(DESTROY, ())
        split = [c for c in named if _one_side_of_rank0(index, c)]
        unrun = [c for c in named if _never_run(index, c)]
        if split:
            where = (
                f"on every rank (the call on line {split[0].lineno} runs on one side of a "
                "rank-0 test only)"
            )
        elif unrun:
            holder = index.scope_of(unrun[0])
            where = (
                f"at the end of training ({getattr(holder, 'name', 'a helper')}() on line "
                f"{holder.lineno} would destroy it, but nothing calls it)"
            )
        else:
            where = "at the end of training"
        hits.append(_hit(index, rest[0], where, rest))
    told = {id(h.node) for h in hits}
    return hits + [h for h in _launched_without_destroy(index) if id(h.node) not in told]


def _launched_without_destroy(index: ModuleIndex) -> list[Hit]:
    """A script that hands its worker to a launcher of the project (detectron2-style
    `launch(main_worker, ngpus, ...)`) whose started processes set a group up before running it
    and never tear it down: unless the handed worker destroys it, the group outlives training.
    Told at the launcher's call, the script's line."""
    if index.project is None or not index.has_main_guard:
        return []
    hits: list[Hit] = []
    for call in index.calls:
        effects = external_effects(index, call) or ()
        if f"{SPAWNED}init" not in effects or f"{SPAWNED}destroy" in effects:
            continue
        first = call.args[0] if call.args else None
        if not isinstance(first, ast.Name) or first.id not in index.functions:
            if _workers_told_elsewhere(index, call):
                continue
            if not any(isinstance(a, ast.Name) and a.id in index.functions for a in call.args):
                # `multiprocessing_main(args)`: the launcher's own workers make the group
                hits.append(
                    Hit(
                        call,
                        "DDL007",
                        f"the processes {callee_label(call)}() starts make a process group and "
                        "never tear it down: call dist.destroy_process_group() when each ends",
                        _workers_set_up(index, call),
                    )
                )
            continue
        handed = [f for f in index.functions[first.id] if not index.enclosing_class(f)]
        if not handed or any(_destroys(index, index.reachable(f)) for f in handed):
            continue
        hits.append(
            Hit(
                call,
                "DDL007",
                f"the processes {callee_label(call)}() starts make a process group before running "
                f"{first.id}(), and neither tears it down: call dist.destroy_process_group() at "
                f"the end of {first.id}()",
            )
        )
    return hits


def _workers_told_elsewhere(index: ModuleIndex, call: ast.Call) -> bool:
    """The launcher's module is linted too: its workers' missing teardown is told there, where
    they set the group up, and not again at this call."""
    found = project_target(index, call)
    project: Project | None = index.project
    return found is not None and project is not None and found[0].path in project.given


def _workers_set_up(index: ModuleIndex, call: ast.Call) -> tuple[tuple[str, int, str], ...]:
    """Where the workers the launcher starts set the group up, in its module (pycls's
    `multi_proc_run` starts `run`, whose set-up call is the line to pair a destroy with)."""
    found = project_target(index, call)
    project: Project | None = index.project
    module = project.index_of(found[0].path) if found and project else None
    if module is None:
        return ()
    places: list[tuple[str, int, str]] = []
    for worker in sorted(_workers(module, module.all_init_calls), key=position):
        own = [c for c in module.all_init_calls if module.scope_of(c) in module.reachable(worker)]
        if own:
            where = _set_up_call_in(module, worker, own[0])
            name = getattr(worker, "name", "the worker")
            places.append((found[0].path, where.lineno, f"where {name}() sets the group up"))  # type: ignore[index]
    return tuple(places[:1])


def _set_up_call_in(index: ModuleIndex, worker: ast.AST, init: ast.Call) -> ast.Call:
    """Where the worker itself sets the group up: the init when it is in the worker's body,
    else the worker's call of the helper that makes it (`setup(rank, world)`), the line to
    pair a destroy with."""
    holder = index.scope_of(init)
    if holder is worker:
        return init
    for call in sorted(index.calls_by_scope.get(id(worker), ()), key=position):
        if any(holder in index.reachable(f) for f in index.resolve_call(call)):
            return call
    return init


def _in_unused_helper(index: ModuleIndex, call: ast.Call) -> bool:
    """An init in a top-level function this file never calls and does not start: a helper
    kept here for other scripts (waveglow's distributed.py, whose own `__main__` only launches
    processes), not part of this script's program."""
    return index.uncalled(index.scope_of(call)) and all(
        _never_run(index, c) for c in index.calls_by_name.get(DESTROY, ())
    )


def _unused_program(index: ModuleIndex, scope: ast.AST) -> bool:
    """A top-level function of a script that nothing runs and whose name nothing reads, in a
    file with no CLI that picks functions by name (`fire.Fire()`)."""
    return index.has_main_guard and index.unread(scope) and "Fire" not in index.calls_by_name


def _never_run(index: ModuleIndex, call: ast.Call) -> bool:
    """A teardown in a top-level function of this file that nothing runs: never called, not
    started, not decorated, its name never handed over (`atexit.register(cleanup)`), and
    not the function that sets the group up (a `run()` that a CLI such as fire picks by name
    holds the whole program). A `cleanup()` written and then forgotten destroys nothing."""
    scope = index.scope_of(call)
    return index.unread(scope) and not any(
        index.scope_of(i) in index.reachable(scope) for i in index.all_init_calls
    )


def _one_side_of_rank0(index: ModuleIndex, call: ast.AST) -> bool:
    """`if rank == 0: ... else: dist.destroy_process_group()` (or the reverse): a teardown that
    rank 0, or every rank but 0, never reaches."""
    child = call
    for anc in index.ancestors(call):
        if isinstance(anc, ast.If) and child is not anc.test:
            in_body = child in anc.body
            if implies_rank0(anc.test, negated=not in_body) or implies_rank0(
                anc.test, negated=in_body
            ):
                return True
        child = anc
    return False


def _partial_note(index: ModuleIndex, reach: set[ast.AST]) -> str:
    """Why a teardown the worker has does not count, if it has one."""
    for func in reach:
        for call in index.calls_by_scope.get(id(func), ()):
            if index.callee_name(call) == DESTROY and _skipped_by_some_finish(index, call, func):
                side = "one side of a rank test" if _one_side_of_rank0(index, call) else "an error"
                return f" (the call on line {call.lineno} runs on {side} only)"
    return ""


def _skipped_by_some_finish(index: ModuleIndex, call: ast.AST, func: ast.AST) -> bool:
    """A teardown in `func` that a normal finish of some rank does not reach."""
    return _not_on_every_finish(index, call) or _run_only_on_errors(index, func)


def _run_only_on_errors(index: ModuleIndex, func: ast.AST) -> bool:
    """A helper of this file (`cleanup()`) that is called, and only called, from `except`
    handlers (`except KeyboardInterrupt: cleanup()`): a normal finish never runs it."""
    if func in index.spawn_targets:
        return False  # started as a process too: not only from the handler
    sites = index.call_sites.get(func, [])
    return bool(sites) and all(_not_on_every_finish(index, c) for c in sites)


def _not_on_every_finish(index: ModuleIndex, call: ast.AST) -> bool:
    """A teardown some rank never reaches (see _one_side_of_rank0), or one only an error
    reaches: in an `except` handler (`except KeyboardInterrupt: cleanup()`), not a `finally`."""
    if _one_side_of_rank0(index, call):
        return True
    scope = index.scope_of(call)
    for anc in index.ancestors(call):
        if anc is scope:
            return False
        if isinstance(anc, ast.ExceptHandler):
            return True
    return False


def _workers(index: ModuleIndex, inits: list[ast.Call]) -> set[ast.AST]:
    """This file's functions that start a process: spawned here, or, in a module that is no
    script, by another module of the project (asked only when an init would go unjudged)."""
    workers = set(index.spawn_targets)
    project: Project | None = index.project
    if project is None or index.path is None or _is_script(index, inits):
        return workers
    covered = set().union(*(index.reachable(w) for w in workers)) if workers else set()
    loose = [c for c in inits if index.scope_of(c) not in covered]
    if not loose:
        return workers
    top = {
        f.name: f
        for f in index.tree.body
        if isinstance(f, FUNC_TYPES) and any(index.scope_of(c) in index.reachable(f) for c in loose)
    }
    if top:
        workers |= {top[n] for n in project.spawned_elsewhere(index.path, set(top))}
    return workers


def _of_a_value(call: ast.Call) -> bool:
    """`mat["kd"].cleanup()`, `make().shutdown()`: a method of some object's item or result,
    not a teardown helper of the program (`super().tearDown()` still is one)."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    value = func.value
    if isinstance(value, ast.Call) and last_name(value.func) == "super":
        return False  # `super().tearDown()`: the test framework's own teardown
    return isinstance(value, (ast.Subscript, ast.Call))


def _is_script(index: ModuleIndex, inits: list[ast.Call]) -> bool:
    """A main block, or a set-up the module runs at its top level, itself or through a
    function of its own (`setup_ddp("nccl")` below its def, in an MPI course script)."""
    if index.has_main_guard or any(index.scope_of(c) is index.tree for c in inits):
        return True
    holders = {index.scope_of(c) for c in inits}
    return any(
        index.scope_of(site) is index.tree
        for holder in holders
        for site in index.call_sites.get(holder, ())
    )


def _destroys(index: ModuleIndex, reach: set[ast.AST]) -> bool:
    """Whether the functions a worker runs tear the group down: destroy_process_group called
    or handed over (`atexit.register(dist.destroy_process_group)`), a helper of the project
    that does (read there), or a teardown-named helper we cannot read (trusted by its name)."""
    for func in reach:
        for call in index.calls_by_scope.get(id(func), ()):
            name = index.callee_name(call)
            if name == DESTROY and _skipped_by_some_finish(index, call, func):
                continue  # rank 0's alone (ECAPA's workers), or on an error only (WaveGrad's)
            if (name == DESTROY and destroys_default_group(call)) or any(
                last_name(a) == DESTROY for a in call.args
            ):
                return True
            if index.resolve_call(call):
                continue  # a local function: in reach, judged by its own calls
            if _destroying_method(index, call):
                return True  # `engine = Trainer(...); engine.run()`, whose run destroys it
            effects = external_effects(index, call)
            if effects is not None:
                if "destroy" in effects:
                    return True
            elif any(w in name.lower() for w in TEARDOWN_WORDS):
                return True
    return False


def _script_misses_destroy(
    index: ModuleIndex, inits: list[ast.Call], unused: Collection[ast.AST] = ()
) -> bool:
    """A script (main guard or top-level init) that sets the group up and never tears it down
    anywhere in the file or its project's helpers (`unused`: functions whose destroys, of a
    program nothing runs, do not count)."""
    if not _is_script(index, inits):
        return False  # a helper module: its caller decides when training ends
    # Called on every rank, or handed over (`atexit.register(dist.destroy_process_group)`).
    named = index.calls_by_name.get(DESTROY, ())
    calls = [
        c
        for c in named
        if destroys_default_group(c)
        and not _never_run(index, c)
        and index.scope_of(c) not in unused
    ]
    if any(not _not_on_every_finish(index, c) for c in calls):
        return False
    if not named and DESTROY in (index.attr_names | index.name_loads):
        return False  # handed over, not called
    if "destroy" in program_effects(index):
        return False  # a helper of the project destroys it (read there)
    if _method_destroys(index):
        return False  # `trainer.train()` of a project class whose method destroys it
    # A cleanup()/teardown() helper we cannot read: trust its name. A local one is read, and
    # so is one of the project's other modules.
    for name, named in index.calls_by_name.items():
        if name == DESTROY:
            continue  # judged above
        if any(w in name.lower() for w in TEARDOWN_WORDS) and not all(
            index.resolve_call(c) or external_effects(index, c) is not None or _of_a_value(c)
            for c in named
        ):
            return False
    return True


def _method_destroys(index: ModuleIndex) -> bool:
    """A method called here on an object of a project class (`trainer = UlTrainer(...)`, then
    `trainer.train()`) that tears the group down, in its body or through its callees."""
    return any(_destroying_method(index, call) for call in index.calls)


def _destroying_method(index: ModuleIndex, call: ast.Call) -> bool:
    project = index.project
    if project is None or type(call.func) is not ast.Attribute:
        return False
    found = method_target(index, call)
    return found is not None and "destroy" in project.effects(found[0], found[1])


def _hit(index: ModuleIndex, first: ast.Call, where: str, inits: list[ast.Call]) -> Hit:
    """The finding on the first set-up call; the program's other set-up calls of this file
    (the `else:` branch's init beside the Windows one) are other places of the same group."""
    how = (
        ""
        if index.callee_name(first) == "init_process_group"
        else (f" (set up through {callee_label(first)}())")
    )
    spawn = _spawn_of(index, first)
    if spawn is not None:  # `mp.spawn(train, ...)` beside `train(0, ...)`: the many-GPU path
        first, inits = spawn, [*inits, first]
    others = sorted({c.lineno for c in inits} - {first.lineno})
    return Hit(
        first,
        "DDL007",
        f"init_process_group without destroy_process_group {where}{how}",
        tuple((None, line, "another set-up call that no destroy follows") for line in others),
    )


def _spawn_of(index: ModuleIndex, call: ast.Call) -> ast.Call | None:
    """The `mp.spawn(f, ...)` of this file that starts, in processes of their own, the project
    function this call runs directly (so-vits-svc's one-GPU `train(0, ...)` beside
    `mp.spawn(train, ...)`): where the program's group is made for several GPUs."""
    if type(call.func) is not ast.Name:
        return None
    return next(
        (
            c
            for c in index.calls_named("spawn", "start_processes")
            if c.args and type(c.args[0]) is ast.Name and c.args[0].id == call.func.id
        ),
        None,
    )
