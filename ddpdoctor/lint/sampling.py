"""DDL002 (a training DataLoader with no per-rank sharding in a DDP script) and DDL003 (a
shuffling DistributedSampler whose set_epoch is never called in the epoch loop). Values are
followed through assignments, `self.` attributes, `x if distributed else None` and helper
returns; whenever a value cannot be seen, the rule stays silent."""

from __future__ import annotations

import ast
import contextlib
import os
import re

from ddpdoctor.lint.files import read_bytes
from ddpdoctor.lint.finding import Hit
from ddpdoctor.lint.guards import exclusive, single_process_branch
from ddpdoctor.lint.index import (
    FUNC_TYPES,
    NO_CONSTANT,
    UNKNOWN,
    ModuleIndex,
    dotted,
    has_star_args,
    is_const,
    kwarg,
    last_name,
    position,
)

LOCAL_SAMPLERS = frozenset(
    {"RandomSampler", "SequentialSampler", "SubsetRandomSampler", "WeightedRandomSampler"}
)
SHARDING_WORDS = ("rank", "world_size", "shard", "num_replicas", "split_dataset_by_node", "node")
STREAMING_WORDS = ("iterable", "webdataset", "wds", "stream")
EVAL_PREFIXES = ("val", "test", "eval", "dev", "holdout", "infer", "predict")


def _positional(call: ast.Call, i: int) -> ast.expr | None:
    return call.args[i] if len(call.args) > i else None


def _unsharded(index: ModuleIndex, expr: ast.expr | None) -> bool:
    """True only when every value `sampler=` may hold is None or a single-process sampler."""
    if expr is None:
        return True
    origins = index.origins(expr)
    for o in origins:
        if is_const(o, None):
            continue
        if isinstance(o, ast.Call) and index.callee_name(o) in LOCAL_SAMPLERS:
            continue
        return False
    return True


def _identifiers(index: ModuleIndex, expr: ast.AST, depth: int = 0) -> set[str]:
    """Names read while building a value, following assignments a few steps back."""
    names: set[str] = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            names.add(node.id.lower())
            if depth < 3:
                for v in index.values_of(node.id, node):
                    if isinstance(v, ast.AST):
                        names |= _identifiers(index, v, depth + 1)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr.lower())
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg.lower())  # load_dataset(..., streaming=True)
        elif isinstance(node, ast.Call):
            names |= _class_bases(index, last_name(node.func))
            if depth < 3:
                for func in index.resolve_call(node):
                    for value in index.returns_of(func):
                        names |= _identifiers(index, value, depth + 1)
    return names


def _class_bases(index: ModuleIndex, name: str, depth: int = 0) -> set[str]:
    """Base-class names of a class of this file, through local parents (`IterableDataset`)."""
    cls = index.classes.get(name)
    if cls is None or depth > 4:
        return set()
    bases = {last_name(b).lower() for b in cls.bases}
    for b in cls.bases:
        bases |= _class_bases(index, last_name(b), depth + 1)
    return bases


def _shards_itself(index: ModuleIndex, dataset: ast.expr | None, depth: int = 0) -> bool:
    """An IterableDataset, a streaming dataset, or one built with the rank: already per-rank."""
    if dataset is None:
        return True
    origins = index.origins(dataset)
    if UNKNOWN in origins and _passed_in_sharded(index, dataset, depth):
        return True  # a parameter: judged by what this file's callers pass, if it shows any
    names = _identifiers(index, dataset)
    if any(w in n for n in names for w in SHARDING_WORDS + STREAMING_WORDS):
        return True
    if any(
        _passed_in_sharded(index, read, depth) for read in _path_parameter_reads(index, dataset)
    ):
        return True  # `Data(np.load(train_path))`: judged by the paths this file's callers pass
    roots = {r for o in origins if isinstance(o, ast.Call) for r in _root_calls(index, o)}
    return any(_project_helper_shards(index, r) for r in roots)


def _path_parameter_reads(index: ModuleIndex, expr: ast.AST, depth: int = 0) -> list[ast.Name]:
    """Reads of a parameter named for a file (`train_dataset_path`, `input_file`) while
    building a value, following assignments a few steps back: each rank may be handed its
    own file (`files[get_rank() % n]`, `f"train-{rank}.npy"`)."""
    out: list[ast.Name] = []
    for node in ast.walk(expr):
        if not isinstance(node, ast.Name):
            continue
        lowered = node.id.lower()
        if ("path" in lowered or "file" in lowered) and index.passed_args(node) is not None:
            out.append(node)
        elif depth < 3:
            for v in index.values_of(node.id, node):
                if isinstance(v, ast.AST):
                    out += _path_parameter_reads(index, v, depth + 1)
    return out


