"""More DDL004 forms, each a way every rank ends up on (or loading onto) one GPU:

- `torch.load(path)` without `map_location` in a DDP script: tensors saved from GPU 0 come back
  on GPU 0 on every rank, and memory piles up there;
- `device_ids=[0, 1]` (several GPUs per process): current torch rejects it, DDP wants one;
- a hard-coded `cuda:0` (`torch.device("cuda:0")`, `.to("cuda:0")`, `.cuda(0)`), or a bare
  `torch.device("cuda")` / `.to("cuda")` with no set_device anywhere in the program;
- the global rank used as the device (`.to(rank)`, `torch.device("cuda", rank)`);
- DDP without `device_ids` around a bare `.cuda()` model on a path that no set_device covers,
  while other paths of the same function do call it."""

from __future__ import annotations

import ast

from ddpdoctor.lint.finding import Hit
from ddpdoctor.lint.guards import (
    and_operands,
    exits,
    gpu_count_above_one,
    guarded_locally,
    off_by_default,
    rank0_only,
    single_process_branch,
)
from ddpdoctor.lint.index import (
    DDP_NAMES,
    FUNC_TYPES,
    SPAWN_CALLS,
    ModuleIndex,
    argument_for,
    dotted,
    follows_in_block,
    is_const,
    kwarg,
    last_name,
    none_tested,
    position,
    statement_block,
)
from ddpdoctor.lint.project import IN_MEMORY_WORDS, call_effects, program_effects

RANK_IN_PATH = ("rank", "gpu", "local")


def _str(expr: ast.AST | None) -> str | None:
    return expr.value if isinstance(expr, ast.Constant) and type(expr.value) is str else None


def _saves_cpu_tensors(index: ModuleIndex) -> bool:
    """A `torch.save` of tensors moved to the CPU first (`state_dict[k] = v.cpu()` in the same
    function, then `torch.save(state_dict, path)`): this module writes CPU checkpoints, so its
    own loads bring nothing onto a GPU. A `.cpu()` elsewhere in that function (images for a
    figure) says nothing of what is saved."""
    for save in index.calls_named("save"):
        if index.qualname(save.func) != "torch.save" or not save.args:
            continue
        saved = save.args[0]
        if _has_cpu_call(saved):
            return True
        key = dotted(saved)
        scope = index.scope_of(save)
        if key is None or scope is index.tree:
            continue
        for assign in ast.walk(scope):
            if not isinstance(assign, ast.Assign) or not _has_cpu_call(assign.value):
                continue
            for target in assign.targets:
                base = target.value if isinstance(target, ast.Subscript) else target
                if dotted(base) == key:
                    return True
    return False


def _has_cpu_call(expr: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "cpu"
        for n in ast.walk(expr)
    )


def _load_without_map_location(index: ModuleIndex) -> list[Hit]:
    if _one_gpu_shown_per_rank(index):
        return []  # each process sees its own GPU alone, as cuda:0: a load lands there
    hits: list[Hit] = []
    for call in index.calls_named("load"):
        if index.qualname(call.func) != "torch.load" or len(call.args) > 1:
            continue
        if kwarg(call, "map_location") is not None or any(k.arg is None for k in call.keywords):
            continue
        path = call.args[0] if call.args else kwarg(call, "f")
        if path is None or _per_rank_path(index, path):
            continue  # a per-rank file, saved from this rank's own GPU
        if guarded_locally(index, call) or single_process_branch(index, call):
            continue
        if _launcher_only(index, call) or _shadowed(index, call):
            continue  # `mp.spawn(train, ...)`, then `test(...)` in the launcher: one process
        if off_by_default(index, call):
            continue  # `if re_train: torch.load(p)` in a constructor nobody asks to re-train
        if _mapped_in_another_branch(index, call) or not _loads_state(index, call):
            continue
        if _grad_scaler_state(index, call):
            continue  # a GradScaler's state is Python numbers: nothing lands on a GPU
        if _round_trip(index, call, path):
            continue  # read back what this process saved a moment ago, from its own GPU
        if (
            _shipped_weights(index, path)
            or _loaded_loosely(index, call)
            or _named_pretrained(index, call)
        ):
            hits.append(Hit(call, "DDL004", SHIPPED_WEIGHTS, level="warn"))
            continue
        if _scheduler_state(index, call):
            hits.append(Hit(call, "DDL004", SCHEDULER_STATE, level="warn"))
            continue
        if _in_evaluation(index, call):
            hits.append(Hit(call, "DDL004", EVALUATION_LOAD, level="warn"))
            continue
        hits.append(
            Hit(
                call,
                "DDL004",
                "torch.load without map_location: every rank loads the saved tensors onto the "
                "GPU they were saved from (GPU 0), memory piles up there",
            )
        )
    if hits and _saves_cpu_tensors(index):
        return []  # asked last: it reads every function that saves
    return hits


SHIPPED_WEIGHTS = (
    "torch.load without map_location of weights this program does not save: if the file holds "
    "GPU tensors, every rank loads them onto the GPU they were saved from (GPU 0); pass "
    'map_location="cpu" (a warning: lint cannot see what the file holds)'
)
PRETRAINED_WORDS = ("pretrain", "hub/checkpoints")
SCHEDULER_STATE = (
    "torch.load without map_location of a learning-rate scheduler's state: it seldom holds GPU "
    "tensors, but any it holds land on GPU 0 on every rank; pass map_location (a warning: lint "
    "cannot see what the file holds)"
)


