"""DDL004: the model, device_ids and torch.cuda.set_device disagree about which GPU a rank owns —
DDP wrapping a model that is only moved afterwards, the global RANK used as a device index, or a
bare `.cuda()` with no set_device (every rank lands on GPU 0)."""

from __future__ import annotations

import ast
import os

from ddpdoctor.lint.finding import Hit
from ddpdoctor.lint.guards import rank0_only, single_process_branch
from ddpdoctor.lint.index import (
    DDP_NAMES,
    UNKNOWN,
    ModuleIndex,
    argument_for,
    dotted,
    kwarg,
    last_name,
    position,
)
from ddpdoctor.lint.project import GLOBAL_RANK_ATTR, Project, imported_name, program_effects

MOVES = ("to", "cuda", "to_empty")


def _moved_expr(expr: ast.AST) -> bool:
    """`Net().to(dev)`, `model.cuda(gpu)`: somewhere in the chain the module is moved."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr in MOVES:
            return True
        expr = expr.func.value
    return False


def _assigned_key(index: ModuleIndex, call: ast.Call) -> str | None:
    p = index.parent(call)
    if isinstance(p, ast.Assign) and len(p.targets) == 1:
        return dotted(p.targets[0])
    return None


def _built_on(expr: ast.AST) -> bool:
    """`Net(config, device)`, `Net(cfg, device=dev)`: a model handed its device, which builds
    its parameters there; a later `.cuda(device)` moves nothing."""
    if not isinstance(expr, ast.Call):
        return False
    args = [*expr.args, *(k.value for k in expr.keywords)]
    return any(k.arg == "device" for k in expr.keywords) or any(
        "device" in last_name(a).lower() for a in args if isinstance(a, (ast.Name, ast.Attribute))
    )


def _wrapped_before_moved(index: ModuleIndex, call: ast.Call) -> Hit | None:
    module = call.args[0] if call.args else kwarg(call, "module")
    if module is None or _moved_expr(module):
        return None
    key = dotted(module)
    if key is not None:
        values = index.values_of(key, module)
        if not values or any(v is UNKNOWN or _moved_expr(v) or _built_on(v) for v in values):
            return None  # a parameter (moved by the caller?) or built on the device
    result = _assigned_key(index, call)
    names = {k for k in (key, result, f"{result}.module") if k}
    scope = index.scope_of(call)
    here = position(call)
    before = after = None
    for move in index.calls_named(*MOVES):
        if index.scope_of(move) is not scope or dotted(move.func.value) not in names:
            continue
        if position(move) < here:
            before = move
        elif after is None and position(move) > here:
            after = move
    if before is not None or after is None:
        return None
    return Hit(
        call,
        "DDL004",
        f"model is wrapped in DDP before it is moved to its device (moved on line {after.lineno})",
    )


def _env_kind(name: object) -> str:
    if name == "LOCAL_RANK":
        return "local"
    if name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        return "global"
    if name in ("SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"):
        return "local"
    return "unknown"


def _statement(index: ModuleIndex, node: ast.AST) -> ast.AST | None:
    for anc in (node, *index.ancestors(node)):
        if isinstance(anc, ast.stmt):
            return anc
    return None


def _reaching(index: ModuleIndex, name: ast.AST) -> list[ast.AST]:
    """The value of the last assignment to a plain name earlier in the same block as its use
    (`local_rank = dist.get_rank()` then `set_device(local_rank)` in one branch of a function
    that assigns `local_rank` differently in others); [] when there is none."""
    if not isinstance(name, ast.Name):
        return []
    # Plain assignments of the name first (often none): the use's block only when there are.
    assigns = [
        (assign, value)
        for _, value in index.bindings.get(name.id, ())
        if isinstance(value, ast.AST) and isinstance(assign := index.parent(value), ast.Assign)
    ]
    if not assigns:
        return []
    use = _statement(index, name)
    block = index.parent(use) if use is not None else None
    at = position(use) if use is not None else (0, 0)
    best: tuple[tuple[int, int], ast.AST] | None = None
    for assign, value in assigns:
        if index.parent(assign) is not block:
            continue
        where = position(assign)
        if where < at and (best is None or where > best[0]):
            best = (where, value)
    return [best[1]] if best else []


def _not_later(index: ModuleIndex, use: ast.AST, values: list) -> list:
    """The values less those assigned later in the use's own block, outside any loop: Cream's
    `set_device(args.local_rank)` runs before `args.local_rank = dist.get_rank()` two lines
    down, and reads the launcher's local rank."""
    stmt = _statement(index, use)
    if stmt is None or index.in_loop(stmt):
        return values
    block, at = index.parent(stmt), position(stmt)
    return [
        v
        for v in values
        if not (
            isinstance(v, ast.AST)
            and isinstance(assign := index.parent(v), ast.Assign)
            and index.parent(assign) is block
            and position(assign) > at
        )
    ]