def _root_calls(index: ModuleIndex, call: ast.Call, depth: int = 0) -> set[ast.Call]:
    """The calls a dataset is first made by, through a chain or an iterator: for
    `next(self.shards)` after `self.shards = create_dataset(cfg)(split="train").get_data()`,
    the `create_dataset(cfg)` call (the project's helper that may cut the data per rank)."""
    if depth > 4:
        return {call}
    func = call.func
    if isinstance(func, ast.Name) and func.id in ("next", "iter") and call.args:
        inner = index.origins(call.args[0])
        found = {
            r for o in inner if isinstance(o, ast.Call) for r in _root_calls(index, o, depth + 1)
        }
        return found or {call}
    if isinstance(func, ast.Call):
        return _root_calls(index, func, depth + 1)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        return _root_calls(index, func.value, depth + 1)
    return {call}


def _passed_in_sharded(index: ModuleIndex, dataset: ast.expr, depth: int) -> bool:
    """`def train(..., train_dataset, ...)`: sharded when a caller in this file passes a dataset
    that shards itself; unknown (so silent) when nothing here calls the function."""
    if depth > 2:
        return False
    passed = index.passed_args(dataset)
    if passed is None:
        return False  # a loop variable, a with target: judged as before
    if not passed:
        return True
    return any(arg is None or _shards_itself(index, arg, depth + 1) for arg in passed)


def _project_helper_shards(index: ModuleIndex, call: ast.Call) -> bool:
    """A dataset made by a helper of the project (`data.load_data(opt, tokenizer)`) whose module
    speaks of ranks: it may cut the data per rank, which lint does not follow; silent."""
    from ddpdoctor.lint.project import callee_ref

    project, ref = index.project, callee_ref(call)
    if project is None or index.path is None or ref is None:
        return False
    head, _, rest = (ref[1] if ref[0] == "attr" else ref[1]).partition(".")
    if head in index.module_imports and ref[0] == "attr":
        module, level = ".".join(p for p in (index.module_imports[head], rest) if p), 0
    elif head in index.from_imports:
        base, level, name = index.from_imports[head]
        module = ".".join(p for p in (base, name if ref[0] == "attr" else "", rest) if p)
    else:
        return False
    path = project.module_path(index.path, module, level)
    defined = ref[1].rsplit(".", 1)[-1] if ref[0] == "attr" else index.from_imports[head][2]
    return _speaks_of_ranks(path, defined)


RANK_WORDS = (b"get_rank", b"world_size", b"global_rank", b"num_replicas")


def _speaks_of_ranks(path: str | None, name: str) -> bool:
    """The helper's own code names a rank, or code it names (its base class, the class it
    returns) does, in its module or a sibling the module star-imports (a package `__init__`
    with `from .dataset import *`). A module that speaks of ranks elsewhere (a sampler helper
    beside a plain dataset class) does not make the dataset per-rank. A helper whose code is
    not found (re-exported further, or a module that does not parse) is judged by its whole
    module's text, as before."""
    try:
        data = read_bytes(path) if path else b""
    except OSError:
        return False
    texts, blocks = [data], {}
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        tree = None
    stars = [
        node.module
        for node in (tree.body if tree else [])
        if isinstance(node, ast.ImportFrom)
        and node.level == 1
        and node.module
        and any(a.name == "*" for a in node.names)
    ]
    for module in stars:
        sibling = os.path.join(os.path.dirname(path or ""), *module.split(".")) + ".py"
        with contextlib.suppress(OSError, SyntaxError, ValueError):
            text = read_bytes(sibling)
            texts.append(text)
            _add_blocks(blocks, ast.parse(text), text)
    if tree is not None:
        _add_blocks(blocks, tree, data)
    if name not in blocks:
        return any(w in t for t in texts for w in RANK_WORDS)
    named = {n.id for n in ast.walk(blocks[name][0]) if isinstance(n, ast.Name)}
    return any(_names_a_rank(*blocks[n]) for n in named | {name} if n in blocks)