EVALUATION_LOAD = (
    "torch.load without map_location in an evaluation pass: run under the launcher, every rank "
    "loads the saved tensors onto the GPU they were saved from (GPU 0); pass map_location (a "
    "warning: evaluation often runs as one process)"
)
EVALUATION_WORDS = ("eval", "test", "infer", "predict")


def _in_evaluation(index: ModuleIndex, call: ast.Call) -> bool:
    """A load in a function named for evaluation (`eval_bc`, `test_model`, `inference`) that
    trains nothing: a checkpoint read to be scored, often in a run of one process."""
    scope = index.scope_of(call)
    name = getattr(scope, "name", "").lower()
    if any(name.startswith(w) for w in EVALUATION_WORDS) and scope not in {
        index.scope_of(c) for c in index.training_calls
    }:
        return True
    return _under_an_evaluation_switch(index, call)


def _under_an_evaluation_switch(index: ModuleIndex, call: ast.Call) -> bool:
    """In the body of an `if` that asks for an evaluation-only run (MeshGraphormer's
    `if args.run_eval_only == True and ...: _model = torch.load(p)`)."""
    child: ast.AST = call
    for anc in index.ancestors(call):
        if isinstance(anc, ast.If) and child in anc.body:
            for node in ast.walk(anc.test):
                word = (dotted(node) or "").rsplit(".", 1)[-1].lower()
                if isinstance(node, (ast.Name, ast.Attribute)) and (
                    word.startswith(("eval", "test")) or word.endswith(("eval_only", "_eval"))
                ):
                    return True
        child = anc
    return False


def _scheduler_state(index: ModuleIndex, call: ast.Call) -> bool:
    """`scheduler.load_state_dict(torch.load(".../scheduler.pt"))`: a scheduler's state is
    step counts and rates, seldom a tensor (an optimizer's, beside it, holds GPU moments)."""
    parent = index.parent(call)
    if (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Attribute)
        and parent.func.attr == "load_state_dict"
        and "sched" in (dotted(parent.func.value) or "").lower()
    ):
        return True
    path = call.args[0] if call.args else kwarg(call, "f")
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and "scheduler" in n.value
        for n in ast.walk(path)
    )


def _named_pretrained(index: ModuleIndex, call: ast.Call) -> bool:
    """`pretrained_dict = torch.load(path)`: the name says the weights were made elsewhere."""
    parent = index.parent(call)
    return isinstance(parent, ast.Assign) and any(
        w in (dotted(t) or "").lower() for t in parent.targets for w in PRETRAINED_WORDS
    )


def _loaded_loosely(index: ModuleIndex, call: ast.Call) -> bool:
    """`model.load_state_dict(torch.load(p), strict=False)`: weights made for another model
    (RoboFlamingo's OpenFlamingo checkpoint), not the program's own resume."""
    parent = _consumer(index, call)
    return (
        isinstance(parent, ast.Call)
        and index.callee_name(parent) == "load_state_dict"
        and is_const(kwarg(parent, "strict"), False)
    )


def _shipped_weights(index: ModuleIndex, path: ast.AST) -> bool:
    """Weights made elsewhere, whose tensors may well be on the CPU: a path that says it is
    pretrained (`pretrained_models/...`, a torch hub cache), or a fixed file name that no
    `torch.save` of this module names. The program's own checkpoints (a resume) are saved
    from its GPU model; what the file holds is all lint cannot see, so it only warns."""
    # The path, and what its name was assigned (`w = join(root, "pretrained_models", name)`).
    exprs = [path]
    if isinstance(path, ast.Name):
        exprs += [v for v in index.values_of(path.id, path) if isinstance(v, ast.expr)]
    words = [
        n.value if isinstance(n, ast.Constant) else n.id if isinstance(n, ast.Name) else n.attr
        for expr in exprs
        for n in ast.walk(expr)
        if (isinstance(n, ast.Constant) and isinstance(n.value, str))
        or isinstance(n, (ast.Name, ast.Attribute))
    ]
    if any(w in word.lower() for word in words for w in PRETRAINED_WORDS):
        return True
    name = _str(path)
    if name is None and len(exprs) == 2:  # `p = "models/prnet.pth"`, then `torch.load(p)`
        name = _str(exprs[1])
    if name is None:
        return False
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return not any(
        base in text
        for save in index.calls_named("save")
        if index.qualname(save.func) == "torch.save"
        for n in ast.walk(save)
        if (text := _str(n))
    )


def _launcher_only(index: ModuleIndex, call: ast.Call) -> bool:
    """In a function that only the launcher's own process runs: every call of it is made
    where the workers are spawned (`mp.spawn(train, ...)` and then `test(...)` under
    `__main__`), and no spawn call starts it."""
    func = index.scope_of(call)
    if not isinstance(func, FUNC_TYPES) or func in index.spawn_targets:
        return False
    sites = index.call_sites.get(func, [])
    spawners = {id(index.scope_of(c)) for c in index.calls_named(*SPAWN_CALLS)}
    return bool(sites) and all(
        id(scope := index.scope_of(site)) in spawners and scope not in index.spawn_targets
        for site in sites
    )


def _in_the_spawner(index: ModuleIndex, call: ast.Call) -> bool:
    """In the function that starts the workers (`mp.spawn(train, ...)` in `main`), and not one
    started itself: the launching process runs it once, before the workers exist. Also through
    a launcher of the project (gns's `distribute.spawn_train(train, ...)`)."""
    func = index.scope_of(call)
    if not isinstance(func, FUNC_TYPES) or func in index.spawn_targets:
        return False
    return any(
        index.callee_name(c) in SPAWN_CALLS or "spawns" in call_effects(index, c)
        for c in index.calls_by_scope.get(id(func), ())
    )