GLOBAL_RANK_CALLS = frozenset({"get_rank", "get_global_rank", "get_world_rank"})


def rank_kind(index: ModuleIndex, expr: ast.AST | None, depth: int = 0) -> set[str]:
    """Whether a value is the local rank, the global rank, or unknown, by where it comes from.
    Kept per node and depth: a parameter fed by many call sites, each fed by many more, asks
    the same questions again and again (one 15-file tree took 0.3 s here without it)."""
    if expr is None or depth > 6:
        return {"unknown"}
    # The node is kept with its answer, so its id cannot be reused by a node made later.
    cache: dict[tuple[int, int], tuple[ast.AST, set[str]]]
    cache = index.__dict__.setdefault("_rank_kind", {})
    key = (id(expr), depth)
    if key not in cache:
        cache[key] = (expr, _rank_kind(index, expr, depth))
    return set(cache[key][1])


def _rank_kind(index: ModuleIndex, expr: ast.AST, depth: int) -> set[str]:
    if isinstance(expr, ast.Subscript) and dotted(expr.value) == "os.environ":
        key = expr.slice
        return {_env_kind(key.value if isinstance(key, ast.Constant) else None)}
    if isinstance(expr, ast.Call):
        name = index.callee_name(expr)
        qual = index.qualname(expr.func)
        if qual in ("os.environ.get", "os.getenv") and expr.args:
            first = expr.args[0]
            return {_env_kind(first.value if isinstance(first, ast.Constant) else None)}
        if name in ("get_local_rank", "get_node_local_rank"):
            return {"local"}
        if name in ("int", "str", "device") and expr.args:
            return rank_kind(index, expr.args[-1], depth + 1)
        if name == "format" and isinstance(expr.func, ast.Attribute) and expr.args:
            # `"cuda:{}".format(get_rank())`
            return set().union(*(rank_kind(index, a, depth + 1) for a in expr.args))
        local = index.resolve_call(expr)
        if local:  # `def get_rank(): ... return dist.get_rank()` in this file: what it returns
            kinds: set[str] = set()
            for func in local:
                for value in index.returns_of(func):
                    kinds |= rank_kind(index, value, depth + 1)
            return kinds or {"unknown"}
        if name in GLOBAL_RANK_CALLS:
            if name == "get_rank" and _joined_as_local(index, depth):
                return {"local"}  # `init_process_group(rank=local_rank)`: what it returns
            return {"global"}  # torch.distributed's, or a project's helper of that name
        return {"unknown"}
    if isinstance(expr, ast.Constant) or (
        isinstance(expr, ast.UnaryOp) and isinstance(expr.operand, ast.Constant)
    ):
        return set()  # a fallback (`return 0`, `rank = -1` when not distributed) says nothing
    if isinstance(expr, ast.JoinedStr):
        parts = [v.value for v in expr.values if isinstance(v, ast.FormattedValue)]
        return set().union(*(rank_kind(index, p, depth + 1) for p in parts)) or {"unknown"}
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.Mod) and isinstance(expr.left, ast.Constant):
            # `"cuda:%d" % rank`: a format, not a remainder
            parts = expr.right.elts if isinstance(expr.right, ast.Tuple) else [expr.right]
            return set().union(*(rank_kind(index, p, depth + 1) for p in parts)) or {"unknown"}
        if isinstance(expr.op, ast.Mod):
            return {"local"}
        if isinstance(expr.op, ast.Add) and any(
            isinstance(side, ast.BinOp) and isinstance(side.op, ast.Mult)
            for side in (expr.left, expr.right)
        ):
            return {"global"}  # `node_rank * gpus_per_node + gpu`: the global rank, built
        return {"unknown"}
    if isinstance(expr, ast.IfExp):  # `0 if not is_ddp else dist.get_rank()`
        return rank_kind(index, expr.body, depth + 1) | rank_kind(index, expr.orelse, depth + 1)
    if isinstance(expr, (ast.Name, ast.Attribute)):
        values = _reaching(index, expr) or _not_later(
            index, expr, index.values_of(dotted(expr) or "", expr)
        )
        if (
            isinstance(expr, ast.Name)
            and all(v is UNKNOWN for v in values)
            and (id(index.scope_of(expr)), expr.id) in index.spawn_index_params
        ):
            return {"local"}  # `def worker(rank, ...)` that mp.spawn starts: its index here
        if values and all(v is UNKNOWN for v in values) and isinstance(expr, ast.Name):
            unpacked = _unpacked_return(index, expr, depth)
            if unpacked:  # `rank, world_size = setup()`: what setup returns in that place
                return unpacked
        passed = index.passed_args(expr) if all(v is UNKNOWN for v in values) else None
        if passed:  # a parameter: what this file's callers pass (`train(rank)`, rank from SLURM)
            values = [UNKNOWN if arg is None else arg for arg in passed]
        elif passed == [] and (elsewhere := _passed_elsewhere(index, expr, depth)):
            return elsewhere  # no call here: what the project's DDP programs pass
        kinds: set[str] = set()
        for v in values:
            kinds |= {"unknown"} if v is UNKNOWN else rank_kind(index, v, depth + 1)
        if kinds == {"global"}:
            return kinds  # `local_rank = dist.get_rank()`: the name does not make it local
        if "local_rank" in last_name(expr).lower():
            return {"local"}
        if not kinds and _global_elsewhere(index, expr):
            return {"global"}
        if not kinds and values and not any(v is UNKNOWN for v in values):
            return set()  # `device = torch.device("cuda" if cuda else "cpu")`: no rank at all
        return kinds or {"unknown"}
    return {"unknown"}