def _add_blocks(blocks: dict[str, tuple[ast.AST, bytes]], tree: ast.Module, text: bytes) -> None:
    """Each top-level function and class of a module, by name, with its module's text; the
    module's own definitions win over those of the siblings it star-imports."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            blocks[node.name] = (node, text)


def _names_a_rank(node: ast.AST, text: bytes) -> bool:
    lines = text.splitlines()[node.lineno - 1 : node.end_lineno]  # type: ignore[attr-defined]
    return any(w in line for line in lines for w in RANK_WORDS)


def _loader_name(index: ModuleIndex, call: ast.Call) -> str:
    """The name a DataLoader is stored under (`train_loader`, `self.val_dl`) or the helper that
    returns it (`get_train_loader`)."""
    p = index.parent(call)
    if isinstance(p, ast.Assign | ast.AnnAssign):
        targets = p.targets if isinstance(p, ast.Assign) else [p.target]
        return " ".join(dotted(t) or "" for t in targets).lower()
    if isinstance(p, ast.Return):
        scope = index.scope_of(call)
        return getattr(scope, "name", "").lower()
    return ""


def _name_words(index: ModuleIndex, call: ast.Call) -> list[str]:
    """The words of the name a loader is kept under: `self.dl_train` -> self, dl, train."""
    return [w for w in re.split(r"[^a-z0-9]+", _loader_name(index, call)) if w]


def _is_training_loader(index: ModuleIndex, call: ast.Call) -> bool:
    """Named for training (`train_loader`, `self.dl_train`) or shuffling, and not named for
    evaluation. Names are compared word by word: `constrained` is not `train`."""
    words = _name_words(index, call)
    if any(w.startswith(EVAL_PREFIXES) and w != "device" for w in words):
        return False
    if any(w.startswith("train") for w in words):
        return True
    if is_const(kwarg(call, "shuffle"), True) and not _only_looked_at(index, call):
        return True
    return _trained_on(index, call)


def _trained_on(index: ModuleIndex, call: ast.Call) -> bool:
    """A loader by another name (`labeled_loader`), bound once, that a loop of the same
    function which runs backward iterates, directly or through a wrapper bound in between
    (`bar = tqdm(labeled_loader)`; `for x in enumerate(bar)`): what that loop trains on."""
    p = index.parent(call)
    if not (isinstance(p, ast.Assign) and len(p.targets) == 1):
        return False
    name = dotted(p.targets[0])
    scope = index.scope_of(call)
    if name is None or index.values_of(name, call) != [call]:
        return False  # rebound (a rank-0 preprocessing loader, then the sharded one)
    names = {name}
    for assign in index.assigns:
        value = assign.value
        if (
            index.scope_of(assign) is scope
            and isinstance(value, ast.Call)
            and any(dotted(a) == name for a in value.args)
            and len(assign.targets) == 1
            and (wrapper := dotted(assign.targets[0]))
        ):
            names.add(wrapper)
    return any(
        isinstance(loop, (ast.For, ast.AsyncFor))
        and id(loop) in index.training_loops
        and index.scope_of(loop) is scope
        and any(dotted(n) in names for n in ast.walk(loop.iter))
        for loop in index.loops
    )


def _beside_a_sharded_training_loader(index: ModuleIndex, call: ast.Call) -> bool:
    """A loader built per item of a loop (one per head or task) in a function that, outside
    that loop, builds its training loader over a DistributedSampler (MACE's `train_loader`,
    after the per-head `train_loader_head` copies it keeps for evaluation): the program's
    training data is sharded, and these are not what it trains on."""
    loops = index.enclosing_loops(call)
    if not loops:
        return False
    scope = index.scope_of(call)
    for other in index.calls_named("DataLoader"):
        if other is call or index.scope_of(other) is not scope:
            continue
        if any(loop in index.enclosing_loops(other) for loop in loops):
            continue
        sampler = kwarg(other, "sampler") or _positional(other, 3)
        if sampler is None or _unsharded(index, sampler):
            continue
        if any(w.startswith("train") for w in _name_words(index, other)):
            return True
    return False


def _only_looked_at(index: ModuleIndex, call: ast.Call) -> bool:
    """A shuffling loader whose name is iterated only by loops that train nothing (a sanity
    check that plots a few batches): not the training loader."""
    p = index.parent(call)
    if not (isinstance(p, ast.Assign) and len(p.targets) == 1):
        return False
    name = dotted(p.targets[0])
    training = index.training_loops
    loops = [
        loop
        for loop in index.loops
        if isinstance(loop, (ast.For, ast.AsyncFor))
        and any(dotted(n) == name for n in ast.walk(loop.iter))
    ]
    return bool(loops) and not any(id(loop) in training for loop in loops)


def check_missing_sampler(index: ModuleIndex) -> list[Hit]:
    """DDL002, in a DDP script or in a training loop a DDP program imports (not a test's
    helper: tests feed every rank the same batches on purpose, to compare the ranks)."""
    if not (index.is_ddp_script or index.in_ddp_program) or index.framework_loads:
        return []
    if index.in_ddp_program and _test_code(index.path or ""):
        return []
    hits: list[Hit] = []
    for call in index.calls_named("DataLoader"):
        if has_star_args(call):
            continue  # DataLoader(ds, **loader_kwargs): the sampler may be in there
        # DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, ...)
        sampler = kwarg(call, "sampler") or _positional(call, 3)
        batch_sampler = kwarg(call, "batch_sampler") or _positional(call, 4)
        if not (_unsharded(index, sampler) and _unsharded(index, batch_sampler)):
            continue
        dataset = kwarg(call, "dataset") or (call.args[0] if call.args else None)
        if _shards_itself(index, dataset) or not _is_training_loader(index, call):
            continue
        if is_const(kwarg(call, "batch_size") or _positional(call, 1), None):
            continue  # `batch_size=None`: the dataset yields whole batches, and its pipeline
            # splits the data by rank itself (wenet's and webdataset's IterableDatasets)
        if single_process_branch(index, call):
            continue  # `if opt["dist"]: ... else: DataLoader(ds, shuffle=True)`: one process
        if _beside_a_sharded_training_loader(index, call):
            continue
        hits.append(
            Hit(
                call,
                "DDL002",
                "DataLoader has no DistributedSampler: every rank trains on the same batches",
            )
        )
    return hits


def _test_code(path: str) -> bool:
    """A module of a test suite: in a tests/ or test/ folder, or named test_*.py, *_test.py,
    *test_utils*.py."""
    folder, name = os.path.split(path)
    return (
        os.path.basename(folder) in ("test", "tests")
        or name.startswith("test_")
        or name.endswith("_test.py")
        or "test_utils" in name
    )


def _shuffles(call: ast.Call) -> bool:
    """Shuffles unless told `shuffle=False`: the default is True, and a flag we cannot read
    (`shuffle=args.shuffle`) is not False."""
    if has_star_args(call):
        return False
    shuffle = kwarg(call, "shuffle")
    if shuffle is None:
        shuffle = _positional(call, 3)  # DistributedSampler(ds, num_replicas, rank, shuffle)
    return not is_const(shuffle, False) if shuffle is not None else True


def _eval_name(name: str) -> bool:
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    return any(w.startswith(EVAL_PREFIXES) and w != "device" for w in words)


def _for_evaluation(index: ModuleIndex, sampler: ast.Call) -> bool:
    """A validation or test sampler (named so, or feeding a loader named so): its order does
    not matter, as DDL002 already assumes."""
    p = index.parent(sampler)
    while isinstance(p, ast.IfExp):
        p = index.parent(p)
    if isinstance(p, ast.Assign | ast.AnnAssign):
        targets = p.targets if isinstance(p, ast.Assign) else [p.target]
        if any(_eval_name(dotted(t) or "") for t in targets):
            return True
    for loader in index.calls_named("DataLoader"):
        feeds = sampler in index.origins(kwarg(loader, "sampler") or _positional(loader, 3))
        if feeds and _eval_name(_loader_name(index, loader)):
            return True
    return False


def _loop_called(index: ModuleIndex) -> set[ast.AST]:
    """Functions run from inside a loop, directly or through other functions."""
    found: set[ast.AST] = set()
    changed = True
    while changed:
        changed = False
        for call in index.calls:
            funcs = index.resolve_call(call)
            if not funcs or all(f in found for f in funcs):
                continue
            if index.in_loop(call) or index.scope_of(call) in found:
                found.update(funcs)
                changed = True
    return found


def _counts_as_per_epoch(index: ModuleIndex, call: ast.Call, loop_called: set[ast.AST]) -> bool:
    """set_epoch inside a loop, or in a function a loop runs, or in a loop-free function this
    file never calls (its caller, elsewhere, may well loop), or in a lambda handed to a call
    (ignite's `add_event_handler(Events.EPOCH_STARTED, lambda e: sampler.set_epoch(...))`:
    the engine runs it each epoch)."""
    if index.in_loop(call):
        return True
    for anc in index.ancestors(call):
        if isinstance(anc, ast.Lambda):
            return isinstance(index.parent(anc), ast.Call)
    scope = index.scope_of(call)
    if not isinstance(scope, FUNC_TYPES):
        return False
    if scope in loop_called:
        return True
    if scope in index.call_sites:
        return False
    # `def train_one_epoch(self, epoch): loader.sampler.set_epoch(epoch); for batch in ...`:
    # handed the epoch by a caller elsewhere, which loops over epochs.
    params = {a.arg for a in [*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs]}
    if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id in params:
        return True
    # `def train_epoch(self): self.train_sampler.set_epoch(self.epoch)` (a trainer whose base
    # class runs the epochs and counts them on the object): once per epoch.
    first = dotted(call.args[0]) if call.args else None
    if first and first.startswith("self.") and "epoch" in first.lower():
        return True
    return not any(index.scope_of(loop) is scope for loop in index.loops)


def _never_moves(index: ModuleIndex, call: ast.Call) -> bool:
    """`set_epoch(step)` where `step = 0` is all the name ever holds: every epoch gets the same
    seed, as if set_epoch were not called."""
    arg = call.args[0] if call.args else kwarg(call, "epoch")
    return arg is not None and index.constant_value(arg) is not NO_CONSTANT


def _may_target(index: ModuleIndex, call: ast.Call, sampler: ast.Call) -> bool:
    """Whether `X.set_epoch()` may act on `sampler`: yes through any `loader.sampler`, or a
    value we cannot trace; no when X is provably another object."""
    recv = call.func.value if isinstance(call.func, ast.Attribute) else None
    if recv is None:
        return True
    if isinstance(recv, ast.Attribute) and recv.attr == "dataset":
        return False  # `loader.dataset.set_epoch(epoch)`: the dataset's own, not the sampler's
    if isinstance(recv, ast.Attribute) and recv.attr in ("sampler", "batch_sampler"):
        for loader in index.origins(recv.value):
            if not (isinstance(loader, ast.Call) and index.callee_name(loader) == "DataLoader"):
                return True  # a loader we cannot see into
            origins = index.origins(kwarg(loader, recv.attr))
            if UNKNOWN in origins or sampler in origins:
                return True
        return False
    origins = index.origins(recv)
    return UNKNOWN in origins or sampler in origins


def _fed_to_loaders(index: ModuleIndex) -> dict[ast.AST, list[ast.Call]]:
    """DistributedSamplers some DataLoader reads (`sampler=`, or inside a `batch_sampler=`),
    each with the loaders that read it."""
    fed: dict[ast.AST, list[ast.Call]] = {}
    # A loader class of the project or a library built on DataLoader (`DataLoaderMasking`,
    # PyG's DataLoader under another name) is told by its name and its `sampler=`.
    own = [n for n in index.calls_by_name if n != "DataLoader" and "DataLoader" in n]
    for loader in index.calls_named("DataLoader", *own):
        if index.callee_name(loader) != "DataLoader" and kwarg(loader, "sampler") is None:
            continue
        origins = set(index.origins(kwarg(loader, "sampler") or _positional(loader, 3)))
        for origin in index.origins(kwarg(loader, "batch_sampler") or _positional(loader, 4)):
            origins.add(origin)  # a batch sampler built on DistributedSampler (see above)
            if isinstance(origin, ast.Call):
                inner = kwarg(origin, "sampler") or (origin.args[0] if origin.args else None)
                origins |= index.origins(inner)
        for origin in origins:
            fed.setdefault(origin, []).append(loader)
    return fed


def _loader_places(
    index: ModuleIndex, sampler: ast.Call, loaders: list[ast.Call]
) -> tuple[tuple[str | None, int, str], ...]:
    """The DataLoaders a sampler feeds, and where a function of the file that returns one
    hands the training loader over (`train_dataloader = make_data_loader(...)`), as places of
    the same mistake: a reader, or a judge, may name the loader rather than the sampler. The
    sampler's own line is not repeated (a sampler built in the loader's call)."""
    places: dict[int, str] = {}
    for loader in loaders:
        places.setdefault(loader.lineno, "the DataLoader this sampler feeds")
        for site in _received_at(index, loader):
            places.setdefault(site.lineno, "where the training loader is got")
    places.pop(sampler.lineno, None)
    return tuple((None, line, note) for line, note in sorted(places.items()))


def _received_at(index: ModuleIndex, loader: ast.Call) -> list[ast.Call]:
    """The calls of the function that builds and returns this loader, bound to a training
    loader's name (not `val_loader = make_loader(...)`)."""
    func = index.scope_of(loader)
    if not isinstance(func, FUNC_TYPES):
        return []
    parent = index.parent(loader)
    names = {dotted(t) for t in parent.targets} if isinstance(parent, ast.Assign) else set()
    returned = any(
        index.scope_of(ret) is func
        and ret.value is not None
        and (ret.value is loader or dotted(ret.value) in names - {None})
        for ret in index.returns
    )
    if not returned:
        return []
    sites = []
    for site in index.call_sites.get(func, []):
        bound = index.parent(site)
        if not (isinstance(bound, ast.Assign) and bound.value is site):
            continue
        got = [n for t in bound.targets if (n := dotted(t))]
        if got and not any(_eval_name(n) for n in got):
            sites.append(site)
    return sites