def _shadowed(index: ModuleIndex, call: ast.Call) -> bool:
    """In a top-level function that a later `def` of the same name replaces: nothing can call
    it (RepVGG's utils.py defines `load_checkpoint` twice)."""
    func = index.scope_of(call)
    if not isinstance(func, FUNC_TYPES) or func not in index.tree.body:
        return False
    later = index.tree.body[index.tree.body.index(func) + 1 :]
    return any(isinstance(n, FUNC_TYPES) and n.name == func.name for n in later)


PRIVATE_WORDS = (*IN_MEMORY_WORDS, "tmp", "temp")
PRIVATE_MAKERS = frozenset({"BytesIO", "NamedTemporaryFile", "TemporaryFile", "mkstemp"})


def _private_file(index: ModuleIndex, path: ast.AST) -> bool:
    """This process's own file: an in-memory buffer or a temporary file (by its name, or by
    what made it: `b = io.BytesIO()`), not a path other ranks may write too."""
    name = (dotted(path) or "").lower()
    if any(w in name for w in PRIVATE_WORDS):
        return True
    if not isinstance(path, ast.Name):
        return False
    values = index.values_of(path.id, path)
    return bool(values) and all(
        isinstance(v, ast.Call) and index.callee_name(v) in PRIVATE_MAKERS for v in values
    )


def _round_trip(index: ModuleIndex, load: ast.Call, path: ast.AST) -> bool:
    """A torch.save to the same private file earlier on the same path of the code
    (`torch.save(m, tmp.name)` then `torch.load(tmp.name)`, or through a BytesIO): the tensors
    come back to the GPU this rank saved them from."""
    if not _private_file(index, path):
        return False  # a shared path every rank saves to holds the last writer's GPU tensors
    where = ast.dump(path)
    for save in index.calls_by_scope.get(id(index.scope_of(load)), ()):
        if index.callee_name(save) != "save" or index.qualname(save.func) != "torch.save":
            continue
        if len(save.args) < 2 or ast.dump(save.args[1]) != where:
            continue
        # The same path: the save's block runs on to the load (not another rank's branch).
        if (block := statement_block(index, save)) and follows_in_block(index, load, *block):
            return True
    return False


# A function that resumes a run (`resume_checkpoint`, `load_ckpt`, `restore`), not one that
# builds a model from published weights (`resnet50(pretrained=True)`, `load_pretrained`):
# those are mostly saved from the CPU, and a model zoo is no resume helper.
RESUME_WORDS = ("resume", "checkpoint", "ckpt", "restore")


def _resumes(index: ModuleIndex, load: ast.AST) -> bool:
    """A load in a function named for resuming, whose path says nothing of pretraining."""
    name = getattr(index.scope_of(load), "name", "").lower()
    text = ast.unparse(load).lower()
    return any(w in name for w in RESUME_WORDS) and "pretrain" not in name + text


def _per_rank_path(index: ModuleIndex, path: ast.AST, depth: int = 0) -> bool:
    if any(w in ast.unparse(path).lower() for w in RANK_IN_PATH):
        return True
    if depth > 2:
        return False
    # The values of names the path reads, not of objects it takes an attribute of (`net.name`
    # of a `net` that DDP wraps with the local rank, laisimiao's cifar10 script).
    bases = {id(n.value) for n in ast.walk(path) if isinstance(n, ast.Attribute)}
    return any(
        isinstance(v, ast.AST) and _per_rank_path(index, v, depth + 1)
        for n in ast.walk(path)
        if isinstance(n, ast.Name) and id(n) not in bases
        for v in index.values_of(n.id, n)
    )


def _mapped_in_another_branch(index: ModuleIndex, call: ast.Call) -> bool:
    """`if args.gpu is None: torch.load(p) else: torch.load(p, map_location=loc)`: the author
    mapped the GPU case; the other branch is the CPU / single-process one. Only the other
    branch of each `if` around it counts: a mapped load in the same branch, or anywhere under
    `if __name__ == "__main__":`, says nothing of this one."""
    child: ast.AST = call
    for anc in index.ancestors(call):
        if not isinstance(anc, ast.If) or child is anc.test:
            child = anc
            continue
        other = anc.orelse if child in anc.body else anc.body
        child = anc
        for node in (n for branch in other for n in ast.walk(branch)):
            if (
                isinstance(node, ast.Call)
                and node is not call
                and index.callee_name(node) == "load"
                and kwarg(node, "map_location") is not None
            ):
                return True
    return False


# What a call that restores saved state is called: `load_state_dict`, `load_weight(s)`,
# `apply_snapshot`, `restore_checkpoint`, `load_pretrained`.
RESTORE_WORDS = ("state_dict", "weight", "snapshot", "checkpoint", "pretrain", "restore")


def _restores(index: ModuleIndex, call: ast.Call, depth: int = 0) -> bool:
    """A call that restores a module's or optimizer's state: by its name, or a function of
    this file that makes such a call (VoCo's `model = load(model, model_dict)`)."""
    name = index.callee_name(call).lower()
    if name != "load" and any(w in name for w in RESTORE_WORDS):
        return True
    return depth < 2 and any(
        _restores(index, inner, depth + 1)
        for func in index.resolve_call(call)
        for inner in index.calls_by_scope.get(id(func), ())
    )