def _unpacked_return(index: ModuleIndex, name: ast.Name, depth: int) -> set[str]:
    """The kind of rank a name unpacked from a helper's tuple holds (`r, wsz = init()` with
    `init` returning `dist.get_rank(), dist.get_world_size()`): see unpacked_places. Empty
    when the name is bound otherwise or the helper returns no tuple of that length."""
    kinds: set[str] = set()
    for owner, expr in unpacked_places(index, name):
        kinds |= rank_kind(owner, expr, depth + 1)
    return kinds


def unpacked_places(index: ModuleIndex, name: ast.Name) -> list[tuple[ModuleIndex, ast.expr]]:
    """What a name unpacked from a call's tuple (`a, b = helper()`) may hold: the same place of
    each tuple the helper returns, with the module it is written in (this file, or the
    project module the helper is imported from)."""
    scope = index.scope_of(name)
    cache: dict = index.__dict__.setdefault("_unpacked_places", {})
    key = (id(scope), name.id)
    if key not in cache:  # asked for each use of the name
        cache[key] = (scope, _unpacked_places(index, name, scope))
    return cache[key][1]


def _unpacked_places(
    index: ModuleIndex, name: ast.Name, scope: ast.AST
) -> list[tuple[ModuleIndex, ast.expr]]:
    out: list[tuple[ModuleIndex, ast.expr]] = []
    for assign in index.assigns:
        target = assign.targets[0] if len(assign.targets) == 1 else None
        if not isinstance(target, (ast.Tuple, ast.List)) or index.scope_of(assign) is not scope:
            continue
        places = [i for i, e in enumerate(target.elts) if type(e) is ast.Name and e.id == name.id]
        if not places or any(type(e) is ast.Starred for e in target.elts):
            continue
        if not isinstance(assign.value, ast.Call):
            return []
        for owner, value in _returns_of(index, assign.value):
            if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
                out.append((owner, value.elts[places[0]]))
    return out