def _trains_here(index: ModuleIndex) -> bool:
    """The file runs backward, or has a loop over epochs."""
    if index.calls_by_name.get("backward"):
        return True
    for loop in index.loops:
        target = getattr(loop, "target", None)
        if target is not None and any("epoch" in n.id.lower() for n in _names(target)):
            return True
    return False


def _names(expr: ast.AST) -> list[ast.Name]:
    return [n for n in ast.walk(expr) if isinstance(n, ast.Name)]


def _helper_samplers(index: ModuleIndex) -> list[Hit]:
    """DDL003 across files: the training loader comes from a helper of the project that builds
    a shuffling DistributedSampler (`train_loader, _ = get_loader(args)`), and neither this file
    nor any project function it calls ever calls set_epoch. Reported where the loader is got.
    When the epoch loop is in another module (`Solver(loader).train()`), only a project that
    never mentions set_epoch at all is reported."""
    from ddpdoctor.lint.project import external_effects, program_effects, project_target

    project = index.project
    calls = index.calls_by_name.get("set_epoch", ())
    moving = [c for c in calls if not _never_moves(index, c)]
    if project is None or index.framework_run:
        return []  # Accelerate's prepared loaders set their sampler's epoch themselves
    if not calls and "set_epoch" in index.attr_names:
        return []  # handed over (`hooks.append(sampler.set_epoch)`), not called here
    effects = program_effects(index)
    if "dist_sampler" not in effects or "set_epoch" in effects:
        return []
    if not (_trains_here(index) or not project.mentions_set_epoch()):
        return []  # the loop is elsewhere (a Solver's train()), and may set the epoch there
    getters: list[ast.Call] = []
    helpers: dict[int, tuple[str, str]] = {}  # id(getter) -> (module path, function name)
    for call in sorted(index.calls, key=position):
        if index.resolve_call(call) or "dist_sampler" not in (external_effects(index, call) or ()):
            continue
        if _for_evaluation(index, call) or is_const(kwarg(call, "shuffle"), False):
            continue  # `cv_loader = distrib.loader(cv_set)`: the validation loader
        found = project_target(index, call)
        try:
            if found is None or b"set_epoch" in read_bytes(found[0].path):
                continue  # a loader class of the helper's may set the epoch itself
        except OSError:
            continue
        getters.append(call)
        helpers[id(call)] = found[0].path, found[1]
    if not getters:
        return []
    if moving:
        return _forgotten_siblings(index, getters, moving)
    # The first loader got where the group is set up (the single-process path beside it,
    # `train()` next to `train_distributed()`, builds no DistributedSampler), else the first.
    setting_up = {id(index.scope_of(c)) for c in index.all_init_calls}
    call = next((c for c in getters if id(index.scope_of(c)) in setting_up), getters[0])
    return [
        Hit(
            call,
            "DDL003",
            f"the loader from {dotted(call.func) or 'a helper'}() has a shuffling "
            f"DistributedSampler, but {_stuck_note(index) or 'set_epoch(epoch) is never called'}: "
            "every epoch uses the same order",
            _sampler_place(*helpers[id(call)]),
        )
    ]