def _grad_scaler_state(index: ModuleIndex, call: ast.Call) -> bool:
    """`scaler.load_state_dict(torch.load(p))` on a GradScaler (pi-GAN's resume)."""
    parent = _consumer(index, call)
    if not (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute)):
        return False
    if parent.func.attr != "load_state_dict":
        return False
    recv = parent.func.value
    values = index.values_of(dotted(recv) or "", recv)
    made = [v for v in values if isinstance(v, ast.Call)]
    if made:
        return all(index.callee_name(v) == "GradScaler" for v in made)
    return "scaler" in last_name(recv).lower() and "lr" not in last_name(recv).lower()


def _consumer(index: ModuleIndex, call: ast.Call) -> ast.AST | None:
    """Where the loaded value goes, past subscripts and method calls on it
    (`torch.load(p)["model"].float().state_dict()` passed to `model.load_state_dict`)."""
    node: ast.AST = call
    parent = index.parent(node)
    while True:
        if isinstance(parent, ast.Subscript) and parent.value is node:
            node = parent
        elif isinstance(parent, ast.Attribute):
            grand = index.parent(parent)
            if not (isinstance(grand, ast.Call) and grand.func is parent):
                return parent
            node = grand
        else:
            return parent
        parent = index.parent(node)


def _aliases_of(scope: ast.AST, names: set[str]) -> set[str]:
    """Names assigned from a part of these in the same function or module body (one step),
    dicts they are merged into (`model_dict.update(sd)`, then `model.load_state_dict(
    model_dict)`), and dicts filled from their items."""
    found: set[str] = set()
    if not isinstance(scope, (*FUNC_TYPES, ast.Module)):
        return found
    items = _item_names(scope, names)
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and len(node.args) == 1
            and dotted(node.args[0]) in names
            and (into := dotted(node.func.value))
        ):
            found.add(into)
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        while isinstance(value, ast.Subscript):
            value = value.value
        if isinstance(value, (ast.Name, ast.Attribute)) and dotted(value) in names:
            found |= {d for t in node.targets if (d := dotted(t))}
        elif isinstance(value, ast.Name) and value.id in items:
            # `for k, v in state.items(): kept[k] = v`: a dict filled from the loaded one
            found |= {
                d for t in node.targets if isinstance(t, ast.Subscript) and (d := dotted(t.value))
            }
    return found


def _item_names(scope: ast.AST, names: set[str]) -> set[str]:
    """The value names of `for k, v in x.items()` loops over one of these names."""
    out: set[str] = set()
    for loop in ast.walk(scope):
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)):
            continue
        func = loop.iter.func
        if not (isinstance(func, ast.Attribute) and func.attr == "items"):
            continue
        if dotted(func.value) in names and isinstance(loop.target, ast.Tuple):
            last = loop.target.elts[-1]
            if isinstance(last, ast.Name):
                out.add(last.id)
    return out


def _loads_state(index: ModuleIndex, call: ast.Call) -> bool:
    """The loaded value restores a module or optimizer (`model.load_state_dict(ckpt["model"])`,
    `net.load_weight(torch.load(p))`, `state.apply_snapshot(snapshot)`, directly or through the
    name it is stored under), or is a whole module that DDP then wraps: a checkpoint, whose
    tensors were saved from a GPU. Loading plain tensors (a table of word frequencies,
    features) is left alone."""
    parent = _consumer(index, call)
    if isinstance(parent, ast.Call) and _restores(index, parent):
        return True
    names: set[str] = set()
    if isinstance(parent, ast.Assign):
        names = {d for t in parent.targets if (d := dotted(t))}
    if not names:
        return False
    scope = index.scope_of(call)
    names |= _aliases_of(scope, names)  # `ckpt = loaded["state_dict"]`, then restored
    for restore in index.calls_by_scope.get(id(scope), ()):
        # A restore of the loaded state, or a pickled module loaded whole and then wrapped in
        # DDP (`model = torch.load(p)`, then `DDP(model, ...)`): either way GPU tensors.
        if index.callee_name(restore) in DDP_NAMES:
            given = restore.args[:1]
        elif _restores(index, restore):
            given = list(restore.args)
        else:
            continue
        for arg in ast.walk(ast.Tuple(elts=given, ctx=ast.Load())):
            if isinstance(arg, (ast.Name, ast.Attribute)) and dotted(arg) in names:
                return True
    return _reads_own_checkpoint(index, scope, names)


def _reads_own_checkpoint(index: ModuleIndex, scope: ast.AST, names: set[str]) -> bool:
    """The loaded value is read by a key of the checkpoint this file saves with a model's or
    optimizer's state in it (`state["bleu_score"]` of `torch.save({"model_state_dict": ...,
    "bleu_score": ...}, path)`): the whole checkpoint is loaded, its GPU tensors with it."""
    keys = {
        str(n.slice.value)
        for n in ast.walk(scope)
        if isinstance(n, ast.Subscript)
        and isinstance(n.slice, ast.Constant)
        and dotted(n.value) in names
    }
    if not keys:
        return False
    for save in index.calls_named("save"):
        saved = save.args[0] if save.args and index.qualname(save.func) == "torch.save" else None
        if not isinstance(saved, ast.Dict):
            continue
        own = {str(k.value) for k in saved.keys if isinstance(k, ast.Constant)}
        states = any(
            isinstance(v, ast.Call) and last_name(v.func) == "state_dict" for v in saved.values
        )
        if states and keys & own:
            return True
    return False


