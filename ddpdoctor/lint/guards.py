"""Is this statement only run on rank 0? Recognises the guards real scripts use: `if rank == 0`,
`if dist.get_rank() == 0`, `if master_process`, `if is_main_process()`, `if self.gpu_id == 0`,
`if args.rank % ngpus_per_node == 0`, `if not rank`, `local_rank in [-1, 0]`, early exits such as
`if rank != 0: return`, `@rank_zero_only` helpers and callers that guard every call."""

from __future__ import annotations

import ast
from collections.abc import Callable

from ddpdoctor.lint.index import (
    FUNC_TYPES,
    ModuleIndex,
    dotted,
    has_star_args,
    is_const,
    last_name,
    none_tested,
    param_default,
    position,
)

RANK0_WORDS = (
    "master",
    "main_process",
    "mainprocess",  # sssegmentation's `ismainprocess()`
    "is_main",
    "rank0",
    "rank_0",
    "rank_zero",
    "global_zero",
    "primary",  # `is_primary()`, gangealing's `primary()`
    "is_chief",
    "local_main",
    "first_worker",  # ANCE's is_first_worker()
    "first_process",
    "first_rank",
)
RANK_FUNCS = frozenset({"get_rank", "get_local_rank", "get_global_rank", "get_node_local_rank"})
NONDIST_WORDS = ("distribut", "ddp", "is_initialized", "multiprocessing", "parallel", "multi_gpu")
NONDIST_WORDS += ("multigpu",)
EXITS = (ast.Return, ast.Continue, ast.Break, ast.Raise)


# Whole names that hold a rank: `gpu` in the ImageNet example, `proc_id` in Slurm helpers.
RANK_NAMES = frozenset({"gpu", "gpu_id", "device_id", "local_gpu", "process_id", "proc_id"})
RANK_NAMES |= {"gpu_index", "gpu_idx"}  # monosdf's `self.GPU_INDEX == 0`


