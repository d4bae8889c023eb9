"""DDL006 (opinionated, a warning): checkpoints saved, files written, or progress printed inside
the training loop on every rank. Only torch.save, open(..., 'w'/'a') and print/tqdm/logging in a
training loop count; per-rank file names, rank-0 guards (here or in every caller) and scripts that
silence print off rank 0 keep it quiet."""

from __future__ import annotations

import ast
import re

from ddpdoctor.lint.files import read_bytes
from ddpdoctor.lint.finding import Hit
from ddpdoctor.lint.guards import (
    asked_before_init,
    every_rank_call,
    exclusive,
    exits,
    guarded_locally,
    off_rank0_branch,
    rank0_function,
    rank0_goes_first,
    rank0_name,
    under_off_rank0_test,
)
from ddpdoctor.lint.index import (
    FUNC_TYPES,
    ModuleIndex,
    dotted,
    is_const,
    kwarg,
    last_name,
    param_default,
    position,
)
from ddpdoctor.lint.project import (
    HANDS_PATH,
    IMAGE_WRITERS,
    LIBRARY_WRITES,
    LOG_SUFFIXES,
    NAMES_LOG,
    RANK_PARAM,
    WRITES_ANYWAY,
    FuncFacts,
    ModuleFacts,
    external_effects,
    image_path,
    imported_name,
    may_write,
    method_target,
    open_mode,
    opened_path,
    passes_parameter,
    passes_rank,
    passes_switch,
    program_effects,
    project_target,
    shell_copy,
    target_facts,
    timestamp,
    wandb_off,
)

LOG_LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception"})
PRINT_SILENCERS = ("setup_for_distributed", "init_distributed_mode", "suppress_output")
RANKISH = ("rank", "gpu_id")
RANK_NAMES = ("gpu", "local_gpu", "device_id")  # whole names only: `ngpus` is no rank


# Names unique to the process that makes them: `f"batch-{uuid4()}.pt"` is a file of its own.
PER_PROCESS = frozenset({"uuid4", "uuid1", "getpid", "mkstemp", "mkdtemp"})


def _mentions_rank(index: ModuleIndex, expr: ast.AST | None, depth: int = 0) -> bool:
    """Per-rank paths (`f'ckpt_{rank}.pt'`, or one unique to the process: a uuid, the pid) and
    messages (`[GPU{gpu_id}]`) are meant per rank."""
    if expr is None:
        return False
    # `net.name` in a path: the attribute's values count, not every value of `net` (the DDP
    # that wraps it with `device_ids=[args.local_rank]`, in laisimiao's cifar10 script)
    if timestamp(expr):
        return True  # `f"output_{time.time()}.mp4"`: a file of its own per call
    bases = {id(n.value) for n in ast.walk(expr) if isinstance(n, ast.Attribute)}
    for node in ast.walk(expr):
        name = last_name(node).lower() if isinstance(node, (ast.Name, ast.Attribute)) else ""
        if any(w in name for w in MATRIX_RANKS):
            continue  # `lora_rank`: the rank of a low-rank adapter, not of a process
        if name and (any(w in name for w in RANKISH) or name in RANK_NAMES or name in PER_PROCESS):
            return True
        if isinstance(node, ast.Name) and depth < 2 and id(node) not in bases:
            for value in index.values_of(node.id, node):
                if isinstance(value, ast.AST) and _mentions_rank(index, value, depth + 1):
                    return True
        if isinstance(node, ast.Attribute) and depth < 2 and (key := dotted(node)):
            # `args.log = args.log.replace("WORKER-ID", str(args.local_rank))` earlier in the
            # same function (pika): only this function's own assignments say what it holds
            scope = index.scope_of(node)
            if any(
                where is scope
                and isinstance(value, ast.AST)
                and value is not expr
                and _mentions_rank(index, value, depth + 1)
                for where, value in index.bindings.get(key, ())
            ):
                return True
    return False


MATRIX_RANKS = ("lora", "low_rank", "lowrank")
WRITE_CALLS = ("save", "open", "SummaryWriter", "FileHandler", "init", "log", "basicConfig")
WRITE_CALLS += ("add",)  # loguru's `logger.add(sink)`
WRITE_CALLS += tuple(IMAGE_WRITERS)
# Files written by a library call (numpy's savers, shutil's copies), by qualified name, with the
# position of the path they write: project.LIBRARY_WRITES, which helpers' facts read too.
# mlflow's tracking calls: one run per call of start_run, a row per metric per call.
MLFLOW_WRITES = frozenset(
    {"start_run", "log_metric", "log_metrics", "log_param", "log_params", "log_artifact"}
    | {"log_artifacts", "log_model", "log_dict", "log_figure", "log_image", "log_text"}
)
WRITE_CALLS += tuple(MLFLOW_WRITES) + ("update_summary",)
# The qualified names the receivers of LIBRARY_WRITES resolve to through their usual imports.
QUALIFIED = {"np": "numpy", "OmegaConf": "omegaconf.OmegaConf"}
FILE_SAVERS = {
    f"{QUALIFIED.get(module, module)}.{name}": at for (module, name), at in LIBRARY_WRITES.items()
}
WRITE_CALLS += tuple({name for _, name in LIBRARY_WRITES})


def _in_memory(index: ModuleIndex, target: ast.AST | None) -> bool:
    """A buffer in memory: `io.BytesIO()` itself, or the name a `with io.BytesIO() as f:` or an
    assignment gave it."""
    if isinstance(target, ast.Call):
        return index.callee_name(target) in ("BytesIO", "StringIO")
    if not isinstance(target, ast.Name):
        return False
    for anc in index.ancestors(target):
        if isinstance(anc, ast.With):
            for item in anc.items:
                var = item.optional_vars
                if isinstance(var, ast.Name) and var.id == target.id:
                    return _in_memory(index, item.context_expr)
    values = index.values_of(target.id, target)
    return bool(values) and all(isinstance(v, ast.Call) and _in_memory(index, v) for v in values)


def _write(index: ModuleIndex, call: ast.Call) -> str | None:
    """What kind of write a call is (see _write_kind), unless it writes one file per data item
    of the rank's own batches (see _per_item_file)."""
    what = _write_kind(index, call)
    return None if what is None or _per_item_file(index, call) else what


def _per_item_file(index: ModuleIndex, call: ast.Call) -> bool:
    """One file per data item of the rank's own batches (see project.per_item_path)."""
    from ddpdoctor.lint.project import per_item_path

    return per_item_path(_written_path(index, call), index.enclosing_loops(call))