def _returns_of(index: ModuleIndex, call: ast.Call) -> list[tuple[ModuleIndex, ast.expr]]:
    """The values the function a call runs returns, with the module they are written in: this
    file's, or the one of the project module it is imported from under that name."""
    local = index.resolve_call(call)
    if local:
        return [(index, v) for f in local for v in index.returns_of(f)]
    target = imported_name(index, call.func)
    project = index.project
    helper = project.index_of(target[0]) if project is not None and target else None
    if helper is None or target is None:
        return []
    funcs = [f for f in helper.functions.get(target[1], ()) if helper.parent(f) is helper.tree]
    return [(helper, v) for f in funcs for v in helper.returns_of(f)]


def _passed_elsewhere(index: ModuleIndex, name: ast.AST, depth: int) -> set[str]:
    """The kind of rank the project's DDP programs pass for a parameter of a function or a
    class of this module that no call here makes (VoiceCraft's main.py builds
    `Trainer(args, world_size, rank)` after `rank = dist.get_rank()`, and the trainer's
    constructor keeps `self.rank` as its device): read from each program that imports this
    module and calls it by name. Empty when none does."""
    project, path = index.project, index.path
    scope = index.scope_of(name)
    if project is None or path is None or not isinstance(name, ast.Name):
        return set()
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    cls = index.enclosing_class(scope)
    if cls is not None and scope.name == "__init__" and index.parent(cls) is index.tree:
        callee = cls.name
    elif cls is None and index.parent(scope) is index.tree:
        callee = scope.name
    else:
        return set()
    params = [a.arg for a in (*scope.args.posonlyargs, *scope.args.args)]
    if cls is not None:
        params = params[1:]  # self
    key = os.path.abspath(path)
    if not project.in_ddp_program(key):
        return set()
    kinds: set[str] = set()
    for program in sorted(project.ddp_importers.get(key, ())):
        caller = project.index_of(program) if program != key else None
        for call in caller.calls_named(callee) if caller is not None else ():
            arg = argument_for(call, params, name.id)
            kinds |= rank_kind(caller, arg, depth + 1) if arg is not None else {"unknown"}
    return kinds


def _joined_as_local(index: ModuleIndex, depth: int) -> bool:
    """Every `init_process_group` of this file passes the local rank as `rank=` (MeloTTS joins
    with `rank=local_rank`): `get_rank()` then returns the local rank, a right device index on
    every node. Joining so is its own mistake on several nodes, but not a device one."""
    inits = index.init_calls
    if not inits:
        return _helper_joins_as_local(index, depth)
    for call in inits:
        rank = next((k.value for k in call.keywords if k.arg == "rank"), None)
        if rank is None or rank_kind(index, rank, depth + 1) != {"local"}:
            return False
    return True


def _helper_joins_as_local(index: ModuleIndex, depth: int) -> bool:
    """The same where this file makes no group itself: every set-up helper of the project it
    calls passes a local rank on as `rank=` (nnUNet's `setup_ddp(rank, world_size)`, handed a
    spawn index), or, in a module that calls none (a trainer), every program of the project
    that imports it and makes a group joins so (nnUNet's trainer asks `dist.get_rank()`)."""
    project = index.project
    if project is None or index.path is None or depth > 5:
        return False
    calls = [c for c in index.all_init_calls if c not in index.init_calls]
    if calls:
        return all(_passes_local_rank(index, project, call, depth) for call in calls)
    reaching = [project.index_of(p) for p in sorted(project.programs_reaching(index.path))]
    programs = [p for p in reaching if p is not None and p.all_init_calls]
    return bool(programs) and all(_joined_as_local(p, depth + 1) for p in programs)