def _rankish(expr: ast.AST) -> bool:
    """An expression that holds a rank (`rank`, `args.local_rank`, `self.gpu_id`, `get_rank()`,
    `args.rank % ngpus_per_node`)."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
        return _rankish(expr.left)
    if isinstance(expr, ast.Call):  # get_rank(), or a helper of the project's: rank()
        name = last_name(expr.func)
        if name == "int" and len(expr.args) == 1:
            return _rankish(expr.args[0])  # `int(os.environ["RANK"])`
        if name in ("get", "getenv") and expr.args and isinstance(expr.args[0], ast.Constant):
            return "rank" in str(expr.args[0].value).lower()  # `os.environ.get("RANK", 0)`
        return name in RANK_FUNCS or name.lower() in ("rank", "global_rank", "local_rank")
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
        return "rank" in str(expr.slice.value).lower()  # a config dict: `opt["rank"]`
    name = last_name(expr).lower() if isinstance(expr, (ast.Name, ast.Attribute)) else ""
    return "rank" in name or name in RANK_NAMES


def rank0_name(expr: ast.AST) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    if not isinstance(target, (ast.Name, ast.Attribute)):
        return False
    name = last_name(target).lower()
    return any(w in name for w in RANK0_WORDS)


def _int(expr: ast.AST) -> int | None:
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str) and expr.value.isdigit():
        return int(expr.value)  # `os.environ.get("RANK") == "0"`
    if (
        isinstance(expr, ast.UnaryOp)
        and isinstance(expr.op, ast.USub)
        and isinstance(expr.operand, ast.Constant)
        and type(expr.operand.value) is int
    ):
        return -expr.operand.value
    return None


def _atom(test: ast.AST) -> int:
    """+1: true only on rank 0; -1: true only off rank 0; 0: cannot tell."""
    inner, truth = _truth(test)  # `accelerator.is_main_process == True`
    if inner is not test:
        return _atom(inner) * (1 if truth else -1)
    if rank0_name(test):
        return 1
    if isinstance(test, (ast.Name, ast.Attribute)) and _rankish(test):
        return -1  # `if rank:` is true on every rank but 0
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return 0
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if _int(left) is not None:
        left, right = right, left
        op = {ast.Gt: ast.Lt(), ast.Lt: ast.Gt(), ast.GtE: ast.LtE(), ast.LtE: ast.GtE()}.get(
            type(op), op
        )
    if not _rankish(left):
        return 0
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
        values = {_int(e) for e in right.elts}
        if 0 in values and values <= {0, -1}:
            return 1 if isinstance(op, ast.In) else -1
        return 0
    value = _int(right)
    if value is None:
        return 0
    if value == 0:
        return {ast.Eq: 1, ast.Is: 1, ast.LtE: 1, ast.NotEq: -1, ast.IsNot: -1, ast.Gt: -1}.get(
            type(op), 0
        )
    if value == 1:
        return {ast.Lt: 1, ast.GtE: -1}.get(type(op), 0)
    return 0


def _truth(test: ast.AST) -> tuple[ast.AST, bool]:
    """`flag == True`, `flag is True`, `bool(flag)` -> (flag, True); `flag == False` ->
    (flag, False); anything else as it is."""
    if isinstance(test, ast.Call) and last_name(test.func) == "bool" and len(test.args) == 1:
        return _truth(test.args[0])
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        right = test.comparators[0]
        if isinstance(right, ast.Constant) and type(right.value) is bool:
            if isinstance(test.ops[0], (ast.Eq, ast.Is)):
                return test.left, right.value
            if isinstance(test.ops[0], (ast.NotEq, ast.IsNot)):
                return test.left, not right.value
    return test, True


def nondistributed_test(test: ast.AST) -> bool:
    """`not args.distributed`, `world_size == 1`, `local_rank == -1`: a single-process run."""
    inner, truth = _truth(test)
    if not truth:
        return distributed_test(inner)
    test = inner
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return all(nondistributed_test(v) for v in test.values)  # every way in is one process
    if "data_parallel" in _flag_name(test):
        return True  # `if args.data_parallel:` (DataParallel): one process drives the GPUs
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        if _asks_dist_available(test.operand):
            return True  # `not dist.is_available()`: no torch.distributed, so one process
        name = _flag_name(test.operand)  # `not args.distributed`, `not cfg["distributed"]`
        return name == "dist" or any(w in name for w in NONDIST_WORDS) or _dist_switch(name)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        name = last_name(left.func if isinstance(left, ast.Call) else left).lower()
        # `world_size == 1`, `args.n_gpu == 1`, `torch.cuda.device_count() <= 1`: one process
        one = ("world_size", "n_gpu", "ngpu", "num_gpu", "device_count")
        if any(w in name for w in one) and (
            (_int(right) == 1 and isinstance(op, (ast.Eq, ast.LtE)))
            or (_int(right) == 2 and isinstance(op, ast.Lt))
        ):
            return True
        if _rankish(left) and _int(right) == -1 and isinstance(test.ops[0], ast.Eq):
            return True
    return False


def _asks_dist_available(expr: ast.AST) -> bool:
    """`dist.is_available()` / `torch.distributed.is_available()` (not CUDA's)."""
    if not isinstance(expr, ast.Call):
        return False
    return (dotted(expr.func) or "").split(".")[-2:] in (
        ["dist", "is_available"],
        ["distributed", "is_available"],
    )


def _flag_name(expr: ast.AST) -> str:
    """`args.distributed` -> distributed, `opt["dist"]` -> dist, `is_initialized()` too."""
    if isinstance(expr, ast.Call):
        if last_name(expr.func) == "getattr" and len(expr.args) > 1:
            key = expr.args[1]  # `getattr(opts, "ddp.use_distributed")` -> use_distributed
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return key.value.rsplit(".", 1)[-1].lower()
        expr = expr.func
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
        return str(expr.slice.value).lower()
    return last_name(expr).lower() if isinstance(expr, (ast.Name, ast.Attribute)) else ""


def distributed_test(test: ast.AST) -> bool:
    """`if args.distributed:`, `if opt["dist"]:`, `if dist.is_initialized():`,
    `if world_size > 1:`, `if local_rank != -1:`: true only when several processes run."""
    test, truth = _truth(test)
    if not truth:
        return nondistributed_test(test)
    name = _flag_name(test)
    if "data_parallel" in name:
        return False  # DataParallel: one process
    if name and (name in ("dist", "distributed") or any(w in name for w in NONDIST_WORDS)):
        return True
    if _dist_switch(name):
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if "world_size" in last_name(left).lower() and _int(right) == 1:
            return isinstance(op, (ast.Gt, ast.NotEq))
        if _rankish(left) and _int(right) == -1:
            return isinstance(op, (ast.NotEq, ast.Gt))
        if _rankish(left) and _int(right) == 0:
            return isinstance(op, ast.GtE)  # `if local_rank >= 0:` (-1 when not launched)
    # Not `dist_mode == "ddp"`: its other arm may be FSDP's (relora's distributed_type), no
    # run of one process.
    return False


# `dist_url`, `dist_backend`: settings of a group, not a switch that asks for one.
DIST_SETTINGS = frozenset({"url", "backend", "port", "addr", "address", "method", "file", "init"})


def _dist_switch(name: str) -> bool:
    """`args.dist_train`, `cfg.use_dist`: a flag with the word `dist` in its name; `is_mp`,
    BRIO's switch to mp.spawn's processes."""
    words = set(name.split("_"))
    return bool(words & {"dist", "mp"}) and not words & DIST_SETTINGS


GPU_COUNT_WORDS = ("ngpu", "n_gpu", "num_gpu", "gpus_per_node", "device_count", "nproc")


def _several_gpus_and(test: ast.AST) -> bool:
    """`if args.distributed and ngpus_per_node > 1: launch() else: single_main()` (OpenP5):
    the else runs when the switch is off or there is one GPU, in one process either way."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
        return False
    kinds = [distributed_test(v) or gpu_count_above_one(v) for v in test.values]
    return all(kinds) and any(distributed_test(v) for v in test.values)


def gpu_count_above_one(test: ast.AST) -> bool:
    """`ngpus_per_node > 1`, `torch.cuda.device_count() >= 2`: more than one GPU in view."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    name = (last_name(left.func) if isinstance(left, ast.Call) else last_name(left)).lower()
    if not any(w in name for w in GPU_COUNT_WORDS):
        return False
    return (isinstance(op, ast.Gt) and _int(right) == 1) or (
        isinstance(op, ast.GtE) and _int(right) == 2
    )


def _several_gpu_ids(test: ast.AST) -> bool:
    """`len(args.gpuid) > 1`: several GPU ids given, which mp.spawn scripts (BRIO) start one
    process each for; asked where the script also sets its group up on that condition."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if not (isinstance(left, ast.Call) and last_name(left.func) == "len" and left.args):
        return False
    if "gpu" not in last_name(left.args[0]).lower():
        return False
    return (isinstance(op, ast.Gt) and _int(right) == 1) or (
        isinstance(op, ast.GtE) and _int(right) == 2
    )


def single_process_branch(
    index: ModuleIndex, node: ast.AST, known: tuple[ast.AST, ...] = ()
) -> bool:
    """Inside `if not args.distributed:` / `if world_size == 1:`, or in the else of a
    distributed test (`if opt["dist"]: ... else:`): code for one process. `known`: tests
    that hold where the node's value is used (the test of the choice it is the GPU side of)."""
    child = node
    refused = _refused_when_distributed(index)
    holds: list[ast.AST] = list(known)  # tests known true here (the `if`s holding node, ...)
    for anc in index.ancestors(node):
        if isinstance(anc, ast.If) and child is not anc.test:
            in_body = child in anc.body
            if in_body:
                if nondistributed_test(anc.test) or _one_process_or_refuted(anc.test, holds):
                    return True
                holds.append(anc.test)
            if not in_body and else_runs_one_process(anc.test):
                return True
            flag = _negated_flag(anc.test)
            if (in_body and dotted(anc.test) in refused) or (not in_body and flag in refused):
                return True
        if isinstance(anc, ast.IfExp) and child is anc.body:
            if nondistributed_test(anc.test):
                return True
            holds.append(anc.test)
        if isinstance(anc, ast.IfExp) and child is anc.orelse and else_runs_one_process(anc.test):
            return True  # `cuda:{LOCAL_RANK}` if world_size > 1 else `cuda:0` (VISTA)
        if _after_single_process_assert(anc, child):
            return True
        child = anc
    return False


def else_runs_one_process(test: ast.AST) -> bool:
    """The else of `if args.distributed:` or of `if args.dist_train and args.ngpu > 1:`: what
    runs there is one process."""
    return distributed_test(test) or _several_gpus_and(test)


def _one_process_or_refuted(test: ast.AST, holds: list[ast.AST]) -> bool:
    """`if local_rank == -1 or not args.cuda:` around `if n > 1 and args.cuda:`: a distributed
    run enters the outer branch only by its other operands, and a test known true inside
    contradicts each of them, so what it holds runs in one process (DRAGON's get_devices).
    So does `if local_rank == -1 or args.no_cuda:` around `... if ... and not args.no_cuda`
    (the transformers examples' device choice)."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or)):
        return False
    others = [v for v in test.values if not nondistributed_test(v)]
    if len(others) == len(test.values):
        return False
    operands = [t for h in holds for t in and_operands(h)]
    known = {dotted(t) for t in operands} - {None}
    known_off = {_negated_flag(t) for t in operands} - {None}
    return all(_negated_flag(v) in known or dotted(v) in known_off for v in others)


def and_operands(test: ast.AST) -> list[ast.AST]:
    """The operands of `a and b and ...` (nested ones too), or the test alone."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [t for v in test.values for t in and_operands(v)]
    return [test]


def distributed_branch(index: ModuleIndex, node: ast.AST) -> bool:
    """Reached only when several processes run, the other side of single_process_branch: in
    the true branch of a distributed switch (`if args.multi_gpu:`, `elif use_distributed:`,
    `DistributedSampler(ds) if args.multi_gpu else None`, `if cuda and rank != -1:`), in the
    else of a one-process test, or after the operand of an `and`/`or` that decides it
    (`local_rank == -1 or dist.get_rank() == 0` asks the rank only under DDP)."""
    child = node
    for anc in index.ancestors(node):
        if isinstance(anc, (ast.If, ast.IfExp, ast.While)) and child is not anc.test:
            in_body = child is anc.body or (isinstance(anc.body, list) and child in anc.body)
            if in_body and _distributed_only(anc.test):
                return True
            if not in_body and nondistributed_test(anc.test):
                return True
        elif isinstance(anc, ast.BoolOp) and child in anc.values:
            before = anc.values[: anc.values.index(child)]
            if isinstance(anc.op, ast.And) and any(_distributed_only(v) for v in before):
                return True
            if isinstance(anc.op, ast.Or) and any(nondistributed_test(v) for v in before):
                return True
        child = anc
    return False


def _distributed_only(test: ast.AST) -> bool:
    """True only when several processes run: a distributed test, one operand of an `and`, a
    rank other than the first (`local_rank not in [-1, 0]`), or `local_rank == 0` (the
    one-process run of such scripts has rank -1; unsure, so yes)."""
    if distributed_test(test) or _several_gpu_ids(test):
        return True
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_distributed_only(v) for v in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    op, right = test.ops[0], test.comparators[0]
    if "rank" not in (dotted(test.left) or "").lower():
        return False
    if isinstance(op, ast.Eq):
        return _int(right) == 0
    elts = right.elts if isinstance(right, (ast.List, ast.Tuple, ast.Set)) else []
    return isinstance(op, ast.NotIn) and any(_int(e) == -1 for e in elts)


def _after_single_process_assert(container: ast.AST, child: ast.AST) -> bool:
    """`assert opt.local_rank == -1, 'DDP mode not implemented for --evolve'` earlier in the
    same block: what follows runs in one process."""
    for name in ("body", "orelse", "finalbody"):
        block = getattr(container, name, None)
        if isinstance(block, list) and child in block:
            return any(
                isinstance(stmt, ast.Assert) and nondistributed_test(stmt.test)
                for stmt in block[: block.index(child)]
            )
    return False


def _negated_flag(test: ast.AST) -> str | None:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return dotted(test.operand)
    return None


def _refused_when_distributed(index: ModuleIndex) -> set[str]:
    """Flags a distributed branch asserts are off (`if LOCAL_RANK != -1: assert not
    opt.evolve`): a branch taken only when such a flag is on runs in one process."""
    cached = index.__dict__.get("_refused")
    if cached is None:
        cached = set()
        for node in index.asserts:
            flag = _negated_flag(node.test)
            if flag is None:
                continue
            if any(
                isinstance(a, ast.If) and distributed_test(a.test) for a in index.ancestors(node)
            ):
                cached.add(flag)
        index.__dict__["_refused"] = cached
    return cached


def implies_rank0(test: ast.AST, negated: bool = False) -> bool:
    """Whether `test` (or `not test` when negated) being true means we are on rank 0."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return implies_rank0(test.operand, not negated)
    if isinstance(test, ast.BoolOp):
        conj = isinstance(test.op, ast.And) != negated  # not (a or b) == not a and not b
        if conj:
            return any(implies_rank0(v, negated) for v in test.values)
        ok = [implies_rank0(v, negated) for v in test.values]
        return any(ok) and all(
            o or _one_process_operand(v, negated) for o, v in zip(ok, test.values, strict=True)
        )
    polarity = _atom(test)
    return polarity == (-1 if negated else 1)


def _one_process_operand(test: ast.AST, negated: bool) -> bool:
    """An operand of a rank-0 test's `or` that holds (or, negated, fails) only in a run of one
    process: `not args.distributed or rank == 0`, `MAIN = rank is None or rank == 0`,
    `"LOCAL_RANK" not in os.environ or int(os.environ["LOCAL_RANK"]) == 0`, `rank == 0 or
    device == torch.device("cpu")`; and, negated, `not (dist.is_initialized() and rank != 0)`.
    Only here: a one-process test elsewhere decides more than who writes."""
    if negated:
        return distributed_test(test) or _rank_given(test, True) or _env_names_rank(test, True)
    return (
        nondistributed_test(test)
        or _rank_given(test, False)
        or _env_names_rank(test, False)
        or _on_the_cpu(test)
    )


def _rank_given(test: ast.AST, given: bool) -> bool:
    """`rank is not None` (given) / `rank is None` (not given: no process group)."""
    tested = none_tested(test, given)
    return tested is not None and _rankish(tested)


def _env_names_rank(test: ast.AST, present: bool) -> bool:
    """`"RANK" in os.environ` (present) / `"LOCAL_RANK" not in os.environ`: whether a launcher
    set the process's rank."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    key = test.left
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        return False
    if "RANK" not in key.value and "WORLD_SIZE" not in key.value:
        return False
    op = ast.In if present else ast.NotIn
    return isinstance(test.ops[0], op) and (dotted(test.comparators[0]) or "").endswith("environ")


def _on_the_cpu(test: ast.AST) -> bool:
    """`device == torch.device("cpu")`, `args.device == "cpu"`, `device.type == "cpu"`: the
    CPU fallback a script runs in one process."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False
    right = test.comparators[0]
    if isinstance(right, ast.Call) and last_name(right.func) == "device" and right.args:
        right = right.args[0]
    cpu = isinstance(right, ast.Constant) and right.value == "cpu"
    return cpu and "device" in (dotted(test.left) or "").lower()


def exclusive(index: ModuleIndex, a: ast.AST, b: ast.AST) -> bool:
    """`a` and `b` sit in opposite arms of one decision, so no run takes both: the two arms of
    an `if` (`if mode == "train": train() elif ...: predict()`), or of two `if`s that ask the
    same call-free test (P5: `if fp16 and native_amp:` scales the backward, the `else` of the
    same test later clips plain gradients)."""
    arms_a, arms_b = _arms(index, a), _arms(index, b)
    return any(arms_b.get(k, arm) != arm for k, arm in arms_a.items())


def _arms(index: ModuleIndex, node: ast.AST) -> dict[int | str, bool]:
    """Each decision holding a node (see _decision) -> whether the node is in its body."""
    cache: dict[int, dict[int | str, bool]] = index.__dict__.setdefault("_arms", {})
    if id(node) not in cache:
        arms: dict[int | str, bool] = {}
        child = node
        for anc in index.ancestors(node):
            if isinstance(anc, ast.If) and child is not anc.test:
                arms[_decision(anc)] = child in anc.body
            child = anc
        cache[id(node)] = arms
    return cache[id(node)]


def _decision(node: ast.If) -> int | str:
    """The test's text when it calls nothing (asked twice, it answers the same), else the
    `if` itself."""
    if any(isinstance(n, ast.Call) for n in ast.walk(node.test)):
        return id(node)
    return ast.dump(node.test)


def only_off_rank0(test: ast.AST) -> bool:
    """Whether `test` being true means we are not on rank 0 (`if args.gpu != 0:`, also
    `if args.distributed and args.gpu != 0:`): a branch the other ranks alone run."""
    if isinstance(test, ast.BoolOp):
        parts = [only_off_rank0(v) for v in test.values]
        return any(parts) if isinstance(test.op, ast.And) else all(parts)
    return _atom(test) == -1


def else_off_rank0(test: ast.AST) -> bool:
    """Whether the `else:` of `if test:` runs off rank 0 alone (`if rank == 0: ... else:`)."""
    return _atom(test) == 1


def exits(body: list[ast.stmt]) -> bool:
    """The block ends by leaving: return, continue, break, raise, exit()."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, EXITS):
        return True
    return (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and last_name(last.value.func) in ("exit", "_exit")
    )


def guarded_locally(index: ModuleIndex, node: ast.AST) -> bool:
    """Guarded within its own function: an enclosing rank-0 `if`, a preceding early exit for
    the other ranks, or a rank-0 `x if rank == 0 else y` / `rank == 0 and f()`."""
    child = node
    for anc in index.ancestors(node):
        if isinstance(anc, (ast.If, ast.IfExp)) and child is not anc.test:
            in_body = child is anc.body or (isinstance(anc.body, list) and child in anc.body)
            if function_object(index, anc.test):
                pass  # `if is_main_process:` without the call: always true, on every rank
            elif asked_before_init(index, anc):
                pass  # `if is_main_process():` before the group is up: rank 0 everywhere
            elif implies_rank0(anc.test, negated=not in_body):
                return True
            if in_body and (
                _rank0_flag(index, anc.test)
                or _none_off_rank0(index, anc.test)
                or _false_off_rank0(index, anc.test)
            ):
                return True
        elif isinstance(anc, ast.BoolOp) and isinstance(anc.op, ast.And):
            for v in anc.values:
                if v is child:
                    break
                if implies_rank0(v):
                    return True
        elif isinstance(anc, ast.ExceptHandler) and _tries_on_rank0_only(index.parent(anc)):
            return True
        if _after_early_exit(anc, child):
            return True
        child = anc
    scope = index.scope_of(node)
    body = getattr(scope, "body", [])
    # A single-process branch (`if not args.distributed:`) runs once, like rank 0's.
    return _after_early_exit_in(body, child) or single_process_branch(index, node)


def _tries_on_rank0_only(node: ast.AST | None) -> bool:
    """A `try:` whose body is rank 0's alone (`try: if local_rank == 0: evaluate()`): its
    `except` can only catch what rank 0 raised (Cap4Video's out-of-memory note)."""
    return isinstance(node, ast.Try) and all(
        isinstance(stmt, ast.If) and not stmt.orelse and implies_rank0(stmt.test)
        for stmt in node.body
    )


def _false_off_rank0(index: ModuleIndex, test: ast.AST) -> bool:
    """`if do_save(epoch):` (or one operand of an `and`) where `do_save`, a function of this
    file, starts by returning False off rank 0 (`if not is_master: return False`): TAPE's."""
    for atom in and_operands(test):
        if not isinstance(atom, ast.Call):
            continue
        for func in index.resolve_call(atom):
            for stmt in getattr(func, "body", [])[:3]:
                if (
                    isinstance(stmt, ast.If)
                    and stmt.body
                    and isinstance(stmt.body[-1], ast.Return)
                    and is_const(stmt.body[-1].value, False)
                    and (implies_rank0(stmt.test, negated=True) or _rank0_flag_off(index, stmt))
                ):
                    return True
    return False


def _rank0_flag_off(index: ModuleIndex, stmt: ast.If) -> bool:
    """`if not is_master:` where `is_master` is a rank-0 flag of the file."""
    test = stmt.test
    return (
        isinstance(test, ast.UnaryOp)
        and isinstance(test.op, ast.Not)
        and _rank0_flag(index, test.operand)
    )


def function_object(index: ModuleIndex, test: ast.AST) -> bool:
    """`if is_main_process:` where `is_main_process` is a function (of this file, or imported
    from the project): a function object is always true, so it guards nothing."""
    if not isinstance(test, ast.Name) or not rank0_name(test):
        return False
    if test.id in index.functions:
        return test.id not in index.bindings  # a def, and no assignment of that name
    if test.id not in index.from_imports or index.project is None:
        return False
    from ddpdoctor.lint.project import project_target

    return project_target(index, ast.Call(func=test, args=[], keywords=[])) is not None


def asked_before_init(index: ModuleIndex, test_holder: ast.If | ast.IfExp) -> bool:
    """`if is_main_process():` (or `get_rank() == 0`) in a function that sets the group up only
    later: before the set-up such helpers answer "rank 0" on every rank, so it guards nothing."""
    scope = index.scope_of(test_holder)
    inits = [position(i) for i in index.all_init_calls if index.scope_of(i) is scope]
    if not inits or min(inits) <= position(test_holder):
        return False  # asked first: most tests sit in functions that make no group
    return any(
        isinstance(n, ast.Call)
        and (rank0_name(n) or last_name(n.func) in ("get_rank", "get_global_rank"))
        and not _rank_from_environment(index, n)
        for n in ast.walk(test_holder.test)
    )


def _rank_from_environment(index: ModuleIndex, call: ast.Call) -> bool:
    """A helper of the project that reads the rank the launcher set in the environment
    (`get_is_master()` -> `int(os.environ["RANK"]) == 0`): right before the set-up too."""
    from ddpdoctor.lint.project import external_effects, reads_env_rank

    effects = external_effects(index, call)
    if effects is not None:
        return "env_rank" in effects
    local = list(index.resolve_call(call) or ())
    for func in list(local):  # and the file's functions it calls (`get_global_rank()`)
        local += [
            f
            for c in ast.walk(func)
            if isinstance(c, ast.Call)
            for f in index.resolve_call(c) or ()
        ]
    return any(reads_env_rank(n) for func in local for n in ast.walk(func))


def _rank0_flag(index: ModuleIndex, test: ast.AST, depth: int = 0) -> bool:
    """`if args.save_logs:` where every assignment of the flag is itself a rank-0 test
    (`args.save_logs = args.logs and is_master(args)`), or one more such flag anded with
    something (`should_log = should_write and logging` after `should_write = not
    args.distributed or args.rank == 0`); also as one operand of an `and`."""
    atoms = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for atom in atoms:
        if not isinstance(atom, (ast.Name, ast.Attribute)):
            continue
        if isinstance(atom, ast.Attribute) and atom.attr in _switched_on_rank0(index):
            return True
        values = index.values_of(dotted(atom) or "", atom)
        if not values and isinstance(atom, ast.Attribute):
            values = _flags_by_key(index).get(atom.attr, [])
        passed = index.passed_args(atom) if depth < 2 else None
        if passed and all(not isinstance(v, ast.expr) for v in values):
            # A parameter every call of this file fills with such a flag (gns: `train(...,
            # FLAGS.verbose)` after `FLAGS.verbose = dist.get_rank() == 0`).
            values = passed if all(v is not None for v in passed) else []
        if (
            values
            and all(not isinstance(v, ast.expr) for v in values)
            and depth < 2
            and isinstance(atom, ast.Name)
            and _unpacked_rank0_flag(index, atom)
        ):
            return True  # `default_gpu, n_gpu, device = set_cuda(opts)`: the helper's
        values = _without_one_process_default(index, values)
        if any(isinstance(v, ast.expr) and implies_rank0(v) for v in values):
            # `flag = rank == 0 and ...; flag |= not args.distributed`: true on rank 0, or in
            # a run of one process
            values = [v for v in values if not (isinstance(v, ast.expr) and nondistributed_test(v))]
        if values and all(
            isinstance(v, ast.expr)
            and (
                implies_rank0(v)
                or _first_spawned(index, v)
                or (depth < 2 and _rank0_flag(index, v, depth + 1))
            )
            for v in values
        ):
            return True
    return False


def _first_spawned(index: ModuleIndex, test: ast.AST) -> bool:
    """`worker_idx == 0` where `worker_idx` is the index mp.spawn hands its worker: the first
    process (Reaction-Reasoning-Network's `verbose`)."""
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.left, ast.Name)
        and is_const(test.comparators[0], 0)
        and (id(index.scope_of(test)), test.left.id) in index.spawn_index_params
    )