def _written_path(index: ModuleIndex, call: ast.Call) -> ast.expr | None:
    """The path argument of a write _write_kind knows."""
    qual, name = index.qualname(call.func), index.callee_name(call)
    if qual in FILE_SAVERS:
        at = FILE_SAVERS[qual]
        return call.args[at] if len(call.args) > at else kwarg(call, ("file", "dst")[at])
    if qual == "torch.save":
        return call.args[1] if len(call.args) > 1 else kwarg(call, "f")
    if name in IMAGE_WRITERS:
        return image_path(call)
    if name == "open":
        return opened_path(call)
    return None


def _write_kind(index: ModuleIndex, call: ast.Call) -> str | None:
    """What kind of write a call is (`torch.save`, "open(..., 'w')", `SummaryWriter`,
    `wandb.log`, a log file, an image), or None. A path built with the rank is per rank."""
    name = index.callee_name(call)
    qual = index.qualname(call.func)
    if qual.startswith("mlflow.") and name in MLFLOW_WRITES:
        return f"mlflow.{name}"
    if name == "update_summary" and not index.resolve_call(call):
        # timm.utils' CSV of epoch metrics: (epoch, train_metrics, eval_metrics, filename)
        path = call.args[3] if len(call.args) > 3 else kwarg(call, "filename")
        if path is None or _mentions_rank(index, path) or project_target(index, call):
            return None
        return "update_summary(...)"
    if name in ("init", "log"):
        if name == "init" and wandb_off(call):
            return None
        if name == "log" and _azureml_run(index, call):
            return "Azure ML run.log"
        return f"wandb.{name}" if qual.startswith("wandb.") else None
    if name == "add":  # loguru's `logger.add("train.log")`: a file sink
        sink = call.args[0] if call.args else kwarg(call, "sink")
        if qual != "loguru.logger.add" or not _file_sink(sink) or _mentions_rank(index, sink):
            return None
        return "loguru logger.add(<file>)"
    if name == "basicConfig":  # `logging.basicConfig(filename="train.log")`: a log file
        path = kwarg(call, "filename")
        if qual != "logging.basicConfig" or path is None or _mentions_rank(index, path):
            return None
        return "logging.basicConfig(filename=...)"
    if name in ("SummaryWriter", "FileHandler") or name in IMAGE_WRITERS:
        if name == "FileHandler" and not (qual.startswith("logging") or qual == name):
            return None
        if name == "FileHandler" and _handler_of_ranked_config(index, call):
            return None
        path = kwarg(call, "log_dir") or kwarg(call, "filename") or kwarg(call, "fname")
        if path is None and call.args:
            path = call.args[1] if name == "save_image" and len(call.args) > 1 else call.args[0]
        if name == "save_image" and kwarg(call, "fp") is not None:
            path = kwarg(call, "fp")
        return None if _mentions_rank(index, path) else f"{dotted(call.func) or name}(...)"
    if shell_copy(call):
        return f"{dotted(call.func)}(<a copy>)"
    if qual in FILE_SAVERS:
        path = _written_path(index, call)
        if path is None or _mentions_rank(index, path) or _copies_own_save(index, call):
            return None
        return f"{qual.replace('numpy.', 'np.')}(...)"
    if name == "save" and index.qualname(call.func) == "torch.save":
        path = call.args[1] if len(call.args) > 1 else kwarg(call, "f")
        if _in_memory(index, path):
            return None  # `with io.BytesIO() as f: torch.save(state, f)`: bytes to send
        return None if _mentions_rank(index, path) else "torch.save"
    if name == "open" and call.args:
        mode = open_mode(call)
        if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
            return None
        if not any(ch in mode.value for ch in "wax"):
            return None
        path = opened_path(call)
        if "devnull" in (dotted(path) or ""):
            return None  # silencing output off rank 0, not writing a file
        if _mentions_rank(index, path):
            return None
        return f"{dotted(call.func) or 'open'}(..., {mode.value!r})"
    return None


def _azureml_run(index: ModuleIndex, call: ast.Call) -> bool:
    """`aml_run.log(name=..., value=...)` on `aml_run = Run.get_context()` (Azure ML's
    tracker, as in MeshGraphormer and TorchSemiSeg): one run, a metric row per call."""
    recv = call.func.value if isinstance(call.func, ast.Attribute) else None
    if not isinstance(recv, (ast.Name, ast.Attribute)):
        return False
    return any(
        isinstance(v, ast.Call)
        and last_name(v.func) == "get_context"
        and index.qualname(v.func).startswith("azureml")
        for v in index.values_of(dotted(recv) or "", recv)
    )


def _handler_of_ranked_config(index: ModuleIndex, call: ast.Call) -> bool:
    """`logging.basicConfig(handlers=[logging.FileHandler(out), ...], level=logging.INFO if
    local_rank in [-1, 0] else logging.WARN)` (the xtreme and transformers examples): a logger
    set up rank-aware, which the guide does not count."""
    holder = index.parent(call)
    if isinstance(holder, (ast.List, ast.Tuple)):
        holder = index.parent(holder)
    config = index.parent(holder) if isinstance(holder, ast.keyword) else None
    if not (isinstance(config, ast.Call) and index.callee_name(config) == "basicConfig"):
        return _level_set_by_rank_here(index, call)
    level = kwarg(config, "level")
    if level is None:
        return False
    if _chosen_by_rank(index, level):
        return True
    # `if rank == 0: basicConfig(..., level=INFO) else: basicConfig(..., level=ERROR)`
    # (daft-exprt): the other ranks' branch raises the level itself.
    quiet = dotted(level) in ("logging.WARNING", "logging.WARN", "logging.ERROR")
    return quiet and under_off_rank0_test(index, config)


def _level_set_by_rank_here(index: ModuleIndex, handler: ast.Call) -> bool:
    """`handler = logging.FileHandler(path)`, `logger.addHandler(handler)`, then
    `logger.setLevel(INFO if local_rank in [-1, 0] else WARN)` in the same function (SimXNS):
    a logger set up rank-aware, whose file gets rank 0's lines and the others' warnings."""
    scope = index.scope_of(handler)
    return any(
        index.callee_name(c) == "setLevel"
        and c.args
        and _chosen_by_rank(index, c.args[0])
        and not isinstance(c.func, ast.Name)
        and not dotted(c.func.value or "").endswith("handler")  # type: ignore[union-attr]
        for c in index.calls_by_scope.get(id(scope), ())
    )