def _passes_local_rank(index: ModuleIndex, project: Project, call: ast.Call, depth: int) -> bool:
    """A call of a project helper whose every init passes one of its parameters on as
    `rank=`, given a local rank for each."""
    target = imported_name(index, call.func)
    helper = project.index_of(target[0]) if target else None
    funcs = helper.functions.get(target[1], []) if helper is not None and target else []
    if len(funcs) != 1 or helper is None:
        return False
    func = funcs[0]
    params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    ranks = [
        next((k.value for k in init.keywords if k.arg == "rank"), None)
        for init in helper.init_calls
        if helper.scope_of(init) is func
    ]
    return bool(ranks) and all(
        isinstance(r, ast.Name)
        and r.id in params
        and (arg := argument_for(call, params, r.id)) is not None
        and rank_kind(index, arg, depth + 1) == {"local"}
        for r in ranks
    )


def _global_elsewhere(index: ModuleIndex, expr: ast.AST) -> bool:
    """`args.rank` in a trainer module, never assigned here, that the DDP script of the
    project builds as `args.rank * ngpus_per_node + gpu` (MONAI's SwinUNETR trainer)."""
    if not isinstance(expr, ast.Attribute) or index.project is None or index.path is None:
        return False
    if "rank" not in expr.attr.lower():
        return False  # `args.rank`, `opt.global_rank`: only a rank can be built so
    name = dotted(expr)
    if name is None or name.startswith("self.") or index.bindings.get(name):
        return False
    if GLOBAL_RANK_ATTR + expr.attr in program_effects(index):
        return True  # a set-up helper it calls sets `args.rank = dist.get_rank()` (LEAD)
    return bool(index.project.builds_global_rank(name, index.path))


def _single(index: ModuleIndex, expr: ast.AST | None, depth: int = 0) -> ast.AST | None:
    """The one device of `device_ids=[x]`, also through a name (`device_ids=args.device_ids`
    after `args.device_ids = [dist.get_rank()]`); None when it is not one known element."""
    if isinstance(expr, (ast.List, ast.Tuple)) and len(expr.elts) == 1:
        return expr.elts[0]
    if isinstance(expr, (ast.Name, ast.Attribute)) and depth < 3:
        values = [
            v
            for v in index.values_of(dotted(expr) or "", expr)
            if not (isinstance(v, ast.Constant) and v.value is None)
        ]
        found = [_single(index, v, depth + 1) if v is not UNKNOWN else None for v in values]
        if len(found) == 1 and found[0] is not None:
            return found[0]
    return None


def device_value(index: ModuleIndex, expr: ast.AST) -> bool:
    """A name whose every value is a `torch.device(...)` made from a rank (DDL004 reports the
    global-rank ones where they are made)."""
    if not isinstance(expr, (ast.Name, ast.Attribute)) or (key := dotted(expr)) is None:
        return False
    values = _reaching(index, expr) or index.values_of(key, expr)
    return (
        bool(values)
        and all(
            (isinstance(v, ast.Call) and index.callee_name(v) == "device" and v.args)
            or (isinstance(v, ast.expr) and device_string_rank(v) is not None)
            for v in values
        )
        or (bool(values) and device_alias(index, expr, values))
    )


DEVICE_NAMES = frozenset({"device", "dev", "cuda_device", "gpu_device"})