def _unpacked_rank0_flag(index: ModuleIndex, name: ast.Name) -> bool:
    """A flag unpacked from a set-up helper's tuple whose values in that place are rank-0
    tests there, but for a one-process default (VLN-DUET's set_cuda: `return True, 0, cpu`
    without CUDA, `default_gpu = dist.get_rank() == 0` when distributed, True otherwise)."""
    from ddpdoctor.lint.devices import unpacked_places

    places = unpacked_places(index, name)
    if not places:
        return False
    owners = {id(owner): owner for owner, _ in places}
    for key, owner in owners.items():
        values: list = []
        for other, expr in places:
            if id(other) != key:
                continue
            found = owner.values_of(expr.id, expr) if isinstance(expr, ast.Name) else []
            values += found or [expr]
        values = _without_one_process_default(owner, values)
        if not values or not all(isinstance(v, ast.expr) and implies_rank0(v) for v in values):
            return False
    return True


def _without_one_process_default(index: ModuleIndex, values: list) -> list:
    """A flag's values less a `True` it holds before a distributed branch makes it a rank test
    (`logging = True`, then `if ddp: ...; logging = dist.get_rank() == 0`, torch-harmonics):
    the True is the one-process run's, where rank 0 is all there is."""
    ranked = [
        v
        for v in values
        if isinstance(v, ast.expr) and implies_rank0(v) and distributed_branch(index, v)
    ]
    defaults = [v for v in values if is_const(v, True)]
    if not ranked or not defaults:
        return values
    first = min(position(v) for v in ranked)
    if any(position(v) > first and not single_process_branch(index, v) for v in defaults):
        return values  # switched on for everyone afterwards: not a default
    # before the rank test, or in the else of the distributed test (VLN-DUET's set_cuda)
    return [v for v in values if not is_const(v, True)]