def _copies_own_save(index: ModuleIndex, call: ast.Call) -> bool:
    """`shutil.copyfile(filename, "model_best.pth")` of a file its function saved itself
    (`torch.save(state, filename)`): that save is the write reported."""
    if not call.args or not index.qualname(call.func).startswith("shutil."):
        return False
    source, scope = ast.dump(call.args[0]), index.scope_of(call)
    return any(
        index.scope_of(save) is scope and len(save.args) > 1 and ast.dump(save.args[1]) == source
        for save in index.calls_named("save")
    )


def _file_sink(sink: ast.expr | None) -> bool:
    """A loguru sink that names a file: a string or path built here (`os.path.join(out,
    "train.log")`, `f"{out}/x.log"`, `out / "x.log"`), or a name that says so (`log_file`);
    not a stream (`sys.stderr`) nor a function."""
    if isinstance(sink, ast.Constant):
        return isinstance(sink.value, str)
    if isinstance(sink, (ast.JoinedStr, ast.BinOp)):
        return True
    if isinstance(sink, ast.Call):
        return last_name(sink.func) in ("join", "Path", "format")
    if isinstance(sink, (ast.Name, ast.Attribute)):
        name = last_name(sink).lower()
        return name not in ("stdout", "stderr") and any(w in name for w in PATH_WORDS)
    return False


def _bar_of_a_loop(index: ModuleIndex, call: ast.Call, loops: set[int]) -> bool:
    """`bar = tqdm(range(epochs))` and then `for epoch in bar:` around the training: the bar is
    the loop's own, though made before it. So is `with tqdm(total=len(loader)) as bar:` around
    the training loop, updated by hand."""
    held, holder = call, index.parent(call)
    while isinstance(holder, ast.Call) and last_name(holder.func) in ("enumerate", "zip", "iter"):
        held, holder = holder, index.parent(holder)
    if isinstance(holder, (ast.For, ast.AsyncFor)) and holder.iter is held:
        return id(holder) in loops  # `for epoch in tqdm(range(epochs)):` around the training
    assign = index.parent(call)
    if isinstance(assign, ast.withitem) and assign.context_expr is call:
        block = index.parent(assign)
        return isinstance(block, (ast.With, ast.AsyncWith)) and any(
            isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and id(node) in loops
            for stmt in block.body
            for node in ast.walk(stmt)
        )
    if not (
        isinstance(assign, ast.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0], ast.Name)
    ):
        return False
    name, scope = assign.targets[0].id, index.scope_of(call)
    return any(
        isinstance(node, (ast.For, ast.AsyncFor))
        and id(node) in loops
        and isinstance(node.iter, ast.Name)
        and node.iter.id == name
        and index.scope_of(node) is scope
        for node in ast.walk(scope)
    ) or any(
        # `bar = tqdm(total=epochs)`, then `bar.update(1)` in the training loop (pi-GAN)
        index.callee_name(c) == "update"
        and isinstance(c.func, ast.Attribute)
        and dotted(c.func.value) == name
        and any(id(loop) in loops for loop in index.enclosing_loops(c))
        and not guarded_locally(index, c)  # `if rank == 0: bar.update(1)`: rank 0's bar
        for c in index.calls_by_scope.get(id(scope), ())
    )


def _progress(
    index: ModuleIndex,
    call: ast.Call,
    loggers: set[str],
    quiet: bool = False,
    file_loggers: frozenset[str] = frozenset(),
) -> str | None:
    """What progress output a call is; `quiet`: logging is set up per rank (the root logger's
    calls are rank-0-only too); `file_loggers`: names bound to a project logger that opens one
    shared file on every rank."""
    name = index.callee_name(call)
    func = call.func
    if name in ("tqdm", "trange") and kwarg(call, "disable") is None:
        return name
    if name in ("Progress", "track") and index.qualname(func).startswith("rich.progress."):
        return f"rich's {name}" if kwarg(call, "disable") is None else None
    if name == "write" and isinstance(func, ast.Attribute) and last_name(func.value) == "tqdm":
        return "tqdm.write"
    if name in LOG_LEVELS and isinstance(func, ast.Attribute):
        recv = dotted(func.value) or ""
        if (
            (recv == "logging" and not quiet)
            or (recv in loggers and _plain_logger_here(index, func.value))
            or (recv in file_loggers and _file_logger_here(index, func.value))
        ) and not _disabled_off_rank0(index, recv):
            return f"{recv}.{name}"
    return None


BARS = ("tqdm", "trange", "rich's Progress", "rich's track")  # what `_progress` calls a bar


def _disabled_off_rank0(index: ModuleIndex, recv: str) -> bool:
    """`LOGGER.disabled = True` on the ranks other than 0 (VLN-DUET): its calls are rank 0's."""
    return any(
        len(a.targets) == 1
        and dotted(a.targets[0]) == f"{recv}.disabled"
        and is_const(a.value, True)
        and off_rank0_branch(index, a)
        for a in index.assigns
    )


LOG_SETUP = ("basicConfig", "setLevel", "addFilter", "disable", "addHandler", "NullHandler")
# Library helpers that set logging up per rank themselves (icefall.utils.setup_logger names the
# log file by the rank and is used by icefall-style recipes outside icefall too).
RANK_AWARE_LOGGERS = frozenset({"icefall.utils.setup_logger"})


def _rank_aware_logging(index: ModuleIndex) -> bool:
    """Logging set up per rank: a level, filter or handler chosen by the rank (passed the rank,
    or set under a rank test), a NullHandler or os.devnull for the other ranks."""
    from ddpdoctor.lint.guards import implies_rank0

    for call in index.calls_named(*LOG_SETUP):
        if index.callee_name(call) == "NullHandler":
            return True
        if any(_mentions_rank(index, a) for a in [*call.args, *(k.value for k in call.keywords)]):
            return True
        for anc in index.ancestors(call):
            if isinstance(anc, ast.If) and (
                implies_rank0(anc.test) or implies_rank0(anc.test, negated=True)
            ):
                return True
        if guarded_locally(index, call):
            return True  # `if opt.log: logger.addHandler(...)`, a flag only rank 0 has on
    if any(index.aliases.get(n) in RANK_AWARE_LOGGERS for n in index.calls_by_name):
        return True  # icefall's setup_logger: a log file per rank, the rank in its name
    if any(_handed_the_rank(index, name) for name in index.calls_by_name if "log" in name.lower()):
        return True
    return "devnull" in index.attr_names or "rank_logging" in program_effects(index)