def _several_devices(index: ModuleIndex) -> list[Hit]:
    hits: list[Hit] = []
    for call in index.calls_named(*DDP_NAMES):
        ids = kwarg(call, "device_ids")
        if isinstance(ids, ast.Name):  # `device_ids = [0, 1]` earlier, then device_ids=ids
            values = index.values_of(ids.id, ids)
            ids = values[0] if len(values) == 1 and isinstance(values[0], ast.AST) else ids
        many = (isinstance(ids, (ast.List, ast.Tuple)) and len(ids.elts) > 1) or (
            isinstance(ids, ast.Call)
            and "range" in ast.unparse(ids)
            and not (
                ids.args and isinstance(ids.args[-1], ast.Constant) and ids.args[-1].value == 1
            )
            and not _share_per_process(ids)
        )
        if many:
            hits.append(
                Hit(
                    call,
                    "DDL004",
                    "device_ids names several GPUs: DDP takes one device per process (current "
                    "torch rejects more); start one process per GPU",
                )
            )
    return hits


def _share_per_process(ids: ast.Call) -> bool:
    """`list(range(local_rank * n, (local_rank + 1) * n))` with `n = device_count() //
    local_world_size` (the DDP tutorial's): each process's share of the node's GPUs, one GPU
    when the launcher starts a process per GPU, as it is meant to; not several by itself."""
    ranges = [
        n
        for n in ast.walk(ids)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "range"
    ]
    if len(ranges) != 1 or len(ranges[0].args) != 2:
        return False

    def factors(expr: ast.AST) -> set[str]:
        return {
            dotted(side) or ""
            for n in ast.walk(expr)
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)
            for side in (n.left, n.right)
            if isinstance(side, (ast.Name, ast.Attribute))
        } - {""}

    low, high = ranges[0].args
    return bool(factors(low) & factors(high))


def _gpu_side(expr: ast.AST) -> ast.AST:
    """`"cuda:0" if torch.cuda.is_available() else "cpu"`: the GPU side of the choice."""
    if isinstance(expr, ast.IfExp) and _str(expr.orelse) == "cpu":
        return expr.body
    return expr


def _choice_tests(call: ast.Call) -> tuple[ast.AST, ...]:
    """The test under which `torch.device("cuda:0" if ok and not args.no_cuda else "cpu")`
    picks the GPU: it holds wherever that literal is the device."""
    first = call.args[0] if call.args else None
    return (first.test,) if first is not None and _gpu_side(first) is not first else ()


def _device_literal(index: ModuleIndex, call: ast.Call) -> str | None:
    """'cuda:0' / 'cuda' when this call pins a device by a literal, else None."""
    name = index.callee_name(call)
    if name == "device" and index.qualname(call.func) == "torch.device":
        if isinstance(index.parent(call), ast.Compare):
            return None  # `if device == torch.device("cuda"):` asks which device, picks none
        text = _str(_gpu_side(call.args[0])) if call.args else None
        if text == "cuda" and len(call.args) > 1:
            return None  # torch.device("cuda", local_rank)
        return text if text in ("cuda", "cuda:0") else None
    if name == "to" and isinstance(call.func, ast.Attribute) and call.args:
        text = _str(call.args[0])
        return text if text in ("cuda", "cuda:0") else None
    if name == "cuda" and isinstance(call.func, ast.Attribute) and call.args:
        value = index.constant_value(call.args[0])  # `.cuda(0)`, or `gpu = 0; .cuda(gpu)`
        return "cuda:0" if type(value) is int and value == 0 else None
    if name == "load" and index.qualname(call.func) == "torch.load":
        text = _str(kwarg(call, "map_location"))  # `torch.load(p, map_location="cuda:0")`
        return text if text in ("cuda", "cuda:0") else None
    return None


def _hard_coded_device(index: ModuleIndex) -> list[Hit]:
    if "CUDA_VISIBLE_DEVICES" in index.strings:
        return []  # one visible GPU per process: cuda:0 is each rank's own
    has_set_device = bool(index.calls_by_name.get("set_device") or index.library_inits) or (
        "set_device" in program_effects(index)
    )
    # A bare "cuda" is each rank's own GPU once set_device ran. A module that does not set the
    # group up itself (a training loop its caller runs) cannot see whether the caller did:
    # silent there, as for a bare .cuda().
    bare_ok = has_set_device or not index.all_init_calls
    hits: list[Hit] = []
    for call in sorted(index.calls, key=position):
        text = _device_literal(index, call)
        if text is None or (text == "cuda" and bare_ok):
            continue
        if single_process_branch(index, call, _choice_tests(call)) or rank0_only(index, call):
            continue  # one process, or rank 0's own work: GPU 0 is its GPU
        if _fewer_gpus_branch(index, call):
            continue  # `if device_count() < world_size:` ranks share GPUs on purpose
        if _launcher_only(index, call) or _in_the_spawner(index, call):
            continue  # the launching process's own choice, made once (gns's `main` spawns)
        if _overridden_default(index, call):
            continue  # `def __init__(..., device=torch.device("cuda:0"))`, always handed one
        if index.callee_name(call) == "load":
            message = (
                f'torch.load with map_location="{text}": every rank loads the checkpoint onto '
                "GPU 0, memory piles up there (map to the rank's own device, or to the CPU)"
            )
        else:
            what = (
                "a hard-coded cuda:0"
                if text == "cuda:0"
                else 'torch.device("cuda") with no set_device'
            )
            message = f"{what} as the training device: every rank uses GPU 0 (use LOCAL_RANK)"
            if _in_evaluation(index, call):
                # VITS's `evaluate()`, which rank 0 alone runs where it is called at all
                message = (
                    f"{what} in an evaluation pass: right if rank 0 alone evaluates, else every "
                    "rank evaluates on GPU 0 (a warning: lint cannot tell who calls it)"
                )
                hits.append(Hit(call, "DDL004", message, level="warn"))
                continue
        hits.append(Hit(call, "DDL004", message))
    return hits