def _none_off_rank0(index: ModuleIndex, test: ast.AST) -> bool:
    """`if wandb is not None:` (or `if wandb:`) where, in this function, the name is set to
    None and otherwise bound only under a rank-0 test (`if rank == 0: import wandb;
    wandb.init(...)` / `else: wandb = None`): it is None on every other rank. Also as one
    operand of an `and`."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_none_off_rank0(index, v) for v in test.values)
    name = none_tested(test, given=True) if isinstance(test, ast.Compare) else test
    if isinstance(name, ast.Attribute) and dotted(name) == "wandb.run":
        return _tracker_started_on_rank0(index)
    if isinstance(name, ast.Attribute):
        return _attribute_none_off_rank0(index, dotted(name))
    if not isinstance(name, ast.Name):
        return False
    scope = index.scope_of(test)
    cache: dict[tuple[int, str], bool] = index.__dict__.setdefault("_none_off_rank0", {})
    key = (id(scope), name.id)
    if key not in cache:  # the same for every test of this name in this function
        values = index.values_of(name.id, test)
        cache[key] = (
            bool(values)
            and all(isinstance(v, ast.Call) and _returns_on_rank0_only(index, v) for v in values)
        ) or _none_off_rank0_in(index, scope, name.id)  # `measures = online_eval(...)`: URCDC
    return cache[key]


def _tracker_started_on_rank0(index: ModuleIndex) -> bool:
    """`if wandb.run:` where every `wandb.init` of this file is rank 0's (AudioLLM's aligner):
    the run exists there alone, so the test passes on rank 0 only."""
    cached = index.__dict__.get("_tracker_started_on_rank0")
    if cached is None:
        starts = [c for c in index.calls_named("init") if index.qualname(c.func) == "wandb.init"]
        cached = bool(starts) and all(guarded_locally(index, c) for c in starts)
        index.__dict__["_tracker_started_on_rank0"] = cached
    return cached


def _returns_on_rank0_only(index: ModuleIndex, call: ast.Call) -> bool:
    """A function of this file whose every return of a value is rank 0's (`if not
    args.multiprocessing_distributed or gpu == 0: ... return measures`, then `return None`):
    what it hands back is None on the other ranks."""
    funcs = index.resolve_call(call)
    if not funcs:
        return False
    for func in funcs:
        values = [v for v in index.returns_of(func) if not is_const(v, None)]
        if not values or not all(guarded_locally(index, v) for v in values):
            return False
    return True


def _attribute_none_off_rank0(index: ModuleIndex, key: str | None) -> bool:
    """`if self.conf.ckpt_dir is not None:` where the file sets that attribute to None in a
    branch only the other ranks run (`if rank != 0: self.conf.ckpt_dir = None`), and sets it
    otherwise only where it already is not None, or on rank 0: it stays None on the others."""
    if key is None or "." not in key:
        return False
    cache: dict[str, bool] = index.__dict__.setdefault("_attribute_none_off_rank0", {})
    if key not in cache:
        sets = [n for n in index.assigns if any(dotted(t) == key for t in n.targets)]
        nones = [n for n in sets if is_const(n.value, None)]
        cache[key] = bool(nones) and all(
            under_off_rank0_test(index, n)
            if n in nones
            else _under_rank0_test(index, n) or _under_not_none_test(index, n, key)
            for n in sets
        )
    return cache[key]


def _under_if(index: ModuleIndex, node: ast.AST, holds: Callable[[ast.expr, bool], bool]) -> bool:
    """Inside a branch of an `if` of its own function whose test `holds` (given the test and
    whether the node is in its body rather than its else)."""
    child = node
    for anc in index.ancestors(node):
        if isinstance(anc, ast.If) and child is not anc.test and holds(anc.test, child in anc.body):
            return True
        child = anc
    return False


def under_off_rank0_test(index: ModuleIndex, node: ast.AST) -> bool:
    """Inside a branch of its own function that only the ranks other than 0 run."""
    return _under_if(
        index, node, lambda test, body: only_off_rank0(test) if body else else_off_rank0(test)
    )


def off_rank0_branch(index: ModuleIndex, node: ast.AST) -> bool:
    """Inside a branch only the other ranks run, the test a rank-0 flag's too (VLN-DUET's
    `if default_gpu: ... else: LOGGER.disabled = True`)."""
    return _under_if(
        index,
        node,
        lambda test, body: (
            only_off_rank0(test) if body else else_off_rank0(test) or _rank0_flag(index, test)
        ),
    )


def _under_not_none_test(index: ModuleIndex, node: ast.AST, key: str) -> bool:
    """Inside `if <key> is not None:` (set again only where it was not None already)."""
    return _under_if(
        index,
        node,
        lambda test, body: body and dotted(none_tested(test, given=True)) == key,
    )


def _none_off_rank0_in(index: ModuleIndex, scope: ast.AST, name: str) -> bool:
    values = [v for s, v in index.bindings.get(name, ()) if s is scope]
    nones = [v for v in values if isinstance(v, ast.Constant) and v.value is None]
    if not nones:
        return False
    others = [v for v in values if v not in nones]
    imports = [
        n
        for n in ast.walk(scope)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        and index.scope_of(n) is scope
        and any((a.asname or a.name.split(".")[0]) == name for a in n.names)
    ]
    if not (others or imports) or any(not isinstance(v, ast.AST) for v in others):
        return False
    return all(_under_rank0_test(index, n) for n in (*others, *imports))


def _under_rank0_test(index: ModuleIndex, node: ast.AST) -> bool:
    """Inside the rank-0 side of an `if` of its own function (no deeper reading)."""
    return _under_if(index, node, lambda test, body: implies_rank0(test, negated=not body))


def _switched_on_rank0(index: ModuleIndex) -> set[str]:
    """Attributes switched on (`opt.log = True`) only in the rank-0 branch of a rank test, or
    on by default and switched off on the other ranks (`self.verbose = True`, then `if gpu !=
    0: self.verbose = False`): in this file, in a helper of the project it calls (HybrIK's
    init_dist sets `opt.log` so, and its script guards every write with `if opt.log:`), or in
    the constructor of a project class a class of this file derives from (VL-T5's
    TrainerBase sets `self.verbose`)."""
    found = index.__dict__.get("_switched_on_rank0")
    if found is None:
        from ddpdoctor.lint.project import (
            RANK_FLAG,
            external_effects,
            program_effects,
            rank0_switches,
            switches_on,
        )

        # A default of any value set in a function's own body counts as one too, when the
        # other ranks switch it off (`self._use_wandb = conf.use_wandb`, then `if rank not in
        # [0, -1]: self._use_wandb = False`).
        switches = [n for n in index.assigns if switches_on(n) or _attribute_default(index, n)]
        defaults = [n for n in switches if isinstance(index.parent(n), FUNC_TYPES)]
        found = rank0_switches(index.ifs, switches, defaults)
        if index.project is not None:
            effects = set(program_effects(index))
            for cls in index.classes.values():
                for base in cls.bases:
                    made = ast.Call(func=base, args=[], keywords=[])
                    effects |= external_effects(index, made) or set()
            found |= {e[len(RANK_FLAG) :] for e in effects if e.startswith(RANK_FLAG)}
        index.__dict__["_switched_on_rank0"] = found
    return found