def device_alias(index: ModuleIndex, expr: ast.AST, values: list | None = None) -> bool:
    """`device = args.rank` (idisc): a name kept as the device whose every value is the global
    rank. DDL004 reports it where it is bound, not at each `.to(device)`."""
    if last_name(expr) not in DEVICE_NAMES:
        return False
    if values is None:
        values = index.values_of(dotted(expr) or "", expr)
    # the one-process run's own device (`if not args.distributed: device = torch.device(...)`)
    values = [v for v in values if not (isinstance(v, ast.AST) and single_process_branch(index, v))]
    return bool(values) and all(
        isinstance(v, ast.expr)
        and not isinstance(v, (ast.Constant, ast.JoinedStr, ast.BinOp))
        and not (isinstance(v, ast.Call) and index.callee_name(v) in ("device", "format"))
        and rank_kind(index, v) == {"global"}
        for v in values
    )


def device_string_rank(expr: ast.AST) -> ast.expr | None:
    """The index of a device spelled as a string with a name in it: `f"cuda:{rank}"`,
    `"cuda:{}".format(args.local_rank)`, `"cuda:" + str(gpu)`; None for anything else."""
    if isinstance(expr, ast.JoinedStr):
        texts = [v.value for v in expr.values if isinstance(v, ast.Constant)]
        holes = [v.value for v in expr.values if isinstance(v, ast.FormattedValue)]
        if len(holes) == 1 and texts and str(texts[0]).startswith("cuda:"):
            return holes[0]
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "format"
        and isinstance(expr.func.value, ast.Constant)
        and expr.func.value.value == "cuda:{}"
        and len(expr.args) == 1
    ):
        return expr.args[0]
    if (
        isinstance(expr, ast.BinOp)
        and isinstance(expr.op, ast.Add)
        and isinstance(expr.left, ast.Constant)
        and expr.left.value == "cuda:"
        and isinstance(expr.right, ast.Call)
        and last_name(expr.right.func) == "str"
        and len(expr.right.args) == 1
    ):
        return expr.right.args[0]
    return None


def _global_rank_as_device(index: ModuleIndex) -> list[Hit]:
    hits: list[Hit] = []
    for call in index.calls_named(*DDP_NAMES):
        device = _single(index, kwarg(call, "device_ids"))
        if device is not None and rank_kind(index, device) == {"global"}:
            hits.append(
                Hit(
                    kwarg(call, "device_ids") or call,  # the mistake's line in a long call
                    "DDL004",
                    "device_ids uses the global RANK; on a second node it names a GPU that is not "
                    "there (use LOCAL_RANK)",
                )
            )
    for call in index.calls_named("FullyShardedDataParallel", "FSDP"):
        device = kwarg(call, "device_id")  # FSDP takes one device, not a list
        if device is not None and device_value(index, device):
            continue  # a device made from the rank: reported where it is made
        if device is not None and rank_kind(index, device) == {"global"}:
            hits.append(
                Hit(
                    device,
                    "DDL004",
                    "FSDP's device_id uses the global RANK; on a second node it names a GPU that "
                    "is not there (use LOCAL_RANK)",
                )
            )
    for call in index.calls_named("set_device"):
        if (
            call.args
            and device_value(index, call.args[0])
            and not device_alias(index, call.args[0])
        ):
            continue  # `device = torch.device(f"cuda:{rank}")`: reported where it is made
        if call.args and rank_kind(index, call.args[0]) == {"global"}:
            hits.append(
                Hit(
                    call,
                    "DDL004",
                    "torch.cuda.set_device uses the global RANK; use LOCAL_RANK (the GPU index "
                    "on this node)",
                )
            )
    return hits