def _sampler_place(path: str, name: str) -> tuple[tuple[str | None, int, str], ...]:
    """Where the helper itself builds its DistributedSampler (not one more call away), as the
    other place of the mistake. Read only for a finding: parsing the helper again is rare."""
    try:
        tree = ast.parse(read_bytes(path), filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    for node in tree.body:
        if isinstance(node, (*FUNC_TYPES, ast.ClassDef)) and node.name == name:
            calls = [
                c
                for c in ast.walk(node)
                if isinstance(c, ast.Call) and last_name(c.func) == "DistributedSampler"
            ]
            if calls:
                first = min(calls, key=position)
                return ((path, first.lineno, f"the DistributedSampler {name}() builds"),)
            return ()
    return ()


def _forgotten_siblings(
    index: ModuleIndex, getters: list[ast.Call], set_epochs: list[ast.Call]
) -> list[Hit]:
    """Loaders got from a helper when the file sets the epoch of another one's sampler only
    (`loader, sampler = get_train_loader(...)` twice, labelled and unlabelled data, and
    `sampler.set_epoch(epoch)` for the first): the second keeps one order for every epoch."""
    targets = {_set_epoch_receiver(c) for c in set_epochs}
    bound = {id(g): _loader_names(index, g) for g in getters}
    served = [g for g in getters if bound[id(g)] & targets]
    if not served:
        return []  # the epoch is set through a name we cannot tie to one of them
    first = served[0]
    return [
        Hit(
            g,
            "DDL003",
            f"the loader from {dotted(g.func) or 'a helper'}() has a shuffling "
            f"DistributedSampler, but set_epoch(epoch) is called only for the loader of line "
            f"{first.lineno}: every epoch uses the same order",
        )
        for g in getters
        if bound[id(g)]
        and not bound[id(g)] & targets
        # the other arm of `if args.multi_GPU:` (RNGDet++): the one-process run's loader
        and not exclusive(index, g, first)
    ]


def _set_epoch_receiver(call: ast.Call) -> str:
    """`train_sampler` for `train_sampler.set_epoch(e)`, `loader` for
    `loader.sampler.set_epoch(e)`."""
    recv = call.func.value if isinstance(call.func, ast.Attribute) else None
    if isinstance(recv, ast.Attribute) and recv.attr in ("sampler", "batch_sampler"):
        recv = recv.value
    return (dotted(recv) if recv is not None else "") or ""


def _loader_names(index: ModuleIndex, call: ast.Call) -> set[str]:
    """The names a plain assignment of the call binds (`loader, sampler = get(...)`), when
    they are a training loader's: one names a loader or sampler (not `results =
    test.test(...)`), none evaluation's. Empty otherwise."""
    parent = index.parent(call)
    if not isinstance(parent, ast.Assign) or parent.value is not call:
        return set()
    names = {
        name
        for target in parent.targets
        for t in (target.elts if isinstance(target, ast.Tuple) else [target])
        if (name := dotted(t))
    }
    if any(_eval_name(n) for n in names):
        return set()
    return names if any(w in n.lower() for n in names for w in ("loader", "sampler")) else set()


# What a sampler that draws a new order says (torch's DistributedSampler: a seeded randperm).
ORDER_WORDS = (b"randperm", b"permutation", b".shuffle(", b"random.")


def _own_fixed_order(index: ModuleIndex, call: ast.Call) -> bool:
    """The project's own class named DistributedSampler (this file's, or imported from a module
    of the project) that never draws a random order: TTS's "non shuffling" sampler needs no
    set_epoch."""
    from ddpdoctor.lint.project import project_target

    local = index.resolve_call(call)
    if local:
        cls = index.enclosing_class(local[0])
        text = ast.unparse(cls).encode() if cls is not None else b""
    elif (found := project_target(index, call)) is not None:
        try:
            text = read_bytes(found[0].path)
        except OSError:
            return False
    else:
        return False
    return not any(w in text for w in ORDER_WORDS)


def check_set_epoch(index: ModuleIndex) -> list[Hit]:
    """DDL003. Only samplers a DataLoader reads: one built to test or inspect is no bug."""
    subclassed = _epoch_seeded_samplers(index)
    if not index.calls_by_name.get("DistributedSampler") and not subclassed:
        return _helper_samplers(index)
    samplers = [
        c
        for c in index.calls_named("DistributedSampler")
        if _shuffles(c) and not _own_fixed_order(index, c)
    ]
    samplers = sorted([*samplers, *subclassed], key=position)
    if samplers:
        fed = _fed_to_loaders(index)
        samplers = [s for s in samplers if s in fed and not _for_evaluation(index, s)]
    if not samplers:
        return []
    handed: dict[ast.AST, ast.Call] = {}
    if not _trains_here(index):
        # A data module: the epoch loop (and its set_epoch) live elsewhere. Unless this is the
        # program that sets the group up and hands the loader to the project's own trainer
        # (`LearningMethod(net).train(train_loader)`), and no file of the project ever says
        # set_epoch: then nobody reseeds the sampler.
        handed = _handed_to_project_trainer(index, samplers, fed)
        samplers = [s for s in samplers if s in handed]
        if not samplers:
            return []
    loop_called = _loop_called(index)
    if _single_pass(index, loop_called):
        return []  # one pass over the loader: there is no second epoch to reshuffle for
    per_epoch = [
        c
        for c in index.calls_named("set_epoch")
        if _counts_as_per_epoch(index, c, loop_called) and not _never_moves(index, c)
    ]
    stuck = _stuck_note(index)
    hits: list[Hit] = []
    for sampler in samplers:
        if any(_may_target(index, c, sampler) for c in per_epoch):
            continue
        if sampler in handed:
            why = (
                f"no file of the project calls set_epoch, and the loader goes to "
                f"{dotted(handed[sampler].func) or 'the trainer'}() for its epochs"
            )
        else:
            why = stuck or "set_epoch(epoch) is never called in the epoch loop"
        name = index.callee_name(sampler)
        label = name if name == "DistributedSampler" else f"{name} (a DistributedSampler)"
        hits.append(
            Hit(
                sampler,
                "DDL003",
                f"{label} shuffles, but {why}: every epoch uses the same order",
                _loader_places(index, sampler, fed.get(sampler, [])),
            )
        )
    return hits


def _epoch_seeded_samplers(index: ModuleIndex) -> list[ast.Call]:
    """Calls of a sampler class of the project (or of this file) built on DistributedSampler
    that draws its order from `self.epoch` (VITS's DistributedBucketSampler, a batch sampler):
    it owes set_epoch as torch's does. Told `shuffle=False`, it does not shuffle."""
    out: list[ast.Call] = []
    for name, calls in index.calls_by_name.items():
        if name == "DistributedSampler" or "sampler" not in name.lower():
            continue  # a sampler class says so in its name (a cheap test, asked per call name)
        if _epoch_seeded_class(index, calls[0], name):
            out += [
                c
                for c in calls
                if not is_const(kwarg(c, "shuffle"), False) and not _given_epoch(index, c)
            ]
    return out


def _given_epoch(index: ModuleIndex, sampler: ast.Call) -> bool:
    """A method of the sampler called with the epoch (`with sampler.in_epoch(epoch):`, an
    interruptible sampler's own setter): such a class has its own way to be told the epoch."""
    for call in index.calls:
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr == "set_epoch":
            continue  # set_epoch is judged as for torch's sampler
        args = [*call.args, *(k.value for k in call.keywords)]
        if any("epoch" in ast.unparse(a).lower() for a in args) and sampler in index.origins(
            func.value
        ):
            return True
    return False


def _epoch_seeded_class(index: ModuleIndex, call: ast.Call, name: str) -> bool:
    local = index.classes.get(name)
    if local is not None:
        return "distributedsampler" in _class_bases(index, name) and "self.epoch" in ast.unparse(
            local
        )
    from ddpdoctor.lint.project import callee_module

    path = callee_module(index, call)
    try:
        text = read_bytes(path) if path is not None else b""
    except OSError:
        return False
    header = re.search(rb"(?m)^class\s+" + re.escape(name.encode()) + rb"\s*\(([^)]*)\)", text)
    if header is None or b"DistributedSampler" not in header.group(1):
        return False
    body = text[header.end() :]
    end = re.search(rb"(?m)^(?:class|def)\s", body)
    return b"self.epoch" in (body[: end.start()] if end else body)


# What a file that trains through a trainer it hands the loader builds first.
OPTIMIZERS = frozenset({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LAMB", "Lamb", "LARS"})


def _handed_to_project_trainer(
    index: ModuleIndex, samplers: list[ast.Call], fed: dict[ast.AST, list[ast.Call]]
) -> dict[ast.AST, ast.Call]:
    """Each sampler whose loader this file hands to a function or an object of the project
    (`trainer.train(train_loader)` after `trainer = Trainer(...)` from the project's package),
    in a file that sets the group up and builds an optimizer (it trains, not evaluates), when
    no file of the project says set_epoch and no framework runs the loop."""
    project = index.project
    if (
        project is None
        or index.framework_loads
        or not index.all_init_calls
        or not any(index.calls_by_name.get(name) for name in OPTIMIZERS)
        or project.mentions_set_epoch()
    ):
        return {}
    out: dict[ast.AST, ast.Call] = {}
    for sampler in samplers:
        names = {
            dotted(t)
            for loader in fed.get(sampler, [])
            if isinstance(parent := index.parent(loader), ast.Assign) and parent.value is loader
            for t in parent.targets
        } - {None}
        for call in index.calls:
            args = [*call.args, *(k.value for k in call.keywords)]
            if not any(dotted(a) in names for a in args):
                continue
            recv = call.func.value if isinstance(call.func, ast.Attribute) else None
            made = [o for o in index.origins(recv) if isinstance(o, ast.Call)] if recv else []
            if any(_project_callee(index, c) for c in (call, *made)):
                if not any(_library_engine(index, c) for c in (call, *made)):
                    out[sampler] = call
                break
    return out


def _library_engine(index: ModuleIndex, call: ast.Call, depth: int = 0) -> bool:
    """The callee is a class of the project built on a library's base (fredzzhang's engine on
    pocket's DistributedLearningEngine): the base runs the epochs, and may set them."""
    from ddpdoctor.lint.project import callee_module

    path = callee_module(index, call)
    module = index.project.index_of(path) if index.project and path else None
    name = last_name(call.func)
    cls = module.classes.get(name) if module is not None else None
    if module is None or cls is None or depth > 3:
        return False
    for base in cls.bases:
        head = base
        while isinstance(head, ast.Attribute):
            head = head.value
        if not isinstance(head, ast.Name):
            continue
        spec = module.from_imports.get(head.id)
        origin = spec[0] if spec else module.module_imports.get(head.id, "")
        if callee_module(module, ast.Call(func=base, args=[], keywords=[])) is not None:
            if _library_engine(module, ast.Call(func=base, args=[], keywords=[]), depth + 1):
                return True
        elif origin and (spec is None or spec[1] == 0) and origin.split(".")[0] != "torch":
            return True
    return False


def _project_callee(index: ModuleIndex, call: ast.Call) -> bool:
    """Whether the callee is imported from a module of the project (`from model import
    LearningMethod`, `from neuralop import Trainer`): its text decides, not its effects."""
    from ddpdoctor.lint.project import callee_module

    return callee_module(index, call) is not None


def _single_pass(index: ModuleIndex, loop_called: set[ast.AST]) -> bool:
    """Every backward runs in one `for` over a DataLoader and in no outer loop: at module level,
    or in a function this file calls only outside loops (a tutorial's one pass over the data).
    A loop that draws batches with next() or rebuilds the iterator is no single pass."""
    backs = index.calls_by_name.get("backward", [])
    if not backs:
        return False
    for call in backs:
        loops = index.enclosing_loops(call)
        if len(loops) != 1 or not isinstance(loops[0], ast.For):
            return False
        if not _over_a_loader(index, loops[0].iter):
            return False
        scope = index.scope_of(call)
        if isinstance(scope, ast.Module):
            continue
        sites = index.call_sites.get(scope, [])
        if not sites or scope in loop_called or any(index.in_loop(s) for s in sites):
            return False
    return True


def _over_a_loader(index: ModuleIndex, expr: ast.AST) -> bool:
    """`for batch in loader`, `enumerate(loader)`, `tqdm(loader)`: a name bound to a DataLoader."""
    for node in ast.walk(expr):
        key = dotted(node) if isinstance(node, ast.Name | ast.Attribute) else None
        if key and any(
            isinstance(v, ast.Call) and last_name(v.func) == "DataLoader"
            for _, v in index.bindings.get(key, ())
        ):
            return True
    return False


def _stuck_note(index: ModuleIndex) -> str:
    """`set_epoch(step) on line 121 is given a value that never changes`, or ''."""
    stuck = [c for c in index.calls_named("set_epoch") if _never_moves(index, c)]
    if not stuck:
        return ""
    arg = ast.unparse(stuck[0].args[0]) if stuck[0].args else "..."
    return f"set_epoch({arg}) on line {stuck[0].lineno} is given a value that never changes"