def _attribute_default(index: ModuleIndex, node: ast.Assign) -> bool:
    """`self.x = <anything but False>` straight in a function's body."""
    return (
        len(node.targets) == 1
        and type(node.targets[0]) is ast.Attribute
        and not (type(node.value) is ast.Constant and node.value.value is False)
        and isinstance(index.parent(node), FUNC_TYPES)
    )


def _flags_by_key(index: ModuleIndex) -> dict[str, list[ast.expr]]:
    """What each config key is assigned anywhere in the file, by the key alone, through an
    item or an attribute: FourCastNet sets `params['log_to_wandb'] = (world_rank == 0) and
    ...` in main and its Trainer tests `self.params.log_to_wandb` (a config object that reads
    items as attributes)."""
    found = index.__dict__.get("_flags_by_key")
    if found is None:
        found = index.__dict__["_flags_by_key"] = {}
        for node in index.assigns:
            for target in node.targets:
                key = target.attr if isinstance(target, ast.Attribute) else None
                if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                    key = target.slice.value if isinstance(target.slice.value, str) else None
                if key is not None:
                    found.setdefault(key, []).append(node.value)
    return found


def _after_early_exit(container: ast.AST, child: ast.AST) -> bool:
    for field in ("body", "orelse", "finalbody"):
        stmts = getattr(container, field, None)
        if isinstance(stmts, list) and child in stmts:
            return _after_early_exit_in(stmts, child)
    return False