def _handed_the_rank(index: ModuleIndex, name: str) -> bool:
    """A logging set-up we cannot read (a library's, a submodule absent from the tree) handed
    the rank (`setup_logger_dist(cfg.log_path, cfg.rank)`, detectron2's
    `setup_logger(distributed_rank=rank)`): it sets the logging up per rank. One of the project
    is judged by what it does (`rank_logging`), not by its arguments (CuiJiali's own
    `Logger(save, local_rank)` opens the shared log.txt on every rank)."""
    lowered = name.lower()
    if not ("logger" in lowered or "logging" in lowered) or name in index.functions:
        return False
    return any(
        passes_rank(call)
        and imported_name(index, call.func) is None
        and project_target(index, call) is None
        and not _star_imported_from_project(index, name)
        for call in index.calls_by_name[name]
    )


def _star_imported_from_project(index: ModuleIndex, name: str) -> bool:
    """Whether a module of the project that this file star-imports (`from utils import *`)
    defines the name at its top level."""
    project, path = index.project, index.path
    if project is None or path is None:
        return False
    defines = re.compile(rb"(?m)^(?:class|def)[ \t]+" + re.escape(name.encode()) + rb"\b")
    for key, (module, level, star) in index.from_imports.items():
        found = project.module_path(path, module, level) if key.startswith("*") else None
        if star == "*" and found is not None:
            try:
                if defines.search(read_bytes(found)):
                    return True
            except OSError:
                continue
    return False


def _plain_logger_here(index: ModuleIndex, recv: ast.expr) -> bool:
    """Every value the receiver may hold here is a plain `logging.getLogger(...)`: a logger
    returned by a helper (`logger = setup_logger(rank=...)`) may be rank-aware. A name with no
    value here was imported as a plain logger (see _imported_plain_loggers)."""
    values = index.values_of(dotted(recv) or "", recv)
    if not values and isinstance(recv, ast.Name) and recv.id in index.from_imports:
        return True
    return bool(values) and all(
        isinstance(v, ast.Call)
        and (index.qualname(v.func) == "logging.getLogger" or _plain_logger_maker(index, v))
        for v in values
    )


def _plain_logger_maker(index: ModuleIndex, call: ast.Call) -> bool:
    """`logger = get_logger(path)` where get_logger is a function of this file that returns a
    `logging.getLogger(...)` it gave handlers, and asks no rank: every rank's logger prints
    (baby-llama2's get_logger: a FileHandler and a StreamHandler for each process)."""
    funcs = index.resolve_call(call)
    if not funcs or passes_rank(call):
        return False
    cache: dict[int, bool] = index.__dict__.setdefault("_logger_makers", {})
    for func in funcs:
        if id(func) not in cache:
            cache[id(func)] = _returns_plain_logger(index, func)
        if not cache[id(func)]:
            return False
    return True


def _returns_plain_logger(index: ModuleIndex, func: ast.AST) -> bool:
    """Every return of the function is a `logging.getLogger(...)` (through a local name), and
    the function asks no rank (asked last: it walks the whole body)."""
    returned = index.returns_of(func)
    if not returned:
        return False
    for ret in returned:
        values = index.values_of(ret.id, ret) if isinstance(ret, ast.Name) else [ret]
        if not values or not all(
            isinstance(v, ast.Call) and index.qualname(v.func) == "logging.getLogger"
            for v in values
        ):
            return False
    return not _mentions_rank(index, func)


def _plain_loggers(index: ModuleIndex) -> set[str]:
    """Logger names set up with logging.getLogger and no rank-aware level, filter or handler;
    also one imported from a module of the project that binds it so at its top level
    (`from tools.common import logger`, where `logger = logging.getLogger()`)."""
    if _rank_aware_logging(index):
        return set()
    names = set()
    for key, entries in index.bindings.items():
        if any(
            isinstance(v, ast.Call)
            and (index.qualname(v.func) == "logging.getLogger" or _plain_logger_maker(index, v))
            for _, v in entries
        ):
            names.add(key)
    return names | _imported_plain_loggers(index)


def _imported_plain_loggers(index: ModuleIndex) -> set[str]:
    """Names imported from a module of the project whose top level binds them to a plain
    `logging.getLogger(...)`."""
    from ddpdoctor.lint.project import from_import_target

    out = set()
    for local in index.from_imports:
        if "log" not in local.lower() or local in index.bindings:
            continue
        found = from_import_target(index, local)
        if found is None:
            continue
        name = index.from_imports[local][2]
        plain = re.compile(
            rb"(?m)^" + re.escape(name.encode()) + rb"[ \t]*=[ \t]*logging\.getLogger\("
        )
        try:
            text = read_bytes(found[0])
        except OSError:
            continue
        if plain.search(text) and not RANKED_LOG_SETUP.search(text):
            out.add(local)
    return out


# A logging set-up line that names the rank (yolov9's `level = logging.INFO if verbose and rank
# in {-1, 0} else logging.ERROR` in utils/general.py): that module's loggers are per rank.
RANKED_LOG_SETUP = re.compile(
    rb"(?im)^.*(?:setLevel|basicConfig|addFilter|NullHandler|level[ \t]*=).*rank"
)


def _file_loggers(index: ModuleIndex) -> frozenset[str]:
    """Names bound to a project logger whose constructor opens one log file whatever the rank
    (`logger = Logger(os.path.join(out, "log.txt"))`, reported where it is built): each line
    it logs on every rank lands N times in that file."""
    if _rank_aware_logging(index) or not {"writes", "opens_log"} & program_effects(index):
        return frozenset()
    return frozenset(
        key
        for key, entries in index.bindings.items()
        if any(isinstance(v, ast.Call) and _writing_helper(index, v) for _, v in entries)
    )


def _file_logger_here(index: ModuleIndex, recv: ast.expr) -> bool:
    """Every value the receiver may hold here is such a logger, built on every rank."""
    values = index.values_of(dotted(recv) or "", recv)
    return bool(values) and all(
        isinstance(v, ast.Call)
        and _writing_helper(index, v)
        and every_rank_call(index, v) is not False
        for v in values
    )


def _print_silenced(index: ModuleIndex) -> bool:
    """The script replaces print or stdout off rank 0 (`builtins.print = ...`,
    `sys.stdout = open(os.devnull, 'w')`) or calls a helper known to do so."""
    return (
        index.mentions(*PRINT_SILENCERS)
        or any(
            k.endswith("builtin__.print") or k in ("builtins.print", "sys.stdout")
            for k in index.bindings
        )
        or "silence_print" in program_effects(index)
    )