def _bare_cuda_without_set_device(index: ModuleIndex) -> list[Hit]:
    if not index.all_init_calls or index.calls_by_name.get("set_device") or index.framework_run:
        return []
    if "set_device" in program_effects(index) or index.library_inits:
        return []  # a helper of the project (init_distributed_mode) picks the GPU
    if "CUDA_VISIBLE_DEVICES" in index.strings:
        return []
    names = [n.lower() for n in index.calls_by_name]
    if any("set" in n and ("device" in n or "gpu" in n) for n in names):
        return []  # a helper (setup_device, set_gpu) picks the GPU for us
    if any(index.qualname(c.func) == "torch.cuda.device" for c in index.calls_named("device")):
        return []
    bare = [
        c
        for c in index.calls_named("cuda")
        if isinstance(c.func, ast.Attribute)
        and not c.args
        and not kwarg(c, "device")
        and not rank0_only(index, c)  # rank 0's own work (validation, sampling): its GPU is 0
    ]
    if not bare:
        return []
    # The first one a run reaches (not Person_reID's leftover `fliplr`), to show the mistake.
    bare = [c for c in bare if not index.unread(index.scope_of(c))] or bare
    # The model's move, where there is one, before a batch's in a helper written above it
    # (genvs' `sample()` moving images, defined before the `train()` that moves the model).
    taken = [c for c in bare if _ddp_takes(index, c) is not None]
    first = taken[0] if taken else bare[0]
    wrap = _wrapped_without_device_ids(index, first)
    if wrap is not None:  # the mistake shows where DDP takes the model: as tune marks it
        hits = [
            Hit(
                wrap,
                "DDL004",
                f"DDP without device_ids around a model moved with a bare .cuda() on "
                f"line {first.lineno}, and no torch.cuda.set_device: every rank uses GPU 0",
            )
        ]
    else:
        hits = [Hit(first, "DDL004", BARE_CUDA)]
    # Each other model DDP takes after a bare .cuda() is a mistake of its own (a GAN's
    # generator and discriminator): the tensors of the loop are not, one finding says it.
    for call in bare:
        if call is first:
            continue
        ddp = _ddp_takes(index, call)
        if ddp is not None and _wrapped_without_device_ids(index, call) is None:
            hits.append(Hit(call, "DDL004", f"{BARE_CUDA} (DDP takes it on line {ddp.lineno})"))
    return hits


BARE_CUDA = ".cuda() without a device index and no torch.cuda.set_device: every rank uses GPU 0"


def _ddp_takes(index: ModuleIndex, cuda: ast.Call) -> ast.Call | None:
    """The DDP call of the same function, after it, that takes what `.cuda()` moved: the
    moved name (`model.cuda()`), or the name the moved value is bound to (`self.model =
    Net().cuda()`)."""
    moved = {dotted(cuda.func.value)} if isinstance(cuda.func, ast.Attribute) else set()
    parent = index.parent(cuda)
    if isinstance(parent, ast.Assign) and parent.value is cuda:
        moved |= {dotted(t) for t in parent.targets}
    moved.discard(None)
    scope = index.scope_of(cuda)
    for ddp in index.calls_named(*DDP_NAMES):
        if index.scope_of(ddp) is not scope or position(ddp) < position(cuda) or not ddp.args:
            continue
        first = ddp.args[0]
        if first is cuda or dotted(first) in moved:
            return ddp
    return None


def _wrapped_without_device_ids(index: ModuleIndex, cuda: ast.Call) -> ast.Call | None:
    """The DDP call of the same function that wraps what `model.cuda()` moved, after it and
    without device_ids (`model.cuda(); model = DDP(model)`, or `DDP(model.cuda())`)."""
    moved = dotted(cuda.func.value) if isinstance(cuda.func, ast.Attribute) else None
    scope = index.scope_of(cuda)
    for ddp in index.calls_named(*DDP_NAMES):
        if index.scope_of(ddp) is not scope or position(ddp) < position(cuda) or not ddp.args:
            continue
        if kwarg(ddp, "device_ids") is not None or len(ddp.args) > 1:
            continue
        first = ddp.args[0]
        if first is cuda or (moved is not None and dotted(first) == moved):
            return ddp
    return None


def check(index: ModuleIndex) -> list[Hit]:
    if not index.is_ddp_script:
        return []
    hits = [h for c in index.calls_named(*DDP_NAMES) if (h := _wrapped_before_moved(index, c))]
    return hits + _global_rank_as_device(index) + _bare_cuda_without_set_device(index)