def _after_early_exit_in(stmts: list[ast.stmt], child: ast.AST) -> bool:
    for stmt in stmts:
        if stmt is child:
            return False
        if not isinstance(stmt, ast.If):
            continue
        if exits(stmt.body) and implies_rank0(stmt.test, negated=True):
            return True  # if rank != 0: return
        if exits(stmt.orelse) and implies_rank0(stmt.test):
            return True  # if rank == 0: ... else: return
    return False


def rank0_function(func: ast.AST) -> bool:
    """A helper that only runs on rank 0 by name or decorator (`@rank_zero_only`,
    `save_on_master`, `log_if_main_process`)."""
    if not isinstance(func, FUNC_TYPES):
        return False
    if any(w in func.name.lower() for w in RANK0_WORDS):
        return True
    for dec in func.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        text = (dotted(target) or "").lower()
        if any(w in text for w in RANK0_WORDS):
            return True
    return False


def every_rank_call(index: ModuleIndex, node: ast.AST) -> ast.Call | None | bool:
    """Whether `node` runs on every rank. False: a guard keeps it on rank 0 (here or in every
    caller), or nothing in this file runs it. None: it runs unguarded in an entry point itself
    (module level, `main`, a spawned worker). A Call: the first unguarded call of the helper
    that holds it."""
    return _every_rank(index, node, set())