def _where(site: ast.Call | None) -> str:
    if site is None:
        return ""
    return f" (through {_callee(site)}() on line {site.lineno}, not guarded)"


def _callee(call: ast.Call) -> str:
    """`trainer.train` for `trainer.train()`; `.train` for `Trainer(args).train()`."""
    if (name := dotted(call.func)) is not None:
        return name
    return f".{call.func.attr}" if isinstance(call.func, ast.Attribute) else "a call"


def _site_place(site: ast.Call | None) -> tuple[tuple[str | None, int, str], ...]:
    """The unguarded call through which a write runs on every rank, as the other place of the
    mistake (see Related): a guard may go around the write or around that call."""
    if site is None:
        return ()
    return ((None, site.lineno, f"the call of {_callee(site)}() that every rank makes"),)


def _saves(index: ModuleIndex, call: ast.Call) -> bool:
    """A call of the project's own saving method or helper (`model.save(step)`,
    `save_checkpoint(...)`); torch.save and the file writes are judged by _write."""
    name = index.callee_name(call)
    return "save" in name.lower() and _write(index, call) is None and name not in IMAGE_WRITERS


def _writes_itself(index: ModuleIndex, call: ast.Call) -> bool:
    """The project function this call names writes the file in its own body (`save_model`
    doing torch.save), rather than through a chain that is judged where it writes."""
    found = project_target(index, call)
    facts = found[0].functions.get(found[1]) if found else None
    if facts is None:
        return False
    if {"writes", "opens_log", NAMES_LOG} & facts.direct or passes_switch(call, facts):
        return True
    # A saving helper that writes through a function of its own module (`save_best_model` ->
    # `save_model`), unless it tests the rank or is handed one (it may decide per rank).
    if "rank_aware" in facts.direct or passes_rank(call):
        return False
    if "save" in found[1].lower():
        helpers = [found[0].functions.get(name) for name in facts.local]  # type: ignore[index]
        if any(
            h is not None and "rank_aware" not in h.direct and {"writes", "opens_log"} & h.direct
            for h in helpers
        ):
            return True
    return _hands_a_writer(index, found[0], facts)


def _hands_a_writer(index: ModuleIndex, mod: ModuleFacts, facts: FuncFacts) -> bool:
    """Any helper that calls a plain writer of the project by name (`write_json(config,
    save_dir / "config.json")` in MCQ's ConfigParser): the writer writes whatever it is handed,
    so the file is chosen here, and the write is this helper's."""
    project = index.project
    if project is None or "trains" in facts.direct:
        return False  # a training loop's writes are judged in its own module, where they are
    for ref in facts.external:  # a writer of the helper's own module is judged there too
        if HANDS_PATH + ref[-1] not in facts.direct:
            continue  # the writer names its file itself: judged where it writes
        hit = project.resolve(mod, ref)
        writer = hit[0].functions.get(hit[1]) if hit else None
        if writer is not None and "writes" in writer.direct and not RANK_FACTS & writer.direct:
            return True
    return False


def _given_log_file(index: ModuleIndex, call: ast.Call, effects: frozenset[str] | tuple) -> bool:
    """A helper that makes a FileHandler or SummaryWriter, handed a log file with no rank among
    its arguments: every rank opens that one file. Handed means a name spelled out here
    (`init_logger(log_file=out + "/train.log")`), or a path (`log_file_path=work_dir`) given to
    a helper that asks no rank itself. A helper given only a config (`init_logger(args)`) may
    choose a file per rank, or none off rank 0: not judged."""
    if "opens_log" not in effects and NAMES_LOG not in effects:
        return False
    args = [*call.args, *(k.value for k in call.keywords)]
    if passes_rank(call) or any(rank0_name(n) for a in args for n in ast.walk(a)):
        return False
    facts = target_facts(index, call)
    if facts is not None and RANK_FACTS & facts.direct:
        return False  # it asks the rank itself (lingua's init_logger: a file on rank 0 only)
    if any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith(LOG_SUFFIXES)
        for a in args
        for n in ast.walk(a)
    ):
        return True
    if facts is None or not {"opens_log", NAMES_LOG} & facts.direct:
        return False
    if any(_chosen_by_rank(index, a) for a in args):
        return False  # a level raised off rank 0: the helper is told per rank what to log
    if NAMES_LOG in facts.direct:
        return True  # it names the file itself: handed a config or a folder, it opens one
    if any(_may_be_none(index, a) for a in args):
        return False  # `args.log_path = None` (set only on the master): no file off rank 0
    named = [k.arg for k in call.keywords if k.arg] + [
        last_name(n) for a in args for n in ast.walk(a) if isinstance(n, (ast.Name, ast.Attribute))
    ]
    return any(w in name.lower() for name in named for w in PATH_WORDS if w != "name")


def _chosen_by_rank(index: ModuleIndex, arg: ast.expr) -> bool:
    """A name one of whose values is set under a rank test (`if rank == 0: level = "INFO"`),
    or a choice made by one (`out if accelerator.is_main_process else None`)."""
    from ddpdoctor.lint.guards import implies_rank0

    if isinstance(arg, ast.IfExp):
        return implies_rank0(arg.test) or implies_rank0(arg.test, negated=True)
    if not isinstance(arg, (ast.Name, ast.Attribute)):
        return False
    values = index.values_of(dotted(arg) or "", arg)
    return any(isinstance(v, ast.AST) and guarded_locally(index, v) for v in values)


def _may_be_none(index: ModuleIndex, arg: ast.expr) -> bool:
    """A name or attribute that may hold None here: assigned None, or a parameter whose
    default is None."""
    if not isinstance(arg, (ast.Name, ast.Attribute)):
        return False
    values = index.values_of(dotted(arg) or "", arg)
    if any(isinstance(v, ast.Constant) and v.value is None for v in values):
        return True
    if not isinstance(arg, ast.Name):
        return False
    default = param_default(index.scope_of(arg), arg.id)
    return isinstance(default, ast.Constant) and default.value is None


RANK_FACTS = frozenset({"rank_aware", "reads_rank", "rank_logging"})
PATH_WORDS = ("file", "path", "dir", "name", "folder")


