"""DDL001: DDP, DistributedSampler or a collective reached before init_process_group. Follows calls
into helpers of the same file in execution order, and knows that a process started by mp.spawn
starts without a process group."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ddpdoctor.lint.finding import Hit
from ddpdoctor.lint.guards import (
    distributed_branch,
    distributed_test,
    nondistributed_test,
    single_process_branch,
)
from ddpdoctor.lint.index import (
    FUNC_TYPES,
    WRAPPER_NAMES,
    ModuleIndex,
    calls_in_order,
    dotted,
    follows_in_block,
    kwarg,
    last_name,
    spawn_target,
    statement_block,
)
from ddpdoctor.lint.project import external_effects

COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_gather",
        "all_gather_object",
        "all_gather_into_tensor",
        "all_to_all",
        "barrier",
        "broadcast",
        "broadcast_object_list",
        "gather",
        "gather_object",
        "get_rank",
        "get_world_size",
        "monitored_barrier",
        "new_group",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "scatter",
        "scatter_object_list",
        "send",
        "recv",
    }
)
INIT_HELPER_WORDS = ("init_dist", "setup_dist", "dist_init", "distributed_init", "ddp_setup")
INIT_HELPER_WORDS += ("setup_ddp", "init_ddp", "init_process", "setup_process")


CATCHES = frozenset({"Exception", "BaseException", "RuntimeError", "ValueError"})


def _catches_init_error(node: ast.Try) -> bool:
    """`except RuntimeError` (or ValueError, Exception, bare) around a call that needs a group."""
    for handler in node.handlers:
        if handler.type is None:
            return True
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(last_name(t) in CATCHES for t in types):
            return True
    return False


def _asks_initialized(name: str | None) -> bool:
    """`dist.is_initialized`, or a helper that asks it (`is_dist_avail_and_initialized`)."""
    return bool(name) and name.startswith("is_") and name.endswith("initialized")  # type: ignore[union-attr]


@dataclass
class _Summary:
    inits: bool = False
    uses_before_init: list[ast.Call] = field(default_factory=list)
    destroys_first: ast.Call | None = None  # a teardown helper (`cleanup()`): no group of its own
    # The group is made only on the distributed side of this test (`if local_rank == -1: ...
    # else: init_process_group(...)`), or not by this set-up helper on a plain run (see
    # falls_back): the other side goes on without one.
    init_only_when: ast.If | ast.Call | None = None


class _InitOrder:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.summaries: dict[ast.AST, _Summary] = {}
        self.hits: dict[int, Hit] = {}

    def use_label(self, call: ast.Call) -> str | None:
        """What this call needs the process group for, or None."""
        index = self.index
        name = index.callee_name(call)
        if name in WRAPPER_NAMES:
            return f"{dotted(call.func) or name}(...)"
        if name == "DistributedSampler":
            explicit = kwarg(call, "num_replicas") is not None and kwarg(call, "rank") is not None
            return None if explicit or len(call.args) >= 3 else "DistributedSampler(...)"
        if name in COLLECTIVES and index.is_torch_distributed(call):
            return f"{dotted(call.func)}()"
        return None

    def is_init(self, call: ast.Call) -> bool:
        """The call sets the group up: init_process_group, a helper of another module of the
        project that runs it (read there), or, for helpers we cannot read, one named so."""
        name = self.index.callee_name(call)
        if name in ("init_process_group", "init_distributed", "Accelerator"):
            return True
        if self.index.resolve_call(call):
            return False
        effects = external_effects(self.index, call)
        if effects is not None:
            return "init" in effects
        low = name.lower()
        return low == "setup" or any(w in low for w in INIT_HELPER_WORDS)

    def decorated_init(self, scope: ast.AST) -> bool:
        """`@distributed_main` / `@with_process_group`: the decorator sets the group up before
        the body runs (a local decorator is read; another module's by its facts or name)."""
        for dec in getattr(scope, "decorator_list", ()):
            call = dec if isinstance(dec, ast.Call) else ast.Call(func=dec, args=[], keywords=[])
            if self.is_init(call):
                return True
            target = dec.func if isinstance(dec, ast.Call) else dec
            if isinstance(target, ast.Name):
                for f in self.index.functions.get(target.id, ()):
                    if self.summary(f).inits or self.inits_inside(f):
                        return True
        return False

    def inits_inside(self, func: ast.AST) -> bool:
        """A decorator's wrapper: the init sits in a nested function it returns."""
        return any(
            self.index.callee_name(c) == "init_process_group"
            for c in self.index.calls
            if self.index.scope_of(c) is not func and func in self._enclosing(c)
        )

    def _enclosing(self, node: ast.AST) -> list[ast.AST]:
        out, scope = [], self.index.scope_of(node)
        while scope is not self.index.tree:
            out.append(scope)
            scope = self.index.scope_of(scope)
        return out

    def checks_initialized(self, call: ast.Call, scope: ast.AST) -> bool:
        """Code that asks `dist.is_initialized()` first, or catches the error, is written for
        both cases."""
        if any(
            isinstance(a, ast.Try) and _catches_init_error(a) for a in self.index.ancestors(call)
        ):
            return True
        if isinstance(scope, FUNC_TYPES) and any(
            self.index.scope_of(c) is scope for c in self.index.calls_named("is_initialized")
        ):
            return True
        for anc in self.index.ancestors(call):
            test = getattr(anc, "test", None)
            if test is not None and any(
                isinstance(n, ast.Attribute | ast.Name)
                and _asks_initialized(getattr(n, "attr", None) or getattr(n, "id", None))
                for n in ast.walk(test)
            ):
                return True
        return False

    def only_distributed(self, use: ast.Call, depth: int = 0) -> bool:
        """The use runs only when a distributed switch is on: under `if args.multi_gpu:`
        itself, or a call of this file's functions whose every such use is."""
        if distributed_branch(self.index, use):
            return True
        funcs = self.index.resolve_call(use)
        return (
            depth < 4
            and bool(funcs)
            and all(
                self.only_distributed(u, depth + 1)
                for f in funcs
                for u in self.summary(f).uses_before_init
            )
        )

    def distributed_side(self, init: ast.Call, scope: ast.AST) -> ast.If | None:
        """The `if` of this scope whose distributed side alone holds the init (its body under
        `if args.distributed:`, its else under `if local_rank == -1:`), or None."""
        child: ast.AST = init
        for anc in self.index.ancestors(init):
            if anc is scope:
                break
            if isinstance(anc, ast.If) and child is not anc.test:
                in_body = child in anc.body
                # The other side must set up a run of its own (`device = ...` under
                # `if local_rank == -1:`): a bare `if distributed: init(...)` says nothing of
                # whether one process is a way the script is meant to run.
                if in_body and distributed_test(anc.test) and anc.orelse:
                    return None if self._inits_in(anc.orelse) else anc
                if not in_body and anc.body and _one_process_way(anc.test):
                    return None if self._inits_in(anc.body) else anc
            child = anc
        return None

    def falls_back(self, call: ast.Call) -> ast.Call | None:
        """A set-up helper of the project that returns without a group when the launcher's
        variables are absent, telling the caller so (`args.distributed = False`: the MAE/DeiT
        `init_distributed_mode`), called where both kinds of run arrive: what follows
        unguarded raises on the one-process path."""
        if self.index.resolve_call(call) or distributed_branch(self.index, call):
            return None
        effects = external_effects(self.index, call) or ()
        return call if "init_fallback" in effects and "init" in effects else None

    def _inits_in(self, block: list[ast.stmt]) -> bool:
        """The other side makes a group too (torchrun's env:// on one side, a spawned worker's
        tcp:// with its own rank on the other): no path is left without one."""
        return any(
            isinstance(node, ast.Call) and self.is_init(node)
            for stmt in block
            for node in ast.walk(stmt)
        )

    def one_process_uses(self, call: ast.Call, test: ast.If | ast.Call) -> None:
        """After a group made on one side only: what needs it and runs on both sides (not
        under a distributed test, not asking is_initialized) raises on the one-process path.
        Reported at the use itself, in this file's helpers too. After a set-up helper that
        falls back to one process (see falls_back), told at info level: the crash is real on
        a plain `python` run, but lint cannot tell whether the script means to support one."""
        if test in self.index.ancestors(call) or distributed_branch(self.index, call):
            return
        for use in self._ungated(call, 0):
            label = self.use_label(use) or f"{dotted(use.func)}()"
            if isinstance(test, ast.Call):
                message = (
                    f"{label} needs a process group, but {dotted(test.func) or 'the set-up'}() "
                    f"(line {test.lineno}) makes none when the script is not started by a "
                    "launcher (it sets `distributed = False` and goes on): a plain `python` run "
                    "raises here (guard it with `if args.distributed:`)"
                )
                hit = Hit(use, "DDL001", message, level="info")
            else:
                message = (
                    f"{label} needs a process group, but the one made at line {test.lineno} is "
                    "made only on the distributed side of that test: on the one-process path it "
                    "raises (guard it with `if dist.is_initialized():`, or skip it there)"
                )
                hit = Hit(use, "DDL001", message)
            self.hits.setdefault(id(use), hit)

    def _ungated(self, call: ast.Call, depth: int) -> list[ast.Call]:
        """The uses of the group this call makes or reaches with no distributed test on the
        way (helpers of this file, a few levels down)."""
        if self.only_distributed(call) or single_process_branch(self.index, call):
            return []
        if self.use_label(call) is not None:
            return [] if self.checks_initialized(call, self.index.scope_of(call)) else [call]
        if depth >= 3:
            return []
        found: list[ast.Call] = []
        for func in self.index.resolve_call(call):
            sub = self.summary(func)
            if sub.inits:
                continue
            raised: list[tuple[list[ast.stmt], int]] = []  # (block, index) of a use that raises
            for use in sub.uses_before_init:
                if any(follows_in_block(self.index, use, block, at) for block, at in raised):
                    continue  # the use above it in the same block raised first
                more = self._ungated(use, depth + 1)
                found += more
                if (
                    more
                    and self.use_label(use) is not None
                    and (here := statement_block(self.index, use))
                ):
                    raised.append(here)
        return found

    def summary(self, func: ast.AST) -> _Summary:
        if func in self.summaries:
            return self.summaries[func]
        self.summaries[func] = _Summary()  # cycle guard: a recursive call sees no effect
        self.summaries[func] = self.run(func, report=False)
        return self.summaries[func]

    def run(self, scope: ast.AST, report: bool) -> _Summary:
        """Walk the scope's calls in execution order from 'no process group yet'. A
        destroy_process_group before the init means a group existed: a re-init, not a bug."""
        out = _Summary()
        if self.decorated_init(scope):
            return _Summary(inits=True)
        pending: list[Hit] = []
        spawned = False
        one_process: ast.If | ast.Call | None = None  # once the group is made on one side only
        for call in calls_in_order(self.index, scope):
            if one_process is not None:
                self.one_process_uses(call, one_process)
                continue
            if out.inits:
                break
            if self.is_init(call):
                out.inits = True
                out.init_only_when = one_process = self.distributed_side(
                    call, scope
                ) or self.falls_back(call)
                continue
            name = self.index.callee_name(call)
            if name in ("spawn", "start_processes") and spawn_target(call) is not None:
                spawned = True  # from here on this process is the launcher: it has no group
                continue
            destroy = call if name == "destroy_process_group" else None
            if spawned and destroy is None:
                destroy = next(
                    (
                        d
                        for f in self.index.resolve_call(call)
                        if (d := self.summary(f).destroys_first) is not None
                    ),
                    None,
                )
            if spawned and destroy is not None and not self.checks_initialized(call, scope):
                # Whoever calls this function, the processes it spawned hold the group: said
                # here, not only when reached from a root.
                self.hits.setdefault(
                    id(call),
                    Hit(
                        call,
                        "DDL001",
                        f"{dotted(call.func) or name}() destroys a process group in the launching "
                        "process, which never made one (the spawned workers did): it raises; "
                        "destroy at the end of the worker instead",
                    ),
                )
                continue
            if name == "destroy_process_group":
                if not pending:
                    # A group existed: a re-init follows. Or a teardown helper of its own.
                    return _Summary(inits=True, destroys_first=call)
                break  # what came before still needed a group
            label = self.use_label(call)
            if label is not None:
                if not self.checks_initialized(call, scope):
                    out.uses_before_init.append(call)
                    pending.append(
                        Hit(call, "DDL001", f"{label} runs before init_process_group on this path")
                    )
                continue
            for func in self.index.resolve_call(call):
                sub = self.summary(func)
                uses = sub.uses_before_init
                if uses and single_process_branch(self.index, call):
                    # `else: loaders = get_loaders(args)` in the one-process branch: the
                    # helper's `if args.multi_gpu: DistributedSampler(...)` does not run there.
                    uses = [u for u in uses if not self.only_distributed(u)]
                if uses and not sub.inits:
                    out.uses_before_init.append(call)
                    first = uses[0]
                    what = self.use_label(first) or f"{dotted(first.func)}()"
                    pending.append(
                        Hit(
                            call,
                            "DDL001",
                            f"{dotted(call.func)}() reaches {what} (line {first.lineno}) "
                            "before init_process_group",
                        )
                    )
                if sub.inits:
                    out.inits = True
                    if sub.init_only_when is not None and not distributed_branch(self.index, call):
                        out.init_only_when = one_process = sub.init_only_when
        if report:
            for hit in pending:
                self.hits.setdefault(id(hit.node), hit)
        return out


def _one_process_way(test: ast.AST) -> bool:
    """A test whose true side runs one process, at least one way in (`local_rank == -1 or
    args.no_cuda`): its else, where the group is made, is not the only way the script runs."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(nondistributed_test(v) for v in test.values)
    return nondistributed_test(test)


def check(index: ModuleIndex) -> list[Hit]:
    inits = index.all_init_calls
    if not inits:
        return []  # the group is set up somewhere we cannot read: nothing to order against
    order = _InitOrder(index)
    # Where a process starts without a group: the module, spawned workers and entry points,
    # and any function that sets the group up itself (what comes before its init is too soon).
    starts = set(index.entry_points) - index.forked_children - index.run_after_set_up
    starts |= {index.scope_of(c) for c in inits}
    starts.discard(index.tree)
    roots = [index.tree, *sorted(starts, key=lambda f: f.lineno)]
    for root in roots:
        order.run(root, report=True)
    return list(order.hits.values())