def _overridden_default(index: ModuleIndex, call: ast.Call) -> bool:
    """A parameter's default (`device: torch.device = torch.device("cuda:0")`, TAPE's runners)
    that every call of the function in this file replaces; with no call here, the callers
    elsewhere decide, and the default alone is no training device."""
    func = index.parent(call)
    while func is not None and not isinstance(func, (ast.arguments, *FUNC_TYPES)):
        func = index.parent(func)
    if not isinstance(func, ast.arguments):
        return False
    owner = index.parent(func)
    params = [*func.posonlyargs, *func.args]
    pairs = list(zip(params[len(params) - len(func.defaults) :], func.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(func.kwonlyargs, func.kw_defaults, strict=True) if d]
    name = next((a.arg for a, d in pairs if d is not None and _holds(d, call)), None)
    if name is None:
        return False
    positional = [a.arg for a in params]
    if positional[:1] in (["self"], ["cls"]):
        positional = positional[1:]
    sites = index.call_sites.get(owner, [])
    if isinstance(owner, FUNC_TYPES) and owner.name == "__init__":
        cls = index.enclosing_class(owner)
        sites = [c for c in index.calls if cls is not None and last_name(c.func) == cls.name]
    return all(argument_for(site, positional, name) is not None for site in sites)


def _holds(expr: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(expr))


def _cuda0_option_default(index: ModuleIndex) -> list[Hit]:
    """`parser.add_argument("--device", default="cuda:0")` in a DDP script whose `args.device`
    is read and never set: every rank is started with the same command line, so every rank
    trains on GPU 0 unless something rewrites the option per rank."""
    if "CUDA_VISIBLE_DEVICES" in index.strings:
        return []
    hits: list[Hit] = []
    for call in index.calls_named("add_argument"):
        default = kwarg(call, "default")
        if _str(default) != "cuda:0" or single_process_branch(index, call):
            continue
        dest = _str(kwarg(call, "dest")) or next(
            (
                t.lstrip("-").replace("-", "_")
                for a in call.args
                if (t := _str(a)) and t.startswith("--")
            ),
            None,
        )
        if not dest or "device" not in dest or dest not in index.attr_names:
            continue
        if dest.startswith(("eval", "val", "test")):
            continue  # an evaluation device: often rank 0's alone, not told here
        if any(key.endswith(f".{dest}") for key in index.bindings):
            continue  # `args.device = f"cuda:{local_rank}"`: set per rank after parsing
        if not _used_as_device(index, dest):
            continue
        hits.append(
            Hit(
                call,
                "DDL004",
                f'--{dest} defaults to "cuda:0" and is never set per rank: every rank '
                "trains on GPU 0 (use LOCAL_RANK)",
            )
        )
    return hits


DEVICE_TAKERS = ("to", "cuda", "device")


def _used_as_device(index: ModuleIndex, dest: str) -> bool:
    """`args.device` handed as a device (`.to(args.device)`, `device=args.device`), itself or
    through a name bound once (`device = args.device`, never rebound per rank)."""
    held: set[tuple[str, ast.AST]] = set()
    for node in ast.walk(index.tree):
        if not (
            isinstance(node, ast.Attribute)
            and node.attr == dest
            and isinstance(node.value, ast.Name)
            and node.value.id not in index.module_imports  # `torch.device` is no option
        ):
            continue
        parent = index.parent(node)
        if (
            isinstance(parent, ast.Call)
            and node in parent.args
            and index.qualname(parent.func) == "torch.device"
        ):
            node, parent = parent, index.parent(parent)  # `torch.device(args.device)`
        elif _takes_device(index, parent, node):
            return True
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            target, scope = parent.targets[0], index.scope_of(parent)
            once = isinstance(target, ast.Name) and [
                s for s, _ in index.bindings.get(target.id, ()) if s is scope
            ] == [scope]
            if once:
                held.add((target.id, scope))  # not rebound per rank in that function
    for node in ast.walk(index.tree):
        if (
            isinstance(node, ast.Name)
            and (node.id, index.scope_of(node)) in held
            and _takes_device(index, index.parent(node), node)
        ):
            return True
    return False


def _takes_device(index: ModuleIndex, parent: ast.AST | None, node: ast.AST) -> bool:
    if isinstance(parent, ast.keyword):
        return parent.arg == "device"
    return (
        isinstance(parent, ast.Call)
        and node in parent.args
        and index.callee_name(parent) in DEVICE_TAKERS
    )


def _fewer_gpus_branch(index: ModuleIndex, node: ast.AST) -> bool:
    """Inside an `if` that compares the GPU count with the number of processes: a deliberate
    fallback for a machine with fewer GPUs than ranks."""
    for anc in index.ancestors(node):
        if isinstance(anc, ast.If) and isinstance(anc.test, ast.Compare):
            text = ast.unparse(anc.test)
            if "device_count" in text and ("world_size" in text or "nproc" in text):
                return True
    return False


def _global_rank_moves(index: ModuleIndex) -> list[Hit]:
    from ddpdoctor.lint.devices import device_alias, device_string_rank, device_value, rank_kind

    hits: list[Hit] = []
    for call in index.calls_named("load"):
        where = kwarg(call, "map_location")
        if index.qualname(call.func) != "torch.load" or where is None:
            continue
        values = (
            [v for v in where.values if v is not None] if isinstance(where, ast.Dict) else [where]
        )
        if any(
            not device_value(index, v) and rank_kind(index, v) == {"global"} for v in values
        ):  # a `torch.device(...)` of the rank is reported where it is made
            hits.append(
                Hit(
                    call,
                    "DDL004",
                    "torch.load maps onto the GPU of the global RANK: on a second node that GPU "
                    "is not there (map to LOCAL_RANK's)",
                )
            )
    for node in index.assigns:
        # `device = "cuda:{}".format(args.local_rank)` where that holds the global rank
        # (DUSt3R-Gaussian's): reported where the device is spelled, not at each use
        index_expr = device_string_rank(node.value)
        if index_expr is not None and rank_kind(index, index_expr) == {"global"}:
            hits.append(Hit(node.value, "DDL004", GLOBAL_RANK_DEVICE))
        elif (
            len(node.targets) == 1
            and rank_kind(index, node.value) == {"global"}
            and device_alias(index, node.targets[0])
        ):
            # `device = args.rank`, then `.to(device)`: told once, where the rank becomes the
            # device (idisc)
            hits.append(Hit(node.value, "DDL004", GLOBAL_RANK_DEVICE))
    for call in index.calls_named("to", "cuda", "device"):
        is_device = index.callee_name(call) == "device"
        if is_device and index.qualname(call.func) != "torch.device":
            continue
        if not is_device and not isinstance(call.func, ast.Attribute):
            continue
        # `torch.device("cuda", rank)`, `torch.device(type="cuda", index=rank)`, `.to(rank)`
        arg = (kwarg(call, "index") if is_device else None) or (
            call.args[-1] if call.args else None
        )
        if arg is None or isinstance(arg, ast.Constant) or device_value(index, arg):
            continue  # `.to(device)` of a `torch.device(...)`: reported where that is made
        if rank_kind(index, arg) == {"global"}:
            hits.append(Hit(call, "DDL004", GLOBAL_RANK_DEVICE))
    for call in index.calls:
        # `torch.tensor(x, device=rank)`, `torch.zeros(n, device=self.rank)`
        arg = kwarg(call, "device")
        if arg is None or isinstance(arg, ast.Constant) or device_value(index, arg):
            continue
        if isinstance(arg, (ast.Name, ast.Attribute)) and rank_kind(index, arg) == {"global"}:
            hits.append(Hit(call, "DDL004", GLOBAL_RANK_DEVICE))
    return hits


GLOBAL_RANK_DEVICE = (
    "the global RANK used as a device: on a second node it names a GPU that is not there "
    "(use LOCAL_RANK)"
)


def _branches(index: ModuleIndex, node: ast.AST, split_ands: bool = False) -> set[tuple[str, bool]]:
    """(the test, in body?) for every `if` of its function that holds node. Keyed by the test's
    text, so `if args.distributed: set_device(...)` covers a later `if args.distributed:
    DDP(model)` (apex's ImageNet example), as the same `if` would. With split_ands, the body of
    `if a and b:` reads as the bodies of `if a:` and `if b:`: `if use_gpu and distributed:
    set_device(...)` covers a DDP under `if use_gpu:` then `if distributed:` (EfficientBERT's)."""
    out: set[tuple[str, bool]] = set()
    child = node
    for anc in index.ancestors(node):
        if isinstance(anc, ast.If) and child is not anc.test:
            body = child in anc.body
            tests = and_operands(anc.test) if body and split_ands else [anc.test]
            out |= {(ast.dump(t), body) for t in tests}
        child = anc
    return out


def _bare_cuda(expr: ast.AST) -> bool:
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "cuda" and not expr.args and not expr.keywords:
            return True
        expr = expr.func.value
    return False


def _may_reach(
    index: ModuleIndex, value: ast.AST, call: ast.Call, here: set[tuple[str, bool]]
) -> bool:
    """An assigned value that can still be the one a later call sees: assigned before it, on
    a path that holds the call (not in the other arm of an `if` around it)."""
    assign = index.parent(value)
    if not isinstance(assign, ast.Assign):
        return True
    if position(assign) > position(call):
        return False
    mine = _branches(index, assign)
    return not any((test, not body) in here for test, body in mine)


def _one_gpu_per_plain_process(index: ModuleIndex) -> bool:
    """`if ngpus_per_node > 1 and not args.multiprocessing_distributed: return` (PixelFormer,
    from the BTS family): a process not started per GPU refuses to run with several GPUs in
    view, so its bare `.cuda()` is the one GPU it sees."""
    for node in index.ifs:
        parts = and_operands(node.test)
        if (
            any(gpu_count_above_one(p) for p in parts)
            and any(isinstance(p, ast.UnaryOp) and isinstance(p.op, ast.Not) for p in parts)
            and exits(node.body)
        ):
            return True
    return False


def _pinned_before(index: ModuleIndex, scope: ast.AST, sets: list[ast.Call], node: ast.AST) -> bool:
    """A set_device (or a call of this scope that runs one) before the node, on every path
    that reaches it (the `if`s it sits under hold the node's too)."""
    tests = _branches(index, node, split_ands=True)
    return any(
        position(s) < position(node) and _branches(index, s, split_ands=True) <= tests for s in sets
    ) or any(
        "set_device" in call_effects(index, c)
        for c in index.calls_by_scope.get(id(scope), ())
        if position(c) < position(node) and _branches(index, c, split_ands=True) <= tests
    )


def _ddp_on_uncovered_path(index: ModuleIndex) -> list[Hit]:
    sets = index.calls_named("set_device")
    hits: list[Hit] = []
    for call in index.calls_named(*DDP_NAMES):
        if kwarg(call, "device_ids") is not None or len(call.args) > 1 or not call.args:
            continue
        scope = index.scope_of(call)
        module = call.args[0]
        here = _branches(index, call)
        moves: list[ast.AST] = [call] if _bare_cuda(module) else []
        moves += [
            v
            for v in index.values_of(dotted(module) or "", module)
            if isinstance(v, ast.AST) and _bare_cuda(v) and _may_reach(index, v, call, here)
        ]
        moves += [
            m
            for m in index.calls_named("cuda")
            if isinstance(m.func, ast.Attribute)
            and index.scope_of(m) is scope
            and dotted(m.func.value) == dotted(module)
            and not m.args
            and position(m) < position(call)
        ]
        if not moves or not sets:
            continue
        if any(index.scope_of(s) is not scope for s in sets):
            continue  # set_device elsewhere (a caller may run it first): cannot tell
        # Covered where DDP takes the model, or wherever the model goes to the GPU (ATPESC's
        # `if args.device == "gpu":` pins, and a later `if args.device == "gpu":` moves).
        moved_pinned = call not in moves and all(
            _pinned_before(index, scope, sets, m) for m in moves
        )
        if not moved_pinned and not _pinned_before(index, scope, sets, call):
            fallback = _when_no_gpu_is_given(index, call)
            hits.append(
                Hit(
                    call,
                    "DDL004",
                    "DDP without device_ids around a model moved with a bare .cuda(), on a path "
                    "no set_device covers: the process uses GPU 0 only (DDP no longer spreads "
                    "one process over several GPUs)"
                    + (FALLBACK_NOTE.format(fallback) if fallback else ""),
                    level="warn" if fallback else None,
                )
            )
    return [] if hits and _one_gpu_per_plain_process(index) else hits


FALLBACK_NOTE = (
    "; a warning: only a launch that hands no GPU index ({} is None, as under torchrun "
    "without it) takes this path; the ImageNet example's own mp.spawn launch never does"
)


def _when_no_gpu_is_given(index: ModuleIndex, node: ast.AST) -> str | None:
    """`if args.gpu is not None: ... device_ids=[args.gpu] ... else: model.cuda(); DDP(model)`:
    the else runs only when no GPU index was handed in. The name tested, or None."""
    child = node
    for anc in index.ancestors(node):
        if isinstance(anc, ast.If) and child in anc.orelse:
            tested = none_tested(anc.test, given=True)
            if tested is not None and last_name(tested).lower() in GPU_GIVEN:
                return dotted(tested)
        child = anc
    return None


GPU_GIVEN = frozenset({"gpu", "local_rank", "gpu_id", "device_id", "local_gpu"})


def check(index: ModuleIndex) -> list[Hit]:
    if index.framework_run:
        return []
    if not index.is_ddp_script:
        # A trainer module a DDP program imports: its loads run on every rank too, and so do
        # a resume helper's.
        if index.in_ddp_program:
            return _load_without_map_location(index) + _global_rank_moves(index)
        if not index.restores_in_program:
            return []
        return [h for h in _load_without_map_location(index) if _resumes(index, h.node)]
    return (
        _load_without_map_location(index)
        + _several_devices(index)
        + _hard_coded_device(index)
        + _cuda0_option_default(index)
        + _global_rank_moves(index)
        + _ddp_on_uncovered_path(index)
        + _one_visible_gpu(index)
    )


def _one_gpu_shown_per_rank(index: ModuleIndex) -> bool:
    """`os.environ["CUDA_VISIBLE_DEVICES"] = str(args.local_rank)` (scGPT's pretraining): each
    process sees only its own GPU, as cuda:0, so what was saved from cuda:0 loads onto it."""
    from ddpdoctor.lint.devices import rank_kind

    return any(
        len(a.targets) == 1
        and isinstance(a.targets[0], ast.Subscript)
        and dotted(a.targets[0].value) in ("os.environ", "environ")
        and _str(a.targets[0].slice) == "CUDA_VISIBLE_DEVICES"
        and rank_kind(index, a.value) == {"local"}
        for a in index.assigns
    )


def _one_visible_gpu(index: ModuleIndex) -> list[Hit]:
    """`os.environ["CUDA_VISIBLE_DEVICES"] = "0"` in a program that sets a group up: one
    fixed GPU for every process, so the ranks of a node share it (or ask for devices that are
    not there). A list of several, or a value made per rank, is no such pin; nor is a
    single-process branch's."""
    if not index.all_init_calls:
        return []
    hits: list[Hit] = []
    for assign in index.assigns:
        if len(assign.targets) != 1 or not isinstance(assign.targets[0], ast.Subscript):
            continue
        target = assign.targets[0]
        if (
            dotted(target.value) not in ("os.environ", "environ")
            or _str(target.slice) != "CUDA_VISIBLE_DEVICES"
        ):
            continue
        value = _str(assign.value)
        if value is None or not value.strip().isdigit():
            continue  # several GPUs, or a value we cannot read
        if single_process_branch(index, assign) or rank0_only(index, assign):
            continue
        hits.append(
            Hit(
                assign,
                "DDL004",
                f'CUDA_VISIBLE_DEVICES is set to "{value}" for every process: the ranks of a '
                "node all see that one GPU (set it per rank, or leave it to the launcher)",
            )
        )
    return hits