def _path_args(call: ast.Call) -> list[ast.expr]:
    """The arguments that may name a file: strings built here, and names that say so
    (`log_file`, `args.output_dir`); not the model or the config handed along."""
    built = (ast.JoinedStr, ast.BinOp, ast.Constant, ast.Call)
    return [
        arg
        for arg in [*call.args, *(k.value for k in call.keywords)]
        if isinstance(arg, built)
        or (
            isinstance(arg, (ast.Name, ast.Attribute))
            and any(w in last_name(arg).lower() for w in PATH_WORDS)
        )
    ]


def _writing_helper(index: ModuleIndex, call: ast.Call) -> bool:
    """A call into a helper of another module of the project that writes one file whatever the
    rank (`save_model(args, model)` doing torch.save, `init_logger(log_file_path=out)`)."""
    effects = external_effects(index, call) or ()
    if index.resolve_call(call) or not (
        may_write(effects) or _given_log_file(index, call, effects) or _rank_left_out(index, call)
    ):
        return False
    if not _writes_itself(index, call):
        return False  # deeper down: reported where the write is, if anywhere
    if any(_mentions_rank(index, a) for a in _path_args(call)):
        return False  # `CSVLogger(f"{tag}_r{rank}.csv")`: a file per rank
    if any(
        isinstance(a, ast.IfExp) and _chosen_by_rank(index, a)
        for a in [*call.args, *(k.value for k in call.keywords)]
    ):
        return False  # `Logger(out if accelerator.is_main_process else None)`: rank 0's file
    if rank0_goes_first(index, call):
        return False  # a download or cache that rank 0 fills first, the others then read
    return not _in_handler(index, call)  # `except: save_batch(b); raise`: the failing rank's


def _rank_left_out(index: ModuleIndex, call: ast.Call) -> bool:
    """A helper that writes in its own body under a test of a rank parameter defaulting to 0,
    called without that parameter: its rank-0 branch runs on every rank."""
    facts = target_facts(index, call)
    if facts is None or "writes" not in facts.direct:
        return False
    params = [f for f in facts.direct if f.startswith(RANK_PARAM)]
    return bool(params) and not any(passes_parameter(call, f, RANK_PARAM) for f in params)


def _writing_method(index: ModuleIndex, call: ast.Call) -> bool:
    """`config_parser.save(work_dir)` on an object of a project class whose method writes a
    file in its own body and tests no rank: every rank that builds the object writes it."""
    if index.resolve_call(call):
        return False
    found = method_target(index, call)
    if found is None or index.project is None:
        return False
    mod, method, built = found
    facts = mod.functions.get(method)
    if facts is None or "writes" not in facts.direct:
        return False
    if "rank_aware" in facts.direct and WRITES_ANYWAY not in facts.direct:
        return False
    if not may_write(index.project.effects(mod, method)):
        return False
    if any(
        _mentions_rank(index, a)
        for c in [call, *built]
        for a in [*c.args, *(k.value for k in c.keywords)]
    ):
        return False  # `meter.dump(f"stats_{rank}.json")`, `CSVLogger(f"{tag}_r{rank}.csv")`
    return not rank0_goes_first(index, call) and not _in_handler(index, call)


def _helper_writes(index: ModuleIndex) -> list[Hit]:
    """A writing helper's call made on every rank here, or a writing method of an object of
    a project class."""
    effects = program_effects(index)
    helpers = bool({"opens_log", NAMES_LOG} & effects) or may_write(effects)
    helpers = helpers or any(e.startswith(RANK_PARAM) for e in effects)
    hits: list[Hit] = []
    for call in index.calls:
        if not (
            (helpers and _writing_helper(index, call))
            or (type(call.func) is ast.Attribute and _writing_method(index, call))
        ):
            continue
        site = every_rank_call(index, call)
        if site is False:
            continue
        name = dotted(call.func) or "a helper"
        what = (
            "starts a tracker run (wandb.init) and runs on every rank: N ranks log the same run"
            if "tracks" in (external_effects(index, call) or ())
            else "writes a file and runs on every rank: N ranks write the same file"
        )
        hits.append(
            Hit(
                call,
                "DDL006",
                f"{name}() {what}{_where(site)}{_early_guard(index, call)}",
                _site_place(site),
            )
        )
    return hits


def _early_guard(index: ModuleIndex, node: ast.AST) -> str:
    """Why an enclosing rank-0 test did not count: it is asked before the set-up."""
    for anc in index.ancestors(node):
        if isinstance(anc, (ast.If, ast.IfExp)) and asked_before_init(index, anc):
            return (
                f"; the rank-0 test on line {anc.lineno} is asked before the process group is"
                " set up, when every rank is rank 0"
            )
    return ""


def _in_handler(index: ModuleIndex, node: ast.AST) -> bool:
    """Inside an `except` block of its function: it runs on the rank that failed, not on all."""
    return any(isinstance(a, ast.ExceptHandler) for a in index.ancestors(node))


def _unguarded_twins(index: ModuleIndex, skip: set[int] | None = None) -> list[Hit]:
    """A save the script itself guards with a rank-0 test in one place, and calls unguarded in
    another (`model.save(step)` under `rank == 0` at one checkpoint, bare at the last): the
    author's own guard says it must run once, so the bare call is the mistake."""
    by_text: dict[str, list[ast.Call]] = {}
    for call in index.calls:
        text = dotted(call.func)
        if text is None or not _saves(index, call) or index.resolve_call(call):
            continue
        if _judged_by_itself(index, call) or rank0_name(call.func):
            continue  # a writing helper is judged by what it does; save_on_master guards itself
        by_text.setdefault(text, []).append(call)
    hits: list[Hit] = []
    for text, calls in by_text.items():
        guarded = [c for c in calls if guarded_locally(index, c)]
        if not guarded:
            continue
        for call in calls:
            if call in guarded or id(call) in (skip or ()) or every_rank_call(index, call) is False:
                continue
            if any(_mentions_rank(index, a) for a in _path_args(call)):
                continue  # `save(filename=f"bad-model-{rank}.pt")`: a file of its own per rank
            hits.append(
                Hit(
                    call,
                    "DDL006",
                    f"{text}() runs on every rank here, but line {guarded[0].lineno} runs it on "
                    "rank 0 only: N ranks save at once",
                )
            )
    return hits


def _judged_by_itself(index: ModuleIndex, call: ast.Call) -> bool:
    """A project helper whose writes lint reads (judged by the writing-helper rule), or that
    tests the rank itself (3detr's save_checkpoint returns unless is_primary()): its guard, or
    none, is its own, whatever its callers do."""
    effects = external_effects(index, call)
    if effects is None:
        return False
    facts = target_facts(index, call)
    return may_write(effects) or (facts is not None and bool(RANK_FACTS & facts.direct))