def _every_rank(index: ModuleIndex, node: ast.AST, seen: set[ast.AST]) -> ast.Call | None | bool:
    if guarded_locally(index, node):
        return False
    scope = index.scope_of(node)
    # With mp.spawn, only the spawned workers are ranks; the launching code runs once.
    launcher = bool(index.spawn_targets)
    if scope is index.tree:
        return False if launcher else None
    if rank0_function(scope) or scope in seen:
        return False
    seen.add(scope)
    sites = index.call_sites.get(scope, [])
    if scope in index.spawn_targets:
        return None
    if not sites:
        entry = scope in index.entry_points or scope in index.trainer_roots
        return None if entry and not launcher else False
    for site in sites:
        if _every_rank(index, site, seen) is not False:
            return site
    return False


def rank0_only(index: ModuleIndex, node: ast.AST, depth: int = 0) -> bool:
    """Run on rank 0 only: under a rank-0 guard here, or in a function whose every call in this
    file is (`valid(...)` called under `if rank == 0:`). A function never called here is not."""
    if guarded_locally(index, node):
        return True
    scope = index.scope_of(node)
    if scope is index.tree or depth > 4:
        return False
    if rank0_function(scope):
        return True
    sites = index.call_sites.get(scope, [])
    return bool(sites) and all(rank0_only(index, site, depth + 1) for site in sites)