def _init_points(index: ModuleIndex) -> list[ast.Call]:
    """Calls after which the group is up: the set-up calls, and the calls of this file's
    functions that (through them) make one (`default_setup(args)` in `setup()`)."""
    points = list(index.all_init_calls)
    holders = {index.scope_of(c) for c in points}
    for _ in range(3):
        more = [c for c in index.calls if c not in points and holders & set(index.resolve_call(c))]
        if not more:
            break
        points += more
        holders |= {index.scope_of(c) for c in more}
    return points


def _writes_after_init(index: ModuleIndex) -> list[Hit]:
    """In a set-up module that trains nothing itself (`setup()` in config.py: make the group,
    then write config.yaml), a write that follows the set-up call in the same function, or in
    a function of this file called after it, runs on every rank unless guarded."""
    hits: list[Hit] = []
    reimported = _module_level_of_a_spawning_script(index)
    before = _before_the_set_up_of_a_rank_script(index)
    early = {id(call) for _, _, call in before}
    for point, scope, call in (
        _after_init(index) + _module_level_of_a_rank_script(index) + reimported + before
    ):
        # A function that guards some of its own work by rank is trusted with the rest.
        targets = [(call, None)] + [
            (inner, call)
            for fn in index.resolve_call(call)
            if not _tests_rank(index, fn) and not rank0_function(fn)
            for inner in index.calls_by_scope.get(id(fn), ())
        ]
        for write, via in targets:
            what = _write(index, write)
            if what is None and via is None and _writing_helper(index, write):
                what = f"{dotted(write.func) or 'a helper'}(), which writes a file,"
            if what is None or (via is not None and guarded_locally(index, write)):
                continue
            if scope is index.tree and reimported:
                when = (
                    "at the top of the script, outside its `__main__` block: mp.spawn starts "
                    "each worker by importing the script again"
                )
            elif scope is index.tree:
                when = "at the top of a script that every rank runs"
            elif id(call) in early:
                when = (
                    f"before the group is set up on line {point.lineno}, in a script the "
                    "launcher starts once per rank"
                )
            elif position(call) <= position(point):
                when = f"in every process {scope.name}() starts"
            else:
                when = f"after the process group is set up on line {point.lineno}"
            hits.append(
                Hit(
                    write,
                    "DDL006",
                    f"{what} runs on every rank: N ranks write the same file ({when}"
                    f"{_where_via(via)})",
                    _site_place(via),
                )
            )
    return hits


def _after_init(index: ModuleIndex) -> list[tuple[ast.Call, ast.AST, ast.Call]]:
    """(set-up call, its function, a call there) for each call that runs after the group is up
    with no rank test of its own; in a spawned worker, every call (it runs whole everywhere)."""
    out = []
    for point in _init_points(index):
        scope = index.scope_of(point)
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        spawned = scope in index.spawn_targets
        for call in index.calls_by_scope.get(id(scope), ()):
            if (position(call) <= position(point) and not spawned) or guarded_locally(index, call):
                continue
            if not spawned and exclusive(index, point, call):
                continue  # `if mode == "train": train(...)` / `elif ...: predict()`
            if not spawned and _left_after(index, point, call, scope):
                continue  # `if generate: model.load(...); ...; return`, then another mode
            out.append((point, scope, call))
    return out


def _module_level_of_a_rank_script(index: ModuleIndex) -> list[tuple[ast.Call, ast.AST, ast.Call]]:
    """A script that sets the group up (in a function or at its top) and spawns nothing is
    started once per rank by its launcher (torchrun): its top-level statements run on every
    rank too, before the set-up as much as after it (mt-dnn's `create_logger(...,
    log_file=...)`). Only their own writes: the functions of this file they call are judged
    where the set-up is."""
    if not index.has_main_guard or index.spawn_targets:
        return []
    points = _init_points(index)
    if not points:
        return []
    return [
        (points[0], index.tree, call)
        for call in index.calls_by_scope.get(id(index.tree), ())
        if not guarded_locally(index, call) and not index.resolve_call(call)
    ]


def _before_the_set_up_of_a_rank_script(
    index: ModuleIndex,
) -> list[tuple[ast.Call, ast.AST, ast.Call]]:
    """In a script its launcher starts once per rank (see _module_level_of_a_rank_script),
    what the function that sets the group up does before it, and what its callers in this file
    do before calling it (UFDN's `main()` making a log file, then `train()` making the group):
    every rank runs those lines too, the group up or not."""
    if not index.has_main_guard or index.spawn_targets:
        return []
    return [
        (index.all_init_calls[0], scope, call)
        for scope, point in _set_up_path(index)
        for call in index.calls_by_scope.get(id(scope), ())
        if position(call) < position(point)
        and not exclusive(index, point, call)
        and not _in_a_branch_that_leaves(index, call, scope)
        and not guarded_locally(index, call)
    ]


def _set_up_path(index: ModuleIndex) -> list[tuple[ast.AST, ast.Call]]:
    """The function that sets the group up first, with its set-up call, and each function of
    this file that calls it (and theirs), with that call."""
    cached = index.__dict__.get("_set_up_path")
    if cached is not None:
        return cached
    path: list[tuple[ast.AST, ast.Call]] = []
    index.__dict__["_set_up_path"] = path
    seen: set[int] = set()
    todo = [(p, index.scope_of(p)) for p in index.all_init_calls[:1]]
    while todo:
        point, scope = todo.pop()
        if id(scope) in seen or not isinstance(scope, FUNC_TYPES):
            continue
        seen.add(id(scope))
        path.append((scope, point))
        todo += [(site, index.scope_of(site)) for site in index.call_sites.get(scope, ())]
    return path


def _leaves_before_the_set_up(index: ModuleIndex, node: ast.AST) -> bool:
    """On the way to the set-up, in a branch that exits first (`if args.submit: write the job
    file; sys.exit()`): a mode of one process that never makes the group."""
    scope = index.scope_of(node)
    return any(
        s is scope and position(node) < position(point) and _in_a_branch_that_leaves(index, node, s)
        for s, point in _set_up_path(index)
    )


def _left_after(index: ModuleIndex, point: ast.AST, call: ast.AST, scope: ast.AST) -> bool:
    """The set-up sits in a branch that returns or exits, and the call outside it
    (lightweight-gan's cli: `if generate: model.load(...)` sets a group up, then returns; its
    `if aug_test:` mode below never follows it)."""
    child = point
    for anc in index.ancestors(point):
        if anc is scope:
            return False
        if isinstance(anc, ast.If) and child is not anc.test:
            branch = anc.body if child in anc.body else anc.orelse
            if exits(branch) and not any(call in ast.walk(stmt) for stmt in branch):
                return True
        child = anc
    return False


def _in_a_branch_that_leaves(index: ModuleIndex, node: ast.AST, scope: ast.AST) -> bool:
    """In a branch that returns or exits (`if launch: submit(...); sys.exit()`): a mode that
    never reaches the set-up below it, so not what the ranks run."""
    child = node
    for anc in index.ancestors(node):
        if anc is scope:
            return False
        if isinstance(anc, ast.If):
            branch = anc.body if child in anc.body else anc.orelse
            if child is not anc.test and exits(branch):
                return True
        child = anc
    return False


def _module_level_of_a_spawning_script(
    index: ModuleIndex,
) -> list[tuple[ast.Call, ast.AST, ast.Call]]:
    """A script that starts its workers with torch.multiprocessing's spawn (always the
    "spawn" start method): each worker imports the script again as `__mp_main__`, so what its
    top level does outside the `__main__` block runs in the launcher and again in every rank
    (MedSAM's sanity-check `savefig` and `wandb.init` at module level)."""
    spawns = [
        c
        for c in index.calls_named("spawn", "start_processes")
        if "multiprocessing" in index.qualname(c.func) or dotted(c.func) == "mp.spawn"
    ]
    if not spawns or not index.spawn_targets:
        return []
    return [
        (spawns[0], index.tree, call)
        for call in index.calls_by_scope.get(id(index.tree), ())
        if not _under_main_guard(index, call)
        and not guarded_locally(index, call)
        and not index.resolve_call(call)
    ]


def _under_main_guard(index: ModuleIndex, node: ast.AST) -> bool:
    return any(
        isinstance(anc, ast.If)
        and isinstance(anc.test, ast.Compare)
        and dotted(anc.test.left) == "__name__"
        for anc in index.ancestors(node)
    )


def note_built_classes(index: ModuleIndex) -> None:
    """Note the project classes this program builds on every rank (see _note_built)."""
    for _, _, call in _after_init(index):
        _note_built(index, call)


def _note_built(index: ModuleIndex, call: ast.Call) -> None:
    """A class of another module built here on every rank (`VisionTrainer(model, cfg)` after
    the set-up): what its constructor writes is judged in its own file (built_classes)."""
    if index.project is None or not index.callee_name(call)[:1].isupper():
        return  # classes are named in CapWords; a helper call is judged above
    found = imported_name(index, call.func)
    if found is not None:
        index.project.note_built(*found, index.path or "", call.lineno)


def _tests_rank(index: ModuleIndex, func: ast.AST) -> bool:
    """Whether a function holds a rank-0 test of its own (`if is_main_process():`)."""
    from ddpdoctor.lint.guards import implies_rank0

    cache: dict[int, bool] = index.__dict__.setdefault("_tests_rank", {})
    if id(func) not in cache:  # asked once per call of the function
        cache[id(func)] = any(
            isinstance(node, ast.If)
            and (implies_rank0(node.test) or implies_rank0(node.test, negated=True))
            for node in ast.walk(func)
        )
    return cache[id(func)]


def _where_via(via: ast.Call | None) -> str:
    return f", through {dotted(via.func) or 'a call'}() on line {via.lineno}" if via else ""


def check(index: ModuleIndex) -> list[Hit]:
    if index.framework_writes or not (
        index.is_ddp_script or index.in_ddp_program or index.calls_by_name.get("Accelerator")
    ):
        return []  # an Accelerate script runs once per process, as a DDP script does
    note_built_classes(index)  # their constructors are judged in their own files, at the end
    if not (index.calls_by_name.get("backward") or index.wrapper_calls):
        # Sets up a group but trains nothing here: only what follows the set-up is judged.
        return _writes_after_init(index) + _unguarded_twins(index)
    hits: list[Hit] = []
    for call in index.calls_named(*WRITE_CALLS):
        what = _write(index, call)
        if what and _leaves_before_the_set_up(index, call):
            continue
        site = every_rank_call(index, call) if what else False
        if site is not False:
            effect = (
                "N ranks log the same run to the tracker"
                if what and what.startswith(("wandb", "Azure ML", "mlflow"))
                else "N ranks write the same file"
            )
            hits.append(
                Hit(
                    call,
                    "DDL006",
                    f"{what} runs on every rank: {effect}{_where(site)}",
                    _site_place(site),
                )
            )
    helper_writes = _helper_writes(index)
    hits += helper_writes
    hits += _unguarded_twins(index, {id(h.node) for h in helper_writes})
    # What follows the set-up in its own function runs on every rank, though nothing here
    # calls that function (a trainer's __init__, built by the program's script).
    hit_nodes = {id(h.node) for h in hits}
    hits += [h for h in _writes_after_init(index) if id(h.node) not in hit_nodes]
    loops = index.training_loops
    if not loops:
        return hits
    # A module the program imports cannot see how the program set logging up (per rank or
    # not): only its progress bars count, not its log calls.
    loggers = _plain_loggers(index) if index.is_ddp_script else set()
    file_loggers = _file_loggers(index) if index.is_ddp_script else frozenset()
    quiet = _rank_aware_logging(index) or not index.is_ddp_script
    silenced = _print_silenced(index)
    for call in index.calls:
        what = _progress(index, call, loggers, quiet, file_loggers)
        if what is None or (silenced and what == "print"):
            continue
        in_loop = any(id(loop) in loops for loop in index.enclosing_loops(call))
        if not (in_loop or _bar_of_a_loop(index, call, loops)):
            # In a helper the loop calls (`validate()`), only a bar counts: its log calls are
            # often one line per epoch, and the logging set-up is seldom in view there.
            helper = index.scope_of(call)
            if what not in BARS or helper not in index.loop_helpers:
                continue
            where = f"in {getattr(helper, 'name', 'a helper')}(), which the training loop calls,"
        else:
            where = "in the training loop"
        if what not in BARS and _mentions_rank(index, call, depth=2):
            continue  # `[rank {rank}] loss ...` is meant once per rank; N bars still clutter
        if every_rank_call(index, call) is not False:
            hits.append(
                Hit(call, "DDL006", f"{what} {where} runs on every rank: N copies of each line")
            )
    return hits