FIRST_WORDS = ("zero_first", "main_process_first", "local_main_process_first", "rank0_first")


def rank0_goes_first(index: ModuleIndex, node: ast.AST) -> bool:
    """A call every rank makes in turn, rank 0 first, to fill a cache the others then read:
    `with torch_distributed_zero_first(rank):`, or `if rank != 0: barrier()` just before it.
    A download or a data preparation made that way is meant to run on every rank."""
    child = node
    for anc in [*index.ancestors(node), index.scope_of(node)]:
        if isinstance(anc, ast.With) and any(
            isinstance(i.context_expr, ast.Call)
            and any(w in last_name(i.context_expr.func).lower() for w in FIRST_WORDS)
            for i in anc.items
        ):
            return True
        body = getattr(anc, "body", None)
        if isinstance(body, list) and child in body:
            return any(_others_wait(stmt) for stmt in body[: body.index(child)][-2:])
        child = anc
    return False


def _others_wait(stmt: ast.stmt) -> bool:
    """`if rank != 0: dist.barrier()`: the ranks but 0 wait here."""
    return (
        isinstance(stmt, ast.If)
        and implies_rank0(stmt.test, negated=True)
        and any(
            isinstance(n, ast.Call) and last_name(n.func) == "barrier"
            for s in stmt.body
            for n in ast.walk(s)
        )
    )


def off_by_default(index: ModuleIndex, node: ast.AST) -> bool:
    """Under `if flag:` where flag is a parameter of the enclosing function that defaults to
    a false constant and no call of that function in the file passes it (`re_train=False`,
    the model always built as `Net(id, size)`): that branch never runs."""
    scope = index.scope_of(node)
    if not isinstance(scope, FUNC_TYPES):
        return False
    child = node
    for anc in index.ancestors(node):
        if (
            isinstance(anc, ast.If)
            and isinstance(anc.test, ast.Name)
            and child in anc.body
            and _false_default(scope, anc.test.id)
            and _never_passed(index, scope, anc.test)
        ):
            return True
        child = anc
    return False


def _false_default(func: ast.AST, name: str) -> bool:
    default = param_default(func, name)
    return isinstance(default, ast.Constant) and not default.value


def _never_passed(index: ModuleIndex, func: ast.AST, flag: ast.Name) -> bool:
    """Every call of the function in this file leaves the parameter to its default (and
    there is at least one; a function handed over as a value may be called with anything)."""
    name_of = getattr(func, "name", "")
    if name_of == "__init__" and (cls := index.enclosing_class(func)) is not None:
        name_of = cls.name  # `Net(...)` builds it; `Net` handed over is built elsewhere
    if index.handed_over(name_of):
        return False
    passed = index.passed_args(flag)  # None per call that leaves it out (or hides it in *args)
    sites = index.call_sites.get(func, [])
    return bool(passed) and all(p is None for p in passed) and not any(map(has_star_args, sites))
