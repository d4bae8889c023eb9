"""Cross-file reading: follow a script's imports into the modules of its own project (absolute
within the root, relative, `from . import x`) and learn what their functions do to the process
group (init, set_device, destroy, print silenced off rank 0), without importing them.

Only small per-module facts are kept (which function calls what), never the trees: a large tree
stays cheap, and a module is parsed at most once per run."""

from __future__ import annotations

import ast
import builtins
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ddpdoctor.lint.files import read_bytes, skip_dir, unreadable_reason
from ddpdoctor.lint.guards import (
    else_off_rank0,
    else_runs_one_process,
    exits,
    implies_rank0,
    only_off_rank0,
    rank0_function,
)
from ddpdoctor.lint.index import (
    CHILD_FIELDS,
    FUNC_TYPES,
    SPAWN_CALLS,
    ModuleIndex,
    child_fields,
    destroys_default_group,
    dotted,
    import_key,
    is_const,
    kwarg,
    none_tested,
    spawn_target,
)

# What a call does, by the callee's last name.
DIRECT = {
    "init_process_group": "init",
    "destroy_process_group": "destroy",
    "set_device": "set_device",
    # A launcher that starts processes (`mp.spawn(worker, args=(main_func, ...))`): what it is
    # handed runs in each of them.
    "spawn": "spawns",
    "start_processes": "spawns",
}
PRINT_TARGETS = ("builtins.print", "__builtin__.print", "__builtins__.print", "sys.stdout")
MAX_DEPTH = 6
# A file without any of these words has nothing for the checks to find: the engine parses it
# (to report syntax errors) and stops there, unless it has a `__main__` block or imports a
# set-up module of the project. A module read here that the engine will check is handed over
# with its tree instead of being parsed twice.
MARKERS = ("init_process_group", "DistributedDataParallel", "DistributedSampler", "GradScaler")
MARKERS += ("DDP", "scaler", "FullyShardedDataParallel")
# A script whose set-up is all in a helper module (`dist_util.setup_dist()`).
MARKERS += ("init_dist", "setup_dist", "dist_init", "ddp_setup", "setup_ddp", "init_ddp")
# An Accelerate script: its launcher runs it once per process, as torchrun runs a DDP script.
MARKERS += ("Accelerator(",)
MARKER_BYTES = tuple(m.encode() for m in MARKERS)
TREE_WORDS = (b"__main__", *MARKER_BYTES)


def guarded(words: tuple[bytes, ...], guards: tuple[bytes, ...]) -> tuple[tuple[bytes, ...], ...]:
    """The words grouped under the first guard each holds, the guard first (a word without one
    is its own guard): any_word scans for a group's words only where its guard is."""
    groups: dict[bytes, list[bytes]] = {}
    for word in words:
        groups.setdefault(next((g for g in guards if g in word), word), []).append(word)
    return tuple((guard, *group) for guard, group in groups.items())


def any_word(data: bytes, groups: tuple[tuple[bytes, ...], ...]) -> bool:
    """`any(w in data for w in words)`, exactly, in fewer scans when most files hold none."""
    for guard, *words in groups:
        if guard in data and (words[0] == guard or any(w in data for w in words)):
            return True
    return False


# One scan for `dist` stands for init_dist, setup_dist and dist_init, and so on.
MARKER_GROUPS = guarded(MARKER_BYTES, (b"caler", b"DataParallel", b"dist", b"ddp"))
# What a set-up module must say to be worth checking for writes after its set-up (DDL006).
WRITE_WORDS = ("open(", "save", "SummaryWriter", "wandb", "FileHandler", "imwrite", "savefig")
WRITE_BYTES = tuple(w.encode() for w in WRITE_WORDS)
# What a module that starts processes must say; a file without any is never parsed for it.
SPAWN_WORDS = tuple(f"{w}(".encode() for w in SPAWN_CALLS)
# What a file that sets up or uses data parallelism says (in_ddp_program).
DDP_WORDS = ("init_process_group", "DistributedDataParallel", "DDP(", "DistributedSampler")
DDP_WORDS += ("init_dist", "setup_dist", "dist_init", "ddp_setup", "setup_ddp", "init_ddp")
DDP_BYTES = tuple(w.encode() for w in DDP_WORDS)
# Looking for who spawns a function stops after this many files: a monorepo is not a project.
MAX_SCAN_FILES = 20_000
ROOT_MARKERS = ("pyproject.toml", ".git", "setup.py", "setup.cfg")
INSTALL_DIRS = ("site-packages", "dist-packages")


# A reference to a callee as written: ("name", local) or ("attr", receiver, attribute); or
# (SUPER, method, class) for `super().method()` in a method of that class.
Ref = tuple[str, ...]
SUPER = "super"


@dataclass
class FuncFacts:
    """One function's own effects, the local functions it calls, and its imported callees."""

    direct: set[str] = field(default_factory=set)
    local: set[str] = field(default_factory=set)
    external: list[Ref] = field(default_factory=list)
    # What the methods a constructor runs call (see _merge_part): read for all but samplers.
    part_local: set[str] = field(default_factory=set)
    part_external: list[Ref] = field(default_factory=list)
    # Functions of the module this one starts as processes (`mp.spawn(_distributed_worker,
    # ...)`, detectron2's launch): what they do to the group is the workers' (see effects).
    spawned: set[str] = field(default_factory=set)


@dataclass
class ModuleFacts:
    """What the project needs of one module: its top-level functions' facts and its import
    tables. No tree is kept: live trees make every garbage collection slower."""

    path: str
    functions: Mapping[str, FuncFacts]  # a dict, or a FunctionTable that reads on demand
    from_imports: dict[str, tuple[str, int, str]]
    module_imports: dict[str, str]
    # False: only the imports were kept (no effect words); its functions are read on demand
    # when a call reaches one and the module imports a module that has effect words.
    complete: bool = True


def callee_ref(call: ast.Call) -> Ref | None:
    func = call.func
    if isinstance(func, ast.Name):
        return ("name", func.id)
    if isinstance(func, ast.Attribute):
        recv = dotted(func.value)
        if recv is not None:
            return ("attr", recv, func.attr)
    if isinstance(func, ast.Call):
        return _picked_by_name(func)
    return None


def callee_label(call: ast.Call) -> str:
    """The callee as a message names it: `utils.init_distributed_mode`, or
    `common_utils.init_dist_*` for one picked by a name made at run time."""
    ref = callee_ref(call)
    func = call.func
    if ref is None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        built = dotted(func.value.func)  # `TrainOptions().parse_and_setup`
        return f"{built}().{func.attr}" if built else "a helper"
    if ref is None:
        return "a helper"
    return ref[1] if ref[0] == "name" else f"{ref[1]}.{ref[2]}"


def _picked_by_name(call: ast.Call) -> Ref | None:
    """`getattr(common_utils, "init_dist_%s" % launcher)`: one of the module's functions whose
    names start so (`init_dist_pytorch`, `init_dist_slurm`), as ("attr", module, "init_dist_*")."""
    if getattr(call.func, "id", None) != "getattr" or len(call.args) < 2:
        return None
    recv, name = dotted(call.args[0]), call.args[1]
    if isinstance(name, ast.BinOp) and isinstance(name.op, ast.Mod | ast.Add):
        name = name.left
    elif isinstance(name, ast.JoinedStr) and name.values:
        name = name.values[0]
    elif isinstance(name, ast.Call) and getattr(name.func, "attr", None) == "format":
        name = name.func.value  # type: ignore[attr-defined]
    if recv is None or not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return None
    prefix = name.value.split("%", 1)[0].split("{", 1)[0]
    return ("attr", recv, prefix + "*") if len(prefix) >= 4 else None


# A module without any of these words has no effect of its own; it is only read further when it
# is a package's __init__ (re-exports). This keeps a large project cheap to follow.
EFFECT_WORDS = ("init_process_group", "destroy_process_group", "set_device")
EFFECT_WORDS += ("builtins.print", "builtin__.print", "sys.stdout")
# The words below add facts about data and logging, not links of a set-up chain (see _scan).
# A helper that builds a shuffling DistributedSampler (`get_loader(args)`, ViT-style data
# modules), or that calls set_epoch for its caller (`train_one_epoch(loader, epoch)`).
EFFECT_WORDS += ("DistributedSampler", "set_epoch")
# A helper that writes a file (`save_model(args, model)`): on every rank unless it tests the rank.
EFFECT_WORDS += ("torch.save", "FileHandler", "SummaryWriter", "shutil.copy")
# `open(path, "w")`: the write modes, not "open(" (most modules read files; few write them).
EFFECT_WORDS += tuple(
    f"{q}{m}{q}" for m in ("w", "wb", "a", "ab", "w+", "a+", "wt", "at") for q in "'\""
)
EFFECT_WORDS += ("np.save", "numpy.save")
# Logging set up by the rank (`basicConfig(level=INFO if rank in [-1, 0] else WARN)`) in a
# helper: the program's log calls are then rank-0-only (`set_logging(rank)`, yolov5/yolov7).
EFFECT_WORDS += ("basicConfig", "setLevel")
EFFECT_WORDS += ("wandb.init",)  # a helper that starts the tracker's run (setup_wandb(args))
EFFECT_WORDS += (".spawn(", "start_processes")  # a launcher of the project (see DIRECT)
EFFECT_WORDS += ("Process(target",)  # one that starts `mp.Process(target=run)` per GPU
EFFECT_WORDS += ("save_image(", "savefig(", "imwrite(", "imsave(")  # a helper saving images
# A helper reading the launcher's rank (`is_master()` as `int(os.environ["RANK"]) == 0`): a
# rank test that holds before the group is up too (SAT's guard of its log set-up).
EFFECT_WORDS += tuple(f"{q}{k}{q}" for k in ("RANK", "LOCAL_RANK") for q in "'\"")
EFFECT_BYTES = tuple(w.encode() for w in EFFECT_WORDS)
# A class at the top of a module, told from the text of a module left unparsed (see put_off).
CLASS_LINE = re.compile(r"^class\s", re.M)
LOG_SETUP = ("basicConfig", "setLevel")


# The single-process samplers a helper picks when not distributed (`RandomSampler(ds) if
# local_rank == -1 else DistributedSampler(ds)`).
PLAIN_SAMPLERS = ("RandomSampler", "SequentialSampler", "SubsetRandomSampler")
PLAIN_SAMPLERS += ("WeightedRandomSampler", "BatchSampler", "DistributedSampler")


# Calls that save an image or a figure (torchvision's save_image, matplotlib's savefig,
# OpenCV's and imageio's imwrite).
IMAGE_WRITERS = frozenset({"save_image", "savefig", "imwrite", "imsave"})


def image_path(call: ast.Call) -> ast.expr | None:
    """The file an image writer writes: save_image's second argument (`fp`), else the first."""
    if _last(call.func) == "save_image":
        return call.args[1] if len(call.args) > 1 else kwarg(call, "fp")
    return call.args[0] if call.args else kwarg(call, "fname")


def _writes_one_image(call: ast.Call, func: ast.AST) -> bool:
    """A helper's image save to one path whoever calls (`save_image(samples, f"{out}/step_
    {step}.png")`): not a path named by the rank, nor one per data item of a loop."""
    path = image_path(call)
    return (
        path is not None
        and not any(_names_rank(e) for e in _built_from(path, func))  # `img_id` from the rank
        and not per_item_path(path, _loops_around(call, func))
    )


# Made in a helper, these open a file of their own (a log file, TensorBoard's event file).
FILE_MAKERS = ("FileHandler", "RotatingFileHandler", "TimedRotatingFileHandler", "SummaryWriter")


def _fixed_file(call: ast.Call) -> bool:
    """A log file named by a constant (`logging.FileHandler("log.txt")`), not by what the
    helper is handed."""
    first = call.args[0] if call.args else kwarg(call, "filename") or kwarg(call, "log_dir")
    return isinstance(first, ast.Constant) and isinstance(first.value, str) and bool(first.value)


# A save target named so is a buffer in memory, not a file (`torch.save(sd, buffer)`).
IN_MEMORY_WORDS = ("buf", "mem", "bytes", "stream")


# Library calls that write a file, and which argument is its path: numpy's savers, shutil's
# copies (`shutil.copyfile(config, join(out, "config.json"))`, a config copied into the run).
LIBRARY_WRITES = {("np", n): 0 for n in ("save", "savez", "savez_compressed", "savetxt")}
LIBRARY_WRITES |= {("numpy", n): 0 for n in ("save", "savez", "savez_compressed", "savetxt")}
LIBRARY_WRITES |= {("shutil", n): 1 for n in ("copy", "copyfile", "copy2")}
LIBRARY_WRITES |= {("OmegaConf", "save"): 1}  # `OmegaConf.save(config, path)` (xcodec's config)


def written_path(call: ast.Call) -> ast.expr | None:
    """The path a writing call of _writes_file's kinds writes."""
    func = call.func
    if isinstance(func, ast.Attribute) and open_mode(call) is None:
        at = 1 if func.attr == "save" and dotted(func.value) == "torch" else None
        at = LIBRARY_WRITES.get((dotted(func.value) or "", func.attr), at)
        return call.args[at] if at is not None and len(call.args) > at else None
    return opened_path(call)


def _writes_file(call: ast.Call, within: ast.AST | None = None) -> bool:
    """`torch.save(...)` to a path, `open(path, "w"/"a")`, numpy's savers and shutil's copies
    (and the shell's): a helper that writes a file. The mode may be a parameter of the
    function `within` whose default writes (dnnlib's `Logger(file_name, file_mode="w")` doing
    `open(file_name, file_mode)`)."""
    if shell_copy(call) or _loguru_file_sink(call):
        return True
    func = call.func
    if isinstance(func, ast.Attribute):
        if (dotted(func.value) or "", func.attr) in LIBRARY_WRITES:
            return written_path(call) is not None
        if func.attr == "save" and dotted(func.value) == "torch" and len(call.args) > 1:
            target = (dotted(call.args[1]) or "").lower()
            return not any(w in target for w in IN_MEMORY_WORDS)
    mode = open_mode(call) or _h5_mode(call)
    if mode is not None and "devnull" in (dotted(opened_path(call)) or ""):
        return False  # `sys.stdout = open(os.devnull, "w")`: silencing, not writing a file
    if mode is not None:
        if isinstance(mode, ast.Name) and within is not None:
            mode = _parameter_default(within, mode.id)
        # `open(tmp, "ab" if resume else "wb")`: it writes either way (torch-harmonics)
        modes = [mode.body, mode.orelse] if isinstance(mode, ast.IfExp) else [mode]
        return any(
            isinstance(m, ast.Constant) and any(c in str(m.value) for c in "wax") for m in modes
        )
    return False


def _loguru_file_sink(call: ast.Call) -> bool:
    """`logger.add(log_dir.joinpath("output.txt"), ...)`: loguru's sink that is a file (WavCaps'
    set_logger), not a stream (`sys.stdout`) nor a function."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "add" and call.args):
        return False
    if dotted(func.value) not in ("logger", "loguru.logger"):
        return False
    sink = call.args[0]
    if isinstance(sink, ast.Constant):
        return isinstance(sink.value, str)
    if isinstance(sink, ast.JoinedStr):
        return True
    return isinstance(sink, ast.Call) and _last(sink.func) in ("joinpath", "join", "Path")


SHELL_COPIES = ("cp", "mv", "rsync")


def shell_copy(call: ast.Call) -> bool:
    """`os.system(f"cp {a} {b}")` or `subprocess.run(["cp", src, dst])`: a file copied by the
    shell (VoiceStar's resume, aardvark's trainer saving its launch script), a write like
    shutil's, unless the command names the rank."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and call.args):
        return False
    where, what = func.value.id, func.attr
    if not (
        (where == "os" and what == "system")
        or (where == "subprocess" and what in ("run", "call", "check_call", "Popen"))
    ):
        return False
    command = call.args[0]
    if isinstance(command, (ast.List, ast.Tuple)) and command.elts:
        head = command.elts[0]
        word = head.value if isinstance(head, ast.Constant) else None
    elif isinstance(command, ast.JoinedStr) and command.values:
        head = command.values[0]
        word = head.value.split(" ", 1)[0] if isinstance(head, ast.Constant) else None
    elif isinstance(command, ast.Constant) and isinstance(command.value, str):
        word = command.value.split(" ", 1)[0]
    else:
        word = None
    return word in SHELL_COPIES and not _names_rank(command)


def _h5_mode(call: ast.Call) -> ast.expr | None:
    """The mode of an HDF5 file opened as `h5py.File(path, "w")` (or `h5.File` after a local
    `import h5py as h5`); None for any other call."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "File"):
        return None
    if len(call.args) > 1:
        return call.args[1]
    return next((k.value for k in call.keywords if k.arg == "mode"), None)


def open_mode(call: ast.Call) -> ast.expr | None:
    """The mode given to `open(path, mode)`, `io.open` or `codecs.open(path, mode="w")`
    (positional or keyword); None for any other call, or an open without a mode (a read)."""
    func = call.func
    if _pathlib_open(call):
        return call.args[0]  # `fname.open("wt")`: pathlib's open takes the mode first
    if not (
        (isinstance(func, ast.Name) and func.id == "open")
        or (
            isinstance(func, ast.Attribute)
            and func.attr == "open"
            and dotted(func.value) in OPENERS
        )
    ):
        return None
    return call.args[1] if len(call.args) > 1 else kwarg(call, "mode")


OPENERS = ("io", "codecs")


def _pathlib_open(call: ast.Call) -> bool:
    """`path.open("w")`: a method `open` whose first argument is a mode, as pathlib's is."""
    first = call.args[0] if call.args else None
    return (
        isinstance(call.func, ast.Attribute)
        and call.func.attr == "open"
        and isinstance(first, ast.Constant)
        and isinstance(first.value, str)
        and bool(first.value)
        and set(first.value) <= set("rwaxbt+")
    )


def opened_path(call: ast.Call) -> ast.expr | None:
    """The file an open call names: `open(path, ...)`, or the receiver of `path.open("w")`."""
    if _pathlib_open(call):
        return call.func.value  # type: ignore[attr-defined]
    return call.args[0] if call.args else None


def per_item_path(path: ast.expr | None, loops: list[ast.AST]) -> bool:
    """The written path is built from a data item of an enclosing loop over a loader (`for img,
    name in loader: np.save(join(out, f"{name}.npy"), ...)`, or an inner loop over the batch's
    own fields): each rank writes the items of its own shard, not one shared file. The counter
    of `enumerate(loader)` is no data item (`ckpt_{step}.pt` is one file for every rank)."""
    fors = [loop for loop in loops if isinstance(loop, ast.For)]
    if path is None:
        return False
    used = {n.id for n in ast.walk(path) if isinstance(n, ast.Name)}
    # `for day in range(rank, days, world_size)`: the loop itself deals the items out by rank.
    dealt = [loop for loop in fors if _names_rank(loop.iter)]
    if not dealt and not any(_iterates_loader(loop.iter) for loop in fors):
        return False
    for loop in fors:  # one step back: `save_path = join(out, name + ".npz")` in the loop
        for node in ast.walk(loop):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in used for t in node.targets
            ):
                used |= {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
    if any(
        used & {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)} for loop in dealt
    ):
        return True
    return any(used & _item_names(loop) for loop in fors)


def _iterates_loader(expr: ast.expr) -> bool:
    """`loader`, `enumerate(tqdm(train_loader))`, `log_every(data_loader, 10)`."""
    return any(
        "loader" in (dotted(n) or "").lower()
        for n in ast.walk(expr)
        if isinstance(n, (ast.Name, ast.Attribute))
    )


def _item_names(loop: ast.For) -> set[str]:
    """The names a loop binds to data: all of its target, less enumerate's counter; none of
    a `range()` loop's (a metric or step index)."""
    if isinstance(loop.iter, ast.Call) and getattr(loop.iter.func, "id", None) == "range":
        return set()
    target: ast.AST = loop.target
    if (
        isinstance(loop.iter, ast.Call)
        and getattr(loop.iter.func, "id", None) == "enumerate"
        and isinstance(target, ast.Tuple)
        and target.elts
    ):
        target = ast.Tuple(elts=target.elts[1:])
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _enclosing_in(node: ast.AST, func: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(ancestor, the child of it on the way down to node), innermost first, within func. A
    write is rare, and the writes of one function come one after another: its parent map is
    built once and kept for the next."""
    if _PARENTS[0] is not func:
        parents: dict[int, ast.AST] = {}
        for parent in ast.walk(func):
            for child in ast.iter_child_nodes(parent):
                parents[id(child)] = parent
        _PARENTS[:] = [func, parents]
    parents = _PARENTS[1]
    out: list[tuple[ast.AST, ast.AST]] = []
    child, parent = node, parents.get(id(node))
    while parent is not None:
        out.append((parent, child))
        if parent is func:
            break
        child, parent = parent, parents.get(id(parent))
    return out


_PARENTS: list = [None, {}]  # the last function's parent map (see _enclosing_in)


def _loops_around(node: ast.AST, func: ast.AST) -> list[ast.AST]:
    """The `for` loops of func whose bodies hold node."""
    return [
        a
        for a, child in _enclosing_in(node, func)
        if isinstance(a, ast.For) and child is not a.iter
    ]


WRITES_IF = "writes_if:"  # a fact: writes only when the caller passes this parameter


def _optional_switch(node: ast.AST, func: ast.AST) -> str | None:
    """`writes_if:<param>:<position>` for a write under `if param:` / `if param is not None:`
    where the parameter defaults to None or False (NVAE's `create_exp_dir(path,
    scripts_to_save=None)` copies the scripts only when handed them)."""
    args = getattr(func, "args", None)
    if not isinstance(args, ast.arguments):
        return None
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    if positional[:1] in (["self"], ["cls"]):
        positional = positional[1:]  # a method's callers pass what follows
    for test_holder, child in _enclosing_in(node, func):
        if not isinstance(test_holder, ast.If) or child not in test_holder.body:
            continue
        test = test_holder.test
        if isinstance(test, ast.Compare):
            test = none_tested(test, given=True)
        if not isinstance(test, ast.Name):
            continue
        default = _parameter_default(func, test.id)
        if isinstance(default, ast.Constant) and default.value in (None, False):
            where = positional.index(test.id) if test.id in positional else -1
            return f"{WRITES_IF}{test.id}:{where}"
    name = _returned_early_without(node, func)
    if name is not None:
        where = positional.index(name) if name in positional else -1
        return f"{WRITES_IF}{name}:{where}"
    return None


def _returned_early_without(node: ast.AST, func: ast.AST) -> str | None:
    """The parameter (defaulting to None or False) whose absence makes the function return
    before the write (mvdust3r's `pcd_render(..., tgt=None)`: `if tgt is None: return
    images`, then the video file): the write happens only when it is handed one."""
    body = getattr(func, "body", [])
    holder = next((stmt for stmt in body if node in ast.walk(stmt)), None)
    if holder is None:
        return None
    for stmt in body[: body.index(holder)]:
        if not (isinstance(stmt, ast.If) and not stmt.orelse and stmt.body):
            continue
        if not isinstance(stmt.body[-1], (ast.Return, ast.Raise)):
            continue
        test = stmt.test
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        else:
            test = none_tested(test, given=False)
        if isinstance(test, ast.Name):
            default = _parameter_default(func, test.id)
            if isinstance(default, ast.Constant) and default.value in (None, False):
                return test.id
    return None


def may_write(effects: Iterable[str]) -> bool:
    """A callee with these effects writes a file, always or when handed a switch."""
    return any(e == "writes" or e.startswith(WRITES_IF) for e in effects)


def passes_switch(call: ast.Call, facts: FuncFacts | None) -> bool:
    """The call hands the callee a parameter one of its writes depends on (see
    _optional_switch)."""
    if facts is None or ("rank_aware" in facts.direct and WRITES_ANYWAY not in facts.direct):
        return False
    for fact in facts.direct:
        if not fact.startswith(WRITES_IF):
            continue
        name, _, where = fact[len(WRITES_IF) :].rpartition(":")
        at = int(where)
        value = next((k.value for k in call.keywords if k.arg == name), None)
        if value is None and 0 <= at < len(call.args):
            value = call.args[at]
        if value is not None and not (is_const(value, None) or is_const(value, False)):
            return True
    return False


def _parameter_default(func: ast.AST, name: str) -> ast.expr | None:
    """The default of the function's parameter `name` (None: no such parameter or default)."""
    args = getattr(func, "args", None)
    if not isinstance(args, ast.arguments):
        return None
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    with_default = positional[len(positional) - len(args.defaults) :]
    defaults = dict(zip(with_default, args.defaults, strict=True))
    keywords = zip(args.kwonlyargs, args.kw_defaults, strict=True)
    defaults.update((a.arg, d) for a, d in keywords if d is not None)
    return defaults.get(name)


RANK_PARAM = "rank_param:"  # a fact: `<name>:<position>`, a rank test on a parameter (see below)


def _rank_parameter(test: ast.AST, func: ast.AST) -> str | None:
    """`if local_rank != 0: return` where `local_rank` is a parameter that defaults to 0
    (NeuralSpeech's `torch_save(model, path, optimizer=None, local_rank=0)`): a caller that
    leaves it out gets rank 0's branch on every rank. The fact names the parameter and its
    position, for the call to be read (see passes_parameter)."""
    names = [n for n in ast.walk(test) if isinstance(n, ast.Name)]
    if len(names) != 1:
        return None
    default = _parameter_default(func, names[0].id)
    if not (isinstance(default, ast.Constant) and default.value == 0):
        return None
    args = func.args  # type: ignore[attr-defined]
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    where = positional.index(names[0].id) if names[0].id in positional else -1
    return f"{RANK_PARAM}{names[0].id}:{where}"


def passes_parameter(call: ast.Call, fact: str, prefix: str) -> bool:
    """The call hands over the parameter a `<prefix><name>:<position>` fact names."""
    name, _, where = fact[len(prefix) :].rpartition(":")
    at = int(where)
    return any(k.arg == name for k in call.keywords) or 0 <= at < len(call.args)


# Environment variables that name this process's rank before any group exists.
ENV_RANKS = frozenset({"RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID", "PMI_RANK"})
ENV_RANKS |= {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}
GLOBAL_ENV_RANKS = frozenset({"RANK", "SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_RANK"})


def reads_env_rank(node: ast.AST) -> bool:
    """`os.environ["RANK"]`, `os.environ.get("RANK")`, `os.getenv("SLURM_PROCID")`: the rank
    from the launcher, right before the group is set up too (lingua's `get_is_master()`)."""
    if type(node) is ast.Subscript:
        key = node.slice
        return (
            type(key) is ast.Constant
            and key.value in ENV_RANKS
            and dotted(node.value) == "os.environ"  # type: ignore[attr-defined]
        )
    if type(node) is ast.Call and node.args:  # type: ignore[attr-defined]
        key = node.args[0]  # type: ignore[attr-defined]
        return (
            type(key) is ast.Constant
            and key.value in ENV_RANKS
            and dotted(node.func) in ("os.environ.get", "os.getenv")  # type: ignore[attr-defined]
        )
    return False


def _env_key(node: ast.AST) -> object:
    """The variable a `reads_env_rank` expression reads: `"RANK"` of `os.environ["RANK"]`."""
    if type(node) is ast.Subscript:
        return getattr(node.slice, "value", None)
    return getattr(node.args[0], "value", None) if type(node) is ast.Call and node.args else None


def _names_rank(expr: ast.AST) -> bool:
    """A rank in the expression (`args.rank`, `local_rank`, `get_rank()`), or a timestamp to
    the microsecond (`f"output_{time.time()}.mp4"`, mvdust3r's renders): a name of its own."""
    for node in ast.walk(expr):
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
        if "rank" in name.lower():
            return True
    return timestamp(expr)


# What turns a timestamp back into one the processes share (minutes, seconds, a whole number).
COARSE_TIME = frozenset({"localtime", "gmtime", "strftime", "fromtimestamp", "int", "round"})


def timestamp(expr: ast.AST) -> bool:
    """`time.time()` / `time.time_ns()` in the expression, as it is (`f"output_{time.time()}"`):
    a value no two processes share; not once made coarse (`strftime(..., localtime(
    time.time()))`, GeoMVSNet's log name, is the same minute on every rank)."""
    coarse = {
        id(a)
        for n in ast.walk(expr)
        if type(n) is ast.Call and _last(n.func) in COARSE_TIME  # type: ignore[attr-defined]
        for a in ast.walk(n)
        if a is not n
    }
    return any(
        type(n) is ast.Call
        and dotted(n.func) in ("time.time", "time.time_ns")  # type: ignore[attr-defined]
        and id(n) not in coarse
        for n in ast.walk(expr)
    )


def _per_rank_file(call: ast.Call, func: ast.AST) -> bool:
    """The written path names the rank (`f"results{args.rank}.json"`, or a name of the
    function assigned such a path, `savepath = ....format(get_rank())`): one file per rank."""
    path = written_path(call)
    if path is None:
        return False
    parts = _built_from(path, func)
    if any(_names_rank(e) or any(reads_env_rank(n) for n in ast.walk(e)) for e in parts):
        return True  # `join(work_dir, f"seg_results_{process_id}.pkl")`, a few lines back
    if not isinstance(path, ast.Name):
        return False
    values = [
        n.value
        for n in ast.walk(func)
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == path.id for t in n.targets)
    ]
    return bool(values) and all(_names_rank(v) for v in values)


def _per_rank_log_file(call: ast.Call, func: ast.AST) -> bool:
    """`logging.basicConfig(filename=...)` of a path built with the rank, a few assignments
    back (CvT's `'{}_{}_rank{}.txt'.format(phase, time, rank)` joined to the output folder):
    a log per rank, set up by a helper that decides per rank, as icefall's does."""
    path = kwarg(call, "filename")
    return path is not None and any(_names_rank(e) for e in _built_from(path, func))


def _built_from(path: ast.expr, func: ast.AST) -> list[ast.expr]:
    """The path and what its names were assigned in the function, a few assignments back."""
    assigned: dict[str, list[ast.expr]] = {}
    for n in ast.walk(func):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(n.value)
    todo, seen = [path], []
    while todo and len(seen) < 8:
        expr = todo.pop()
        if any(expr is s for s in seen):
            continue  # `x = str(x)`: a name built from itself
        seen.append(expr)
        todo += [
            v for n in ast.walk(expr) if isinstance(n, ast.Name) for v in assigned.get(n.id, [])
        ]
    return seen


LOG_SUFFIXES = (".log", ".txt")
# A fact: the function opens a log file whose name it spells out itself (see
# _log_file_named_here); judged at each call by what the caller hands it, as "opens_log" is.
NAMES_LOG = "names_log"


def _level_by_rank(call: ast.Call) -> bool:
    """`basicConfig(level=logging.INFO if is_main() else logging.WARN, ...)`, or
    `setLevel(INFO if rank < 1 else WARNING)`: the other ranks' lines are dropped."""
    return any(
        isinstance(a, ast.IfExp) and _rank_test(a)
        for a in (*call.args, *(k.value for k in call.keywords))
    )


def wandb_off(call: ast.Call) -> bool:
    """`wandb.init(mode="disabled")`, or a mode chosen by the rank (`mode="online" if rank ==
    0 else "disabled"`): no run, or one on rank 0 alone."""
    mode = kwarg(call, "mode")
    if isinstance(mode, ast.IfExp):
        return _rank_test(mode)
    return isinstance(mode, ast.Constant) and mode.value == "disabled"


def _names_its_log(call: ast.Call, func: ast.AST) -> bool:
    """A log file named here (see _log_file_named_here) that the function always opens: one
    opened only when a parameter asks for it (`if to_file:`, `if output_dir is not None:`) is
    the caller's choice, judged at the call by what it hands over, as any other log file."""
    return _log_file_named_here(call, func) and _optional_switch(call, func) is None


def _log_file_named_here(call: ast.Call, func: ast.AST) -> bool:
    """A log file whose name the helper spells out itself, whatever folder it is handed
    (`FileHandler(join(save_dir, f"log-{date}.txt"))`, or `basicConfig(filename=path)` with
    `path` built from `'{}_{}.log'.format(cfg_name, time_str)`): one file, which every rank
    that calls the helper opens. Not a name built with the rank (one log per rank)."""
    path = kwarg(call, "filename") or (call.args[0] if call.args else kwarg(call, "log_dir"))
    if path is None:
        return False
    parts = _built_from(path, func)
    if any(_names_rank(e) or any(reads_env_rank(n) for n in ast.walk(e)) for e in parts):
        return False
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith(LOG_SUFFIXES)
        for e in parts
        for n in ast.walk(e)
    )


def _shuffling_train_sampler(call: ast.Call, func: ast.AST) -> bool:
    """A DistributedSampler that shuffles (not `shuffle=False`), in a function not named for
    evaluation (`get_val_loader`): a training loader's sampler, whose caller owes set_epoch."""
    if any(k.arg == "shuffle" and getattr(k.value, "value", None) is False for k in call.keywords):
        return False
    name = getattr(func, "name", "").lower()
    return not any(w in name for w in ("val", "test", "eval"))


def passes_rank(call: ast.Call) -> bool:
    """A rank-like name or a rank-0 test among a call's arguments (`level=INFO if rank in
    [-1, 0] else WARN`, `INFO if is_main() else WARN`)."""
    args = [*call.args, *(k.value for k in call.keywords)]
    return any(_names_rank(a) for a in args) or any(
        isinstance(n, ast.IfExp) and _rank_test(n) for a in args for n in ast.walk(a)
    )


def _imports(tree: ast.Module) -> tuple[dict[str, tuple[str, int, str]], dict[str, str]]:
    """The import tables: `from m import x` and `import m` / `import m.sub as x`, at module
    level and at the top of its functions (`def setup(): from utils import misc`, an import
    put off until called); a module-level name wins."""
    froms: dict[str, tuple[str, int, str]] = {}
    modules: dict[str, str] = {}
    local = [s for f in tree.body if isinstance(f, FUNC_TYPES) for s in f.body]
    for at_top, nodes in ((True, tree.body), (False, local)):
        for node in nodes:
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    key = import_key(a, froms)
                    if at_top or key not in froms:
                        froms[key] = (node.module or "", node.level, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    key = a.asname or a.name.split(".", 1)[0]
                    if at_top or key not in modules:
                        modules[key] = a.name if a.asname else key
    return froms, modules


def facts_of(
    tree: ast.Module, path: str, with_functions: bool = True, source: str | bytes | None = None
) -> ModuleFacts:
    """A module's import tables and, when it has effect words, its top-level functions' facts.
    With the module's source, each function's facts are read only when first asked (most never
    are), from that function's own lines (see FunctionTable)."""
    froms, modules = _imports(tree)
    mod = ModuleFacts(path, {}, froms, modules, complete=with_functions)
    if with_functions:
        imported = froms.keys() | modules.keys()
        if source is not None:
            mod.functions = FunctionTable(tree, source, imported)
        else:
            mod.functions = _all_function_facts(tree, imported)
    return mod


def _all_function_facts(tree: ast.Module, imported: set[str]) -> dict[str, FuncFacts]:
    defs = _top_level_defs(tree)
    names = set(defs)
    parts = _constructor_parts(tree, defs)
    return {
        name: _function_facts(func, names, imported, parts.get(id(func), ()))
        for name, func in defs.items()
    }


class FunctionTable(Mapping[str, FuncFacts]):
    """A module's top-level functions (see _top_level_defs) by name, each one's facts read on
    first ask by parsing only its own lines (for a class, its `__init__` and the methods that
    may run from there): a module is remembered in full for the few of its functions another
    module calls, and walking all of them cost more than the rest of the cross-file reading.
    A `Class.method` key reads one method the same way (see method_target).
    The source is kept, not the tree (torch's trees would take 1.4 GB). Should a piece not
    parse on its own, the whole module is read again once."""

    def __init__(self, tree: ast.Module, source: str | bytes, imported: set[str]) -> None:
        self._source, self._imported = source, imported
        self._spans: dict[str, tuple[int, int]] = {}
        # class name -> its methods (name, first line, last line), in order; and the names of
        # its bases as written (`BaseTrainer`, `base.Trainer`), for the methods it inherits.
        # A class without an `__init__` of its own is no entry of the table: its constructor
        # is its base's (see Project.resolve).
        self._methods: dict[str, list[tuple[str, int, int]]] = {}
        self._bases: dict[str, list[str]] = {}
        for node in tree.body:  # the same choice of node per name as _top_level_defs
            if isinstance(node, FUNC_TYPES):
                self._spans[node.name] = _lines_of(node)
                self._methods.pop(node.name, None)
                self._bases.pop(node.name, None)
            elif isinstance(node, ast.ClassDef) and node.name not in self._spans:
                methods = [(f.name, *_lines_of(f)) for f in node.body if isinstance(f, FUNC_TYPES)]
                self._methods[node.name] = methods
                self._bases[node.name] = [b for b in map(dotted, node.bases) if b]
                if any(m[0] == "__init__" for m in methods):
                    self._spans[node.name] = _lines_of(node)
        self._read: dict[str, FuncFacts] = {}
        self._all_lines: list[bytes] | None = None

    def __contains__(self, name: object) -> bool:
        return name in self._spans

    def __iter__(self) -> Iterator[str]:
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)

    def __getitem__(self, name: str) -> FuncFacts:
        facts = self._read.get(name)
        if facts is None:
            if "." in name:  # `Class.method` (see method_target)
                facts = self._read[name] = self._method_facts(*name.split(".", 1))
            elif name not in self._spans:
                raise KeyError(name)
            else:
                facts = self._read[name] = self._facts_of(name)
        return facts

    def has_method(self, cls: str, method: str) -> bool:
        """Whether the class defines this method itself."""
        return any(m == method for m, _, _ in self._methods.get(cls, ()))

    def source_bytes(self) -> bytes:
        data = self._source
        return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data

    def methods(self, cls: str) -> list[str]:
        return [m for m, _, _ in self._methods.get(cls, ())]

    def is_class(self, name: str) -> bool:
        return name in self._methods

    def bases(self, cls: str) -> list[str]:
        return self._bases.get(cls, [])

    def _method_facts(self, cls: str, method: str) -> FuncFacts:
        """One method of a class, parsed alone under a bare class header (its last definition,
        as Python keeps); its bare-name calls are the module's functions."""
        if not any(m == method for m, _, _ in self._methods.get(cls, ())):
            raise KeyError(f"{cls}.{method}")
        # With the methods it runs through `self.m()` (torch-harmonics' downloader: its
        # prepare_dataset writes in self._download_file and self.convert_dataset).
        try:
            header = ast.parse(self._class_piece(cls, method)).body[0]
        except (SyntaxError, ValueError, RecursionError, MemoryError, IndexError):
            return FuncFacts()
        defs = [f for f in getattr(header, "body", ()) if isinstance(f, FUNC_TYPES)]
        func = next((f for f in reversed(defs) if f.name == method), None)
        if func is None:
            return FuncFacts()
        parts = _self_parts(defs, func)
        return _of_class(_function_facts(func, set(self._spans), self._imported, parts), cls)

    def _facts_of(self, name: str) -> FuncFacts:
        methods = self._methods.get(name)
        text = self._lines(*self._spans[name]) if methods is None else self._class_piece(name)
        try:
            piece = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            piece = None
        defs = _top_level_defs(piece) if piece is not None else {}
        func = defs.get(name)
        if func is None or (func.name == "__init__") != (methods is not None):
            return self._whole().get(name) or FuncFacts()
        parts = _constructor_parts(piece, defs).get(id(func), ())
        facts = _function_facts(func, set(self._spans), self._imported, parts)
        return facts if methods is None else _of_class(facts, name)

    def _class_piece(self, name: str, start: str = "__init__") -> bytes:
        """A class of only the methods its `__init__` (or `start`) may run through `self.m()`,
        found by their text (a superset of the calls _self_parts follows), under a bare header:
        a large class costs the lines of its constructor, not all of its own."""
        methods = self._methods[name]
        wanted, todo = {start}, [start]
        while todo:
            called = todo.pop()
            for method, first, last in methods:
                if method != called:
                    continue
                for word in SELF_CALL.findall(self._lines(first, last)):
                    if (callee := word.decode("utf-8", "replace")) not in wanted:
                        wanted.add(callee)
                        todo.append(callee)
        return _under_class(name, [self._lines(f, e) for m, f, e in methods if m in wanted])

    def _lines(self, first: int, last: int) -> bytes:
        if self._all_lines is None:
            data = self._source
            if isinstance(data, str):
                data = data.encode("utf-8", "surrogatepass")
            # bytes split at \n, \r and \r\n only: the line breaks the parser counts
            self._all_lines = data.splitlines(keepends=True)
        return b"".join(self._all_lines[first - 1 : last])

    def _whole(self) -> dict[str, FuncFacts]:
        try:
            tree = ast.parse(self._source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return {}
        facts = _all_function_facts(tree, self._imported)
        self._read.update(facts)
        return facts


def _self_method(expr: ast.AST | None) -> bool:
    """`self.run`: a method of the object itself, handed over (not called)."""
    return (
        type(expr) is ast.Attribute
        and type(expr.value) is ast.Name  # type: ignore[attr-defined]
        and expr.value.id == "self"  # type: ignore[attr-defined]
    )


def _of_class(facts: FuncFacts, cls: str) -> FuncFacts:
    """A method's `super().m()` calls, told which class they were written in: the call runs
    the method of that class's bases (see Project.resolve)."""
    for refs in (facts.external, facts.part_external):
        refs[:] = [(*r, cls) if r[0] == SUPER and len(r) == 2 else r for r in refs]
    # A method it starts as processes (LOTClass's `mp.spawn(self.mcp_dist, ...)`) is a method
    # of the same class.
    facts.spawned = {f"{cls}.{n[5:]}" if n.startswith("self.") else n for n in facts.spawned}
    return facts


def _under_class(name: str, methods: list[bytes]) -> bytes:
    """Method lines under a bare class header: a piece that parses on its own."""
    return b"".join([f"class {name}:\n".encode(), *methods])


SELF_CALL = re.compile(rb"\bself\s*\.\s*(\w+)\s*\(")


def _lines_of(node: ast.AST) -> tuple[int, int]:
    """The first and last line of a definition, its decorators included."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])  # type: ignore[attr-defined]
    return first, node.end_lineno or node.lineno  # type: ignore[attr-defined]


def _constructor_parts(tree: ast.Module, defs: dict[str, ast.AST]) -> dict[int, list[ast.AST]]:
    """For each class's `__init__` in defs, the methods of its class it runs through `self.m()`
    (`self._init_dist()`, `self._build_writers()`), followed from method to method: building the
    object runs them too."""
    inits = {id(f) for f in defs.values()}
    out: dict[int, list[ast.AST]] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        methods = {f.name: f for f in cls.body if isinstance(f, FUNC_TYPES)}
        init = methods.get("__init__")
        if init is None or id(init) not in inits:
            continue
        seen = _self_parts(list(methods.values()), init)
        if seen:
            out[id(init)] = seen
    return out


def _self_parts(defs: list[ast.AST], start: ast.AST) -> list[ast.AST]:
    """The methods (of `defs`, one class's) that `start` runs through `self.m()`, followed from
    method to method."""
    methods = {f.name: f for f in defs if isinstance(f, FUNC_TYPES)}
    seen: list[ast.AST] = []
    todo = [start]
    while todo:
        for node in _nodes(todo.pop()):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
                and (m := methods.get(node.func.attr)) is not None
                and m is not start
                and m not in seen
            ):
                seen.append(m)
                todo.append(m)
    return seen


def _top_level_defs(tree: ast.Module) -> dict[str, ast.AST]:
    """The module's top-level functions by name, and each class's `__init__` under the class's
    name: calling `DepthDataLoader(config, "train")` runs that `__init__`."""
    defs: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, FUNC_TYPES):
            defs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, FUNC_TYPES) and item.name == "__init__":
                    defs.setdefault(node.name, item)
    return defs


def _nodes(root: ast.AST) -> list[ast.AST]:
    """Every node under root but names and constants (leaves no caller asks for): a plain
    stack over the child fields, several times faster than ast.walk."""
    out: list[ast.AST] = []
    stack = [root]
    node_type, leaves = ast.AST, (ast.Name, ast.Constant)
    while stack:
        node = stack.pop()
        out.append(node)
        for name in child_fields(type(node)):
            value = getattr(node, name, None)
            for v in value if isinstance(value, list) else (value,):
                if isinstance(v, node_type) and type(v) not in leaves:
                    stack.append(v)
    return out


def _calls_and_imports(root: ast.AST) -> tuple[list[ast.Call], list[ast.Import | ast.ImportFrom]]:
    """The calls and the imports under root, in _nodes' order: the same stack, a third faster
    for keeping nothing else (may_reach_init walks every module that writes and imports a
    set-up module; in torch, 400 of them)."""
    calls: list[ast.Call] = []
    imports: list[ast.Import | ast.ImportFrom] = []
    stack = [root]
    pop, push, fields_of = stack.pop, stack.append, CHILD_FIELDS.get
    call_type, from_type, import_type = ast.Call, ast.ImportFrom, ast.Import
    leaves, node_type, list_type = (ast.Name, ast.Constant, type(None)), ast.AST, list
    while stack:
        node = pop()
        t = type(node)
        if t is call_type:
            calls.append(node)  # type: ignore[arg-type]
        elif t is from_type or t is import_type:
            imports.append(node)  # type: ignore[arg-type]
            continue  # only names below
        for name in fields_of(t) or child_fields(t):
            value = getattr(node, name)
            if type(value) is list_type:
                for v in value:
                    if type(v) not in leaves and isinstance(v, node_type):
                        push(v)
            elif type(value) not in leaves and isinstance(value, node_type):
                push(value)
    return calls, imports


def _last(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _call_fact(
    facts: FuncFacts,
    node: ast.Call,
    func: ast.AST,
    names: set[str],
    imported,
    aliases: dict[str, str] | None = None,
) -> bool:
    """Record what one call in `func` does; True when it is a sampler other than the plain
    ones (see _finish). `aliases`: names the function binds to a set-up call (see _aliases)."""
    callee = node.func
    last = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
    if aliases and last in aliases and type(callee) is ast.Name:
        last = aliases[last]
    effect = DIRECT.get(last)
    if effect:
        if effect != "destroy" or destroys_default_group(node):  # not of a subgroup
            facts.direct.add(effect)
        first = node.args[0] if node.args else None
        if effect == "spawns" and isinstance(first, ast.Name) and first.id in names:
            facts.spawned.add(first.id)
        elif effect == "spawns" and _self_method(first):
            facts.spawned.add(dotted(first) or "")  # `mp.spawn(self.mcp_dist, ...)`: _of_class
    elif last == "Process" and type(target := kwarg(node, "target")) is ast.Name:
        # `mp.Process(target=run, ...)` started per GPU (old fairseq's multiprocessing_train)
        if target.id in names:  # type: ignore[union-attr]
            facts.direct.add("spawns")
            facts.spawned.add(target.id)  # type: ignore[union-attr]
    elif last in LOG_SETUP:
        ranked = passes_rank(node) or _per_rank_log_file(node, func) or _level_by_rank(node)
        facts.direct.add("rank_logging" if ranked else "log_setup")
        if not ranked and _names_its_log(node, func):
            facts.direct.add(NAMES_LOG)
    elif last in ("get_rank", "get_local_rank", "get_global_rank"):
        facts.direct.add("reads_rank")
        if isinstance(callee, ast.Name) and callee.id in names:
            facts.local.add(callee.id)  # the file's own (lingua's: from the environment)
        elif (ref := callee_ref(node)) is not None and ref[1].split(".", 1)[0] in imported:
            facts.external.append(ref)
    elif last in ("get", "getenv") and reads_env_rank(node):
        facts.direct.add("env_rank")
    elif last == "set_epoch":
        facts.direct.add("set_epoch")
    elif last == "backward":
        facts.direct.add("trains")  # `train_one_epoch(...)`: the caller's loop is a training one
    elif last == "init" and dotted(callee) == "wandb.init":
        if not wandb_off(node):
            facts.direct.update(("writes", "tracks"))  # a tracker run: one per call
            _unless_rank_guarded(facts, node, func)
    elif (
        _writes_file(node, func)
        and not _per_rank_file(node, func)
        and not per_item_path(written_path(node), _loops_around(node, func))
    ):
        facts.direct.add(_optional_switch(node, func) or "writes")
        _unless_rank_guarded(facts, node, func)
    elif last in IMAGE_WRITERS and _writes_one_image(node, func):
        facts.direct.add(_optional_switch(node, func) or "writes")  # `save_image(grid, path)`
        _unless_rank_guarded(facts, node, func)
    elif last in FILE_MAKERS and _fixed_file(node):
        facts.direct.add("writes")  # `FileHandler("log.txt")`: one file, whoever calls
        _unless_rank_guarded(facts, node, func)
    elif last in FILE_MAKERS and _names_its_log(node, func):
        facts.direct.add(NAMES_LOG)
    elif last in FILE_MAKERS:
        facts.direct.add("opens_log")  # judged at the call, by the file it is given
    elif last == "DistributedSampler" and _shuffling_train_sampler(node, func):
        facts.direct.add("dist_sampler")
    elif last.endswith("Sampler") and last not in PLAIN_SAMPLERS:
        return not _off_the_distributed_path(node, func)
    elif isinstance(callee, ast.Name) and callee.id in names:
        facts.local.add(callee.id)
    elif (ref := callee_ref(node)) is not None and (
        ref[1].split(".", 1)[0] in imported or _through_a_star_import(callee, imported)
    ):
        facts.external.append(ref)
        if _hands_a_file_name(node) and _optional_switch(node, func) is None:
            facts.direct.add(HANDS_PATH + ref[-1])
    elif _calls_super(callee):
        facts.external.append((SUPER, last))  # its class is added by _of_class
    return False


# A fact: a function that tests the rank somewhere also writes where no rank test of its own
# holds (OpenUnReID's Logger: `if self.rank == 0: mkdir(...)`, then `open(fpath, "w")` on
# every rank): its test guards other lines, not this write.
WRITES_ANYWAY = "writes_anyway"


def _unless_rank_guarded(facts: FuncFacts, node: ast.AST, func: ast.AST) -> None:
    if not _rank_guarded_in(node, func):
        facts.direct.add(WRITES_ANYWAY)


def _rank_guarded_in(node: ast.AST, func: ast.AST) -> bool:
    """Under any test of func's own but "was I handed this" (one may be a rank flag set
    elsewhere), or after an early exit on a rank test. A node of another function (a method a
    constructor runs) counts as guarded: its own facts judge it."""
    chain = _enclosing_in(node, func)
    if not chain or chain[-1][0] is not func:
        return True
    params = (
        {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
        if isinstance(func, FUNC_TYPES)
        else set()
    )
    for holder, child in chain:
        # Any test but "was I handed this" (`if fpath is not None:`) may be a rank flag set
        # elsewhere (`if args.should_save:`): only a write under none is judged.
        if (
            isinstance(holder, (ast.If, ast.IfExp))
            and child is not holder.test
            and not _asks_for_a_parameter(holder.test, params)
        ):
            return True
        for field_name in ("body", "orelse", "finalbody"):
            stmts = getattr(holder, field_name, None)
            if not (isinstance(stmts, list) and child in stmts):
                continue
            for stmt in stmts[: stmts.index(child)]:
                if isinstance(stmt, ast.If) and _rank_test(stmt) and exits(stmt.body):
                    return True  # `if rank != 0: return`
    return False


def _guards_a_write(node: ast.If) -> bool:
    """A rank test with a write (or a saving helper's call) in one of its branches: the function
    decides who writes, so its other writes are taken as meant for every rank."""
    return any(
        isinstance(c, ast.Call)
        and (
            _writes_file(c)
            or _last(c.func) in IMAGE_WRITERS
            or _last(c.func) in FILE_MAKERS
            or any(w in _last(c.func).lower() for w in ("save", "write", "dump", "log"))
        )
        for branch in (node.body, node.orelse)
        for stmt in branch
        for c in ast.walk(stmt)
    )


def _asks_for_a_parameter(test: ast.expr, params: set[str]) -> bool:
    """`if fpath:` / `if fpath is not None:` on a parameter of the function."""
    if isinstance(test, ast.Compare):
        test = none_tested(test, given=True)
    return isinstance(test, ast.Name) and test.id in params


# A fact: the function hands a file name it spells itself to this callee (`write_json(cfg,
# save_dir / "config.json")`): if the callee is a plain writer, the write is this function's.
HANDS_PATH = "hands_path:"
FILE_SUFFIXES = (".json", ".yaml", ".yml", ".txt", ".log", ".pkl", ".pt", ".pth", ".csv", ".npy")


def _hands_a_file_name(call: ast.Call) -> bool:
    return any(w in _last(call.func).lower() for w in ("write", "save", "dump")) and any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith(FILE_SUFFIXES)
        for a in [*call.args, *(k.value for k in call.keywords)]
        for n in ast.walk(a)
    )


BUILTIN_NAMES = frozenset(dir(builtins))


def _through_a_star_import(callee: ast.expr, imported: Iterable[str]) -> bool:
    """A bare name, neither a builtin nor imported by name, in a module with `from tools
    import *` (UniMVSNet's `init_distributed_mode(args)`): it may come through the star."""
    return (
        type(callee) is ast.Name
        and callee.id not in BUILTIN_NAMES  # type: ignore[attr-defined]
        and any(k.startswith("*") for k in imported)
    )


def _off_the_distributed_path(node: ast.AST, func: ast.AST) -> bool:
    """In the else of `if args.dist_train and args.ngpu > 1:` (NeuralSpeech's balanced sampler
    for one process): not what the DDP path gets, so no rival to its DistributedSampler."""
    return any(
        isinstance(holder, ast.If) and child in holder.orelse and else_runs_one_process(holder.test)
        for holder, child in _enclosing_in(node, func)
    )


def _aliases(nodes: list[ast.AST]) -> dict[str, str]:
    """Names bound only to set-up calls (`init_fn = dist_c10d.init_process_group` in one
    branch, the no-c10d one in the other, then `init_fn(...)`: old fairseq's
    distributed_init): the name the calls stand for."""
    bound: dict[str, set[str]] = {}
    for node in nodes:
        if type(node) is not ast.Assign or len(node.targets) != 1:  # type: ignore[attr-defined]
            continue
        target, value = node.targets[0], node.value  # type: ignore[attr-defined]
        if type(target) is not ast.Name:
            continue
        sides = [value.body, value.orelse] if type(value) is ast.IfExp else [value]
        for side in sides:
            last = _last(side) if type(side) in (ast.Attribute, ast.Name) else ""
            bound.setdefault(target.id, set()).add(last)
    return {
        name: next(iter(lasts))
        for name, lasts in bound.items()
        if len(lasts) == 1 and next(iter(lasts)) in DIRECT
    }


def _calls_super(func: ast.AST) -> bool:
    """`super().m` (or `super(Cls, self).m`)."""
    return (
        type(func) is ast.Attribute
        and type(func.value) is ast.Call  # type: ignore[attr-defined]
        and getattr(func.value.func, "id", None) == "super"  # type: ignore[attr-defined]
    )


def _rank_test(node: ast.If | ast.IfExp) -> bool:
    return (
        implies_rank0(node.test)
        or implies_rank0(node.test, True)
        or only_off_rank0(node.test)  # `if args.distributed and args.gpu != 0:`
    )


def _finish(facts: FuncFacts, func: ast.AST, other_samplers: bool) -> FuncFacts:
    if rank0_function(func):
        facts.direct.add("rank_aware")  # save_on_master, @rank_zero_only
        facts.direct.discard(WRITES_ANYWAY)
    if "reads_rank" in facts.direct and {"log_setup", "opens_log"} & facts.direct:
        # A logging set-up that asks the rank itself (icefall's setup_logger: a log file per
        # rank): the program's log calls are meant per rank.
        facts.direct.add("rank_logging")
    if other_samplers:
        # One sampler among others chosen by a parameter (infinite, sharded, per epoch): which
        # one the caller gets, and whether it needs set_epoch, cannot be told from here.
        facts.direct.discard("dist_sampler")
    return facts


def _function_facts(
    func: ast.AST, names: set[str], imported: set[str], parts: Iterable[ast.AST] = ()
) -> FuncFacts:
    """One walk of a function's body (and of the methods a constructor runs, `parts`): its
    direct effects, local callees, imported callees (`imported`: the module's import names)."""
    facts = FuncFacts()
    other_samplers = False
    ranked: set[str] = set()  # names given a value chosen by the rank (`level = INFO if ...`)
    setups: list[ast.Call] = []
    switches: list[ast.Assign] = []  # `x.attr = True` (see rank0_switches)
    rank_ifs: list[ast.If] = []
    for root in (func, *parts):
        into = facts if root is func else FuncFacts()
        nodes = _nodes(root)
        aliases = _aliases(nodes)
        for node in nodes:
            if isinstance(node, ast.Call):
                other_samplers |= _call_fact(into, node, func, names, imported, aliases)
                if root is func and _last(node.func) in LOG_SETUP:
                    setups.append(node)
            elif isinstance(node, ast.Assign):
                if root is func and switches_on(node):
                    switches.append(node)
                if (global_attr := _global_rank_attribute(node)) is not None:
                    into.direct.add(GLOBAL_RANK_ATTR + global_attr)
                if root is func and _distributed_switched_off(node):
                    into.direct.add("init_fallback")
                if any(dotted(t) in PRINT_TARGETS for t in node.targets):
                    into.direct.add("silence_print")
                elif (
                    len(node.targets) == 1
                    and type(node.targets[0]) is ast.Name
                    and isinstance(node.value, ast.IfExp)
                    and _rank_test(node.value)
                ):
                    ranked.add(node.targets[0].id)
            elif type(node) is ast.Subscript and reads_env_rank(node):
                into.direct.add("env_rank")
            elif isinstance(node, ast.If) and _rank_test(node):
                into.direct.add("rank_aware")
                if root is func:
                    rank_ifs.append(node)
                    if (param := _rank_parameter(node.test, func)) is not None:
                        into.direct.add(param)
        if into is not facts:
            _merge_part(facts, into)
    if any(_guards_a_write(node) for node in rank_ifs):
        facts.direct.discard(WRITES_ANYWAY)  # its rank tests are about writing: trusted
    body = getattr(func, "body", [])
    for attr in rank0_switches(rank_ifs, switches, [s for s in switches if s in body]):
        # `if opt.rank == 0: opt.log = True else: opt.log = False` in the set-up helper
        # (HybrIK's init_dist): the caller's `if opt.log:` is a rank-0 test
        facts.direct.add(RANK_FLAG + attr)
    if ranked and any(_passes_one_of(c, ranked) for c in setups):
        # `level = logging.INFO if rank in {-1, 0} else logging.WARNING`, then
        # `logging.basicConfig(level=level, ...)`: the program's log calls are rank 0's
        facts.direct.add("rank_logging")
    return _finish(facts, func, other_samplers)


RANK_FLAG = "rank_flag:"  # a fact: this attribute is switched on on rank 0 only
# A fact: the helper sets this attribute of what it is handed to the global rank
# (`args.rank = dist.get_rank()` in LEAD's set_env): the caller's `args.rank` holds it after.
GLOBAL_RANK_ATTR = "global_rank_attr:"


def _global_rank_attribute(node: ast.Assign) -> str | None:
    """`args.rank = dist.get_rank()` / `torch.distributed.get_rank()`, or the launcher's
    global rank read from the environment (`args.rank = int(os.environ["RANK"])`, dl-tools'
    dist_setup_launch): the attribute's name."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Attribute):
        return None
    value = node.value
    if type(value) is ast.Call and _last(value.func) == "int" and len(value.args) == 1:
        value = value.args[0]
    if reads_env_rank(value) and _env_key(value) in GLOBAL_ENV_RANKS:
        return node.targets[0].attr
    if not (isinstance(value, ast.Call) and _last(value.func) in ("get_rank", "get_global_rank")):
        return None
    if value.args or value.keywords:
        return None  # `get_rank(group)`: a rank within a subgroup
    return node.targets[0].attr


SPAWNED = "spawned_"  # a fact of a launcher: its started workers `init` / `destroy` a group
SPAWNED_INIT = f"{SPAWNED}init"


def _distributed_switched_off(node: ast.AST) -> bool:
    """`args.distributed = False` in a set-up helper (the MAE/DeiT `init_distributed_mode`'s
    "Not using distributed mode" branch): it may return without making a group."""
    return switches_off(node) and "distributed" in node.targets[0].attr.lower()  # type: ignore[attr-defined]


def switches_on(node: ast.AST) -> bool:
    """`opt.log = True`: an attribute switched on."""
    return _switches(node, True)


def _switches(node: ast.AST, value: bool) -> bool:
    """`x.attr = True` (or False): an attribute set to that constant."""
    return (
        type(node) is ast.Assign
        and len(node.targets) == 1
        and type(node.targets[0]) is ast.Attribute
        and type(node.value) is ast.Constant
        and node.value.value is value
    )


def rank0_switches(
    ifs: Iterable[ast.If], switches: Iterable[ast.Assign], defaults: Iterable[ast.Assign] = ()
) -> set[str]:
    """The attributes every one of whose switch-ons (see switches_on) lies directly in the
    branch of one of these `if`s that only rank 0 runs (its body, or its else); or that are
    switched on unconditionally (`defaults`: `self.verbose = True` in the function's own body)
    and switched off in a branch only the other ranks run (`if args.gpu != 0: self.verbose =
    False`)."""
    on_rank0: set[int] = set()
    turned_off: set[str] = set()
    for node in ifs:
        if implies_rank0(node.test):
            on_rank0.update(id(n) for n in node.body)
        elif implies_rank0(node.test, True):
            on_rank0.update(id(n) for n in node.orelse)
        if only_off_rank0(node.test):
            off = node.body
        else:
            off = node.orelse if else_off_rank0(node.test) else []
        turned_off.update(n.targets[0].attr for n in off if switches_off(n))  # type: ignore[attr-defined]
    default_ids = {id(d) for d in defaults}
    attrs: dict[str, bool] = {}
    for s in switches:
        attr = s.targets[0].attr  # type: ignore[attr-defined]
        by_default = id(s) in default_ids
        ok = (by_default and attr in turned_off) or (not by_default and id(s) in on_rank0)
        attrs[attr] = attrs.get(attr, True) and ok
    return {attr for attr, only_rank0 in attrs.items() if only_rank0}


def switches_off(node: ast.AST) -> bool:
    """`self.verbose = False`: an attribute switched off."""
    return _switches(node, False)


def _passes_one_of(call: ast.Call, names: set[str]) -> bool:
    return any(
        type(arg) is ast.Name and arg.id in names
        for arg in (*call.args, *(k.value for k in call.keywords))
    )


OBJECT_OWN = frozenset({"dist_sampler", "set_epoch"})


def _merge_part(facts: FuncFacts, part: FuncFacts) -> None:
    """A method the constructor runs adds what it does to the group and the files; not the
    samplers it builds, whose epochs the object's other methods may well set."""
    facts.direct |= part.direct - OBJECT_OWN
    facts.part_local |= part.local
    facts.part_external += part.external


def find_root(paths: list[str]) -> str:
    """The nearest folder above the common root of the paths holding pyproject.toml or .git;
    else that common root. An installed package (a folder in site-packages) is its own root:
    its imports resolve through sys.path, not through whatever repository holds the Python
    install (pyenv is a git checkout: climbing there would scan every installed package)."""
    absolute = [os.path.abspath(p) for p in paths]
    common = os.path.commonpath(absolute) if absolute else os.getcwd()
    if os.path.isfile(common):
        common = os.path.dirname(common)
    here = common
    while True:
        if os.path.basename(here) in INSTALL_DIRS:
            return common
        if any(os.path.exists(os.path.join(here, m)) for m in ROOT_MARKERS):
            return here
        up = os.path.dirname(here)
        if os.path.basename(up) in INSTALL_DIRS:
            return here
        if up == here:
            return common
        here = up


WORD = re.compile(rb"\w+")
IMPORT_FROM = re.compile(
    rb"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M
)
IMPORT_PLAIN = re.compile(rb"^[ \t]*import[ \t]+([\w., \t]+)", re.M)


def _imported_words(data: bytes) -> set[bytes]:
    """Every identifier on the lines that import (`from core import comm` -> core, comm), and
    on the lines a parenthesised import goes on to: a search for the literal word, several
    times faster than a pattern anchored at line starts."""
    lines = []
    at = data.find(b"import")
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        if b"(" in data[at:end] and b")" not in data[at:end]:  # `from . import (` + lines
            close = data.find(b")", end)
            end = len(data) if close < 0 else close
        lines.append(data[start:end])
        at = data.find(b"import", end)
    return set(WORD.findall(b" ".join(lines)))


# The last name of what a spawn call may start: its first argument, a `target=` or `fn=`
# keyword, or the function a `partial(...)` wraps (a superset of what spawn_target reads).
SPAWNED_NAMES = (
    re.compile(rb"\b(?:spawn|start_processes|Process|partial)\(\s*(?:[\w.]+\.)?(\w+)"),
    re.compile(rb"\b(?:target|fn)\s*=\s*(?:[\w.]+\.)?(\w+)"),
)
IMPORT_ALIAS = re.compile(rb"\b(\w+)[ \t]+as[ \t]+(\w+)")


def _started_names(data: bytes) -> tuple[set[bytes], list[tuple[bytes, bytes]]]:
    """The names a file's spawn calls may start, and its import aliases (see _may_start)."""
    started = {name for pattern in SPAWNED_NAMES for name in pattern.findall(data)}
    return started, IMPORT_ALIAS.findall(data)


def _may_start(started: tuple[set[bytes], list[tuple[bytes, bytes]]], names: set[str]) -> bool:
    """Whether a file's spawn calls may start one of these functions, by name or through an
    import alias (`from workers import run as go`): a file whose spawn calls all start other
    functions (every recipe's own `run`) is not parsed to find out."""
    called, aliases = started
    wanted = {n.encode() for n in names}
    if called & wanted:
        return True
    return any(a in called and o in wanted for o, a in aliases)


def _defines(mod: ModuleFacts, name: str) -> bool:
    """A function of the module, or a class of it (with or without an `__init__`)."""
    return name in mod.functions or _is_class(mod, name)


def _is_class(mod: ModuleFacts, name: str) -> bool:
    table = mod.functions
    return isinstance(table, FunctionTable) and table.is_class(name)


def _has_effect_words(data: bytes) -> bool:
    return any(w in data for w in EFFECT_BYTES)


class Project:
    """The modules under one root folder, read on demand."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self._facts: dict[str, ModuleFacts | None] = {}
        self._modules: dict[tuple[str, str, int], str | None] = {}
        self._effects: dict[tuple[str, str], frozenset[str]] = {}
        self._spawners: list[tuple[str, bytes]] | None = None
        self._links: set[bytes] | None = None  # names of modules with effect words
        # name -> the words on the import lines of each other module of that name
        self._stems: dict[bytes, list[set[bytes]]] = {}
        self._judged: dict[bytes, bool] = {}
        self._may_set_up: dict[str, bool] = {}  # module path -> may a method of it set up
        self._spawned: dict[str, set[tuple[str, str]]] = {}
        self._started: dict[str, tuple[set[bytes], list[tuple[bytes, bytes]]]] = {}
        self._isfile: dict[str, bool] = {}  # candidate files of imports, looked at once each
        self._upwards: dict[tuple[str, str, bool], str | None] = {}  # see _upward
        self._listings: dict[str, frozenset[str] | None] = {}  # see _listing
        self._unjudged: dict[str, tuple[ModuleFacts, str]] = {}  # see remember
        self._put_off: dict[str, str] = {}  # see put_off
        # Project classes a DDP program builds on every rank after its set-up (see note_built)
        self.built: dict[tuple[str, str], tuple[str, int]] = {}
        self._marked: dict[str, bool] = {}  # from the scan: whether a file holds a marker
        self._last_link: tuple[str, bool] | None = None  # see links_to
        # The files that set up or use data parallelism, with their bytes, and the modules of
        # the project they import (two steps deep), found on demand (in_ddp_program).
        self._ddp_files: list[tuple[str, bytes]] = []
        self._ddp_modules: set[str] | None = None
        # module -> the DDP files that import it, one or two steps away (see in_ddp_program)
        self.ddp_importers: dict[str, set[str]] = {}
        self.class_modules: set[str] = set()  # linted modules that define a class
        self._imports: dict[str, set[str]] = {}  # see _imports_of
        self._set_epoch = False  # whether any file of the project says set_epoch
        self._module_names: set[str] | None = None
        self._names_walked = False
        self._global_ranks: dict[tuple[str, str], bool] = {}
        self._builders: dict[str, list[tuple[str, bytes]]] = {}
        self.parsed: set[str] = set()  # files parsed here without error: no need to again
        self.trees: dict[str, ast.Module] = {}  # of those, the ones the checks will read
        self.pending: set[str] = set()  # files the engine is still to lint (absolute paths)
        self.given: frozenset[str] = frozenset()  # every file the engine lints (absolute)
        self.indexes: dict[str, ModuleIndex | None] = {}  # see index_of

    # -- files --------------------------------------------------------------------------------
    def _inside(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    def module_path(self, importer: str, module: str, level: int) -> str | None:
        """The file `import module` (with `level` leading dots) names, seen from importer:
        relative to its package, else from its own folder (how `python script.py` runs) or
        any folder above it up to the root, else from a `src/` or `lib/` folder of those."""
        key = (os.path.dirname(importer), module, level)
        if key not in self._modules:
            self._modules[key] = self._find(importer, module, level)
        return self._modules[key]

    def _find(self, importer: str, module: str, level: int) -> str | None:
        parts = [p for p in module.split(".") if p]
        names = self._names()
        if not level and parts and names is not None and parts[0] not in names:
            return None  # `import torch`: no folder or module of the project has that name
        here = os.path.dirname(os.path.abspath(importer))
        if level:
            for _ in range(level - 1):
                here = os.path.dirname(here)
            return self._found_in(here, parts)
        if not self._inside(here):
            return None
        # The folders from here up to the root, then the folders scripts put on sys.path
        # themselves: a src layout, and the `lib/` that HRNet-style `_init_paths.py` files add.
        return self._upward(here, module, parts, False) or self._upward(here, module, parts, True)

    def _upward(self, folder: str, module: str, parts: list[str], extra: bool) -> str | None:
        """The first of folder, its parent, ... the root holding the module (with `extra`, in
        their src/ or lib/), remembered per folder: the scripts of one tree share the walk up."""
        chain: list[str] = []
        found: str | None = None
        while True:
            key = (folder, module, extra)
            if key in self._upwards:
                found = self._upwards[key]
                break
            chain.append(folder)
            if extra:
                found = self._found_in(os.path.join(folder, "src"), parts) or self._found_in(
                    os.path.join(folder, "lib"), parts
                )
            else:
                found = self._found_in(folder, parts)
            if found is not None or folder == self.root:
                break
            folder = os.path.dirname(folder)
            if not self._inside(folder):
                break
        for seen in chain:
            self._upwards[(seen, module, extra)] = found
        return found

    def _found_in(self, base: str, parts: list[str]) -> str | None:
        entries = self._listing(base) if parts else None
        if entries is not None:
            # Most candidates: the folder's listing has neither the package nor the module.
            head = parts[0]
            if head not in entries and (len(parts) > 1 or head + ".py" not in entries):
                return None
        stem = os.path.join(base, *parts)
        cands = (stem + ".py",) if parts else ()
        for cand in (*cands, os.path.join(stem, "__init__.py")):
            if self._inside(cand) and self._exists(cand):
                return cand
        return None

    def _exists(self, file: str) -> bool:
        """os.path.isfile, with the folder's listing asked first: most candidates lie in
        folders that do not exist (torch: 65,000 candidates in 37,000 folders, 378 files), and
        the listings of the folders above answer those without a call to the disk."""
        found = self._isfile.get(file)
        if found is None:
            folder, name = os.path.split(file)
            entries = self._listing(folder)
            absent = entries is not None and name not in entries
            found = self._isfile[file] = not absent and os.path.isfile(file)
        return found

    def _listing(self, folder: str) -> frozenset[str] | None:
        """The names in a folder of the project (empty: no such folder), from its parent's
        listing when that lacks it; None when it cannot be listed (ask the disk instead)."""
        if folder in self._listings:
            return self._listings[folder]
        parent, name = os.path.split(folder)
        above = self._listing(parent) if folder != self.root and self._inside(folder) else None
        if above is not None and name not in above:
            entries: frozenset[str] | None = frozenset()
        else:
            try:
                entries = frozenset(os.listdir(folder))
            except (FileNotFoundError, NotADirectoryError):
                entries = frozenset()
            except OSError:
                entries = None
        self._listings[folder] = entries
        return entries

    def _names(self) -> set[str] | None:
        """The names of the project's folders and modules, from one walk of the tree (no file
        read): most imports (torch, numpy, os) name none of them and need no look on disk.
        None for a monorepo (more than MAX_SCAN_FILES files): look on disk each time."""
        if not self._names_walked:
            self._names_walked = True
            names: set[str] | None = set()
            seen = 0
            for _folder, dirs, files in os.walk(self.root):
                dirs[:] = [d for d in dirs if not skip_dir(d)]
                names.update(dirs)
                names.update(f[:-3] for f in files if f.endswith(".py"))
                seen += len(files)
                if seen > MAX_SCAN_FILES:
                    names = None
                    break
            self._module_names = names
        return self._module_names

    def facts(self, path: str) -> ModuleFacts | None:
        if path not in self._facts:
            if path in self._put_off:
                self._read_put_off(path)
            held = self._unjudged.pop(path, None)
            self._facts[path] = self._read(path) if held is None else self._judge(*held)
        return self._facts[path]

    def put_off(self, path: str, source: str) -> None:
        """A file the engine had nothing to check in, left unparsed: parsed (and kept as
        `remember` keeps a linted file) only when another module reaches it."""
        key = os.path.abspath(path)
        self.pending.discard(key)
        if CLASS_LINE.search(source):
            self.class_modules.add(key)
        if key not in self._facts and key not in self._unjudged:
            self._put_off[key] = source

    def _read_put_off(self, path: str) -> None:
        source = self._put_off.pop(path)
        try:
            tree = ast.parse(source, filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return  # _read says what an unparsable module holds, as for any other
        self.parsed.add(path)
        self._unjudged[path] = (facts_of(tree, path, source=source), source)

    def _judge(self, mod: ModuleFacts, source: str) -> ModuleFacts:
        """A remembered module as _read would keep it: without effect words, its imports only."""
        if any(w in source for w in EFFECT_WORDS) or self.links_to(source):
            return mod
        return ModuleFacts(mod.path, {}, mod.from_imports, mod.module_imports, complete=False)

    def _read(self, path: str) -> ModuleFacts | None:
        if unreadable_reason(path) is not None:
            return None
        try:
            data = read_bytes(path)
            links = None if _has_effect_words(data) else self._links_to(data)
            effects = links is not False
            if not (effects or path.endswith("__init__.py")):
                return ModuleFacts(path, {}, {}, {})  # no effect words: nothing to follow
            tree = ast.parse(data, filename=path)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        self.parsed.add(path)
        if path in self.pending and (
            any(w in data for w in TREE_WORDS)
            or (
                any(w in data for w in WRITE_BYTES)
                and (self._links_to(data) if links is None else links)
            )
        ):
            self.trees[path] = tree  # the engine will want it: hand it over, parse once
        # A package's __init__ without effect words is read for its re-exports only; its
        # functions (torch/__init__.py has hundreds) would add nothing.
        return facts_of(tree, path, with_functions=effects, source=data)

    def take_tree(self, path: str) -> ast.Module | None:
        """The tree of a module read here that the engine now lints (given once)."""
        return self.trees.pop(os.path.abspath(path), None)

    def remember(self, tree: ast.Module, path: str, source: str) -> None:
        """Keep the facts of a file the engine parsed anyway, so an import of it costs nothing.
        A file without effect words keeps only its imports (they may re-export one); its
        functions are read again only if a call reaches one (see _complete). The others keep
        their source, for the few functions another module calls (see FunctionTable): reading
        all of their functions here cost more than the rest of the cross-file reading, and
        keeping only their imports cost the corpus trees more (icefall's recipes call into
        most of their modules after those were linted, and each was parsed again)."""
        key = os.path.abspath(path)
        self.pending.discard(key)
        if any(type(n) is ast.ClassDef for n in tree.body):
            self.class_modules.add(key)
        if key not in self._facts and key not in self._unjudged:
            # Whether it has effect words is asked when another module first reaches it
            # (_judge): most modules of a project are never reached.
            self._unjudged[key] = (facts_of(tree, key, source=source), source)

    def _complete(self, mod: ModuleFacts) -> ModuleFacts:
        """A module kept without its functions, read in full when it imports a module of the
        project that has effect words: `setup()` in config.py calling `distributed.enable()`
        is one link of a chain (script -> config -> distributed) that ends in an init."""
        full = ModuleFacts(mod.path, {}, mod.from_imports, mod.module_imports)
        try:
            data = read_bytes(mod.path)
            if self._links_to(data):
                full = facts_of(ast.parse(data, filename=mod.path), mod.path)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            pass
        self._facts[mod.path] = full
        return full

    def links_to(self, source: str) -> bool:
        """Whether this text imports a module of the project that sets a group up (or one that
        leads to such a module). The last answer is kept: the engine asks twice of a module
        that writes (_writing_link, then remember)."""
        if self._last_link is not None and self._last_link[0] is source:
            return self._last_link[1]
        found = "import" in source and self._links_to(source.encode())
        self._last_link = (source, found)
        return found

    def _links_to(self, data: bytes) -> bool:
        """Whether a module's import lines name a module of the project that has effect words,
        or that imports one (and so on: a chain of modules ending in an init)."""
        if self._links is None:
            self._scan()
        words = _imported_words(data)
        return bool(words & self._links) or any(
            self._stem_links(w, 1) for w in words & self._stems.keys()
        )

    def _stem_links(self, stem: bytes, depth: int) -> bool:
        """Whether a module of this name (any of the project's) is a link of such a chain, from
        the import lines the scan kept: a walk breadth first from it, at most MAX_DEPTH steps
        from the importer, each name's answer kept. (A depth-first walk that kept "no" for a
        name met again on a cycle made the answer depend on which name a set gave first.)"""
        if stem in self._judged:
            return self._judged[stem]
        links = self._links or set()
        seen, frontier, found = {stem}, [stem], False
        for _ in range(depth, MAX_DEPTH + 1):
            ahead: list[bytes] = []
            for name in frontier:
                for words in self._stems.get(name, ()):
                    if words & links:
                        found = True
                        break
                    ahead += [w for w in words & self._stems.keys() if w not in seen]
                    seen.update(ahead)
                if found:
                    break
            if found or not ahead:
                break
            frontier = ahead
        self._judged[stem] = found
        return found

    def _scan(self) -> None:
        """One walk over the project's files, on demand: which may start processes (kept with
        their bytes: few and small), the names of the modules that set a group up or tear it
        down (a package's `__init__.py` by its folder's name), and what the modules without
        effect words import."""
        self._spawners, self._links = [], set()
        seen = 0
        for folder, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not skip_dir(d))
            for name in sorted(n for n in names if n.endswith(".py")):
                seen += 1
                if seen > MAX_SCAN_FILES:
                    break
                file = os.path.join(folder, name)
                try:
                    if unreadable_reason(file) is not None:
                        continue
                    data = read_bytes(file)
                except OSError:
                    continue
                if any(w in data for w in SPAWN_WORDS):
                    self._spawners.append((file, data))
                stem = (os.path.basename(folder) if name == "__init__.py" else name[:-3]).encode()
                # Every DDP word holds a marker: a file without markers needs no look for them.
                self._marked[file] = marked = any_word(data, MARKER_GROUPS)
                if marked and any(w in data for w in DDP_BYTES):
                    self._ddp_files.append((file, data))
                self._set_epoch = self._set_epoch or b"set_epoch" in data
                if (marked and b"init_process_group" in data) or b"destroy_process_group" in data:
                    self._links.add(stem)  # what chains lead to (set_device alone: too common)
                else:
                    self._stems.setdefault(stem, []).append(_imported_words(data))

    def note_built(self, path: str, name: str, site: str, line: int) -> None:
        """Class `name` of `path` is built on every rank (by `site`, on `line`): its constructor's
        writes are judged in its own file once every file is linted (built_classes)."""
        self.built.setdefault((path, name), (site, line))

    def marked(self, path: str) -> bool | None:
        """Whether the file's bytes hold one of MARKERS, when the scan has read them (None
        before it runs, or for a file it did not reach)."""
        return self._marked.get(os.path.abspath(path)) if self._links is not None else None

    def mentions_set_epoch(self) -> bool:
        """Whether any file of the project says `set_epoch` (from the one scan)."""
        if self._links is None:
            self._scan()
        return self._set_epoch

    def builds_global_rank(self, name: str, path: str) -> bool:
        """Whether a file of the project that sets up DDP and imports this module assigns the
        attribute a rank built from the node's (`args.rank = args.rank * ngpus_per_node +
        gpu`): the trainer module it hands that `args` then holds the global rank there."""
        key = (name, os.path.abspath(path))
        if key not in self._global_ranks:
            self._global_ranks[key] = any(
                key[1] in self._imported_files(file, data)
                for file, data in self._global_rank_builders(name)
            )
        return self._global_ranks[key]

    def _global_rank_builders(self, name: str) -> list[tuple[str, bytes]]:
        """The DDP files of the project that assign `name` a product plus something."""
        if name not in self._builders:
            if self._links is None:
                self._scan()
            needle = name.encode()
            line = re.compile(rb"(?m)^[ \t]*" + re.escape(needle) + rb"[ \t]*=(?!=)([^\n#]*)")
            self._builders[name] = [
                (file, data)
                for file, data in self._ddp_files
                if needle in data
                and any(
                    b"*" in m.group(1) and b"+" in m.group(1) and b"%" not in m.group(1)
                    for m in line.finditer(data)
                )
            ]
        return self._builders[name]

    def in_ddp_program(self, path: str) -> bool:
        """Whether a module of the project is run by a data-parallel program: a file that sets
        up or uses DDP imports it, or imports a module that imports it (a trainer class in
        `models/fixmatch.py`, a loop in `engine/trainer.py` reached through a package's
        `__init__`). Imports are read from the import lines and resolved to files, as
        `module_path` does; nothing else of those files is parsed."""
        if self._ddp_modules is None:
            if self._links is None:
                self._scan()
            ddp = {file for file, _ in self._ddp_files}
            wanted: dict[str, set[str] | None] = {}
            reach = self.ddp_importers
            for f, d in self._ddp_files:
                for hit, names in self._imported_files(f, d).items():
                    old = wanted.get(hit, set())
                    wanted[hit] = None if old is None or names is None else old | names
                    reach.setdefault(hit, set()).add(f)
            second: set[str] = set()
            for module in set(wanted) - ddp:
                try:
                    only = wanted[module] if module.endswith("__init__.py") else None
                    found = self._imported_files(module, read_bytes(module), only)
                except OSError:
                    continue
                second |= set(found)
                for hit in found:
                    reach.setdefault(hit, set()).update(reach[module])
            self._ddp_modules = set(wanted) | second  # a DDP file imported by another counts too
        return os.path.abspath(path) in self._ddp_modules

    def index_of(self, path: str) -> ModuleIndex | None:
        """A fresh index of a module of the project, kept: its tree went when it was linted,
        and few modules are asked of again (a program for the classes it builds, a caller for
        what it passes)."""
        key = os.path.abspath(path)
        if key not in self.indexes:
            try:
                tree = ast.parse(read_bytes(key), filename=key)
            except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
                self.indexes[key] = None
            else:
                index = self.indexes[key] = ModuleIndex(tree)
                index.path, index.project = key, self
        return self.indexes[key]

    def programs_reaching(self, path: str) -> set[str]:
        """The files that set up or use DDP and import this module, up to three steps away
        (see in_ddp_program for two); with `ddp_files` they let a module linted alone be
        judged as the programs that build its classes run it (built_classes)."""
        key = os.path.abspath(path)
        self.in_ddp_program(key)
        found = set(self.ddp_importers.get(key, ()))
        if not found:
            for module, programs in list(self.ddp_importers.items()):
                if key in self._imports_of(module):
                    found |= programs
        return found

    def _imports_of(self, module: str) -> set[str]:
        """The project files a module's import lines name, read once (programs_reaching asks
        the same modules for each module linted alone)."""
        if module not in self._imports:
            try:
                self._imports[module] = set(self._imported_files(module, read_bytes(module)))
            except OSError:
                self._imports[module] = set()
        return self._imports[module]

    def ddp_files(self) -> set[str]:
        if self._links is None:
            self._scan()
        return {file for file, _ in self._ddp_files}

    def _imported_files(
        self, importer: str, data: bytes, only: set[str] | None = None
    ) -> dict[str, set[str] | None]:
        """The project files that a module's import statements name (`from pkg import mod`
        names pkg/mod.py when there is one, else pkg/__init__.py), each with the names asked of
        it (None: any). `only`: a package `__init__` is followed only where it provides one of
        the names its importer asked for (`from .trainer import do_train` for `do_train`), not
        to every module it re-exports."""
        found: dict[str, set[str] | None] = {}
        for dots, module, names in IMPORT_FROM.findall(data):
            level, base = len(dots), module.decode()
            words = {w.decode() for w in WORD.findall(names)} - {"as"}
            if only is not None and not (words & only or base.rsplit(".", 1)[-1] in only):
                continue
            for name in words:
                sub = f"{base}.{name}" if base else name
                if (hit := self.module_path(importer, sub, level)) is not None:
                    found[hit] = None
            if base and (hit := self.module_path(importer, base, level)) is not None:
                if hit not in found:
                    found[hit] = words
                elif found[hit] is not None:
                    found[hit] = found[hit] | words  # type: ignore[operator]
        if only is None:
            for modules in IMPORT_PLAIN.findall(data):
                for module in modules.split(b","):
                    name = module.strip().split(b" ")[0].decode()
                    if name and (hit := self.module_path(importer, name, 0)) is not None:
                        found[hit] = None
        return found

    def may_reach_init(self, tree: ast.Module, path: str) -> bool:
        """Whether a call of this module into the project's other modules may set the group
        up: a light walk (calls and imports only) that spares indexing a module which imports a
        set-up module only to ask it things (`dist.get_rank()`). It answers yes whenever the
        index could: every import of the module counts, and one name imported two ways is a
        yes without looking further."""
        froms: dict[str, tuple[str, int, str]] = {}
        modules: dict[str, str] = {}
        calls, imports = _calls_and_imports(tree)
        for node in imports:
            if type(node) is ast.ImportFrom:
                for a in node.names:  # type: ignore[attr-defined]
                    key = import_key(a, froms)
                    spec = (node.module or "", node.level, a.name)  # type: ignore[attr-defined]
                    if froms.setdefault(key, spec) != spec:
                        return True
            else:
                for a in node.names:
                    key = a.asname or a.name.split(".", 1)[0]
                    name = a.name if a.asname else key
                    if modules.setdefault(key, name) != name:
                        return True
        mod = ModuleFacts(os.path.abspath(path), {}, froms, modules)
        seen: set[Ref] = set()
        # The methods this module calls by name (`opts.parse_and_setup()`): only those of a
        # project class it builds can set a group up through it.
        called = {c.func.attr for c in calls if type(c.func) is ast.Attribute}  # type: ignore[attr-defined]
        for call in calls:
            # The callee's first name, read before its reference is built: most are neither
            # imported nor a plain chain of names (`x.view(...)`, `f(...)[0].sum()`).
            head = call.func
            if type(head) is ast.Attribute:
                while type(head) is ast.Attribute:
                    head = head.value  # type: ignore[attr-defined]
                if type(head) is not ast.Name or (
                    head.id not in froms and head.id not in modules  # type: ignore[attr-defined]
                ):
                    continue
            elif type(head) is not ast.Name or head.id not in froms:  # type: ignore[attr-defined]
                continue
            ref = callee_ref(call)
            if ref is None and type(call.func) is ast.Attribute:  # `Options().parse()`
                ref = callee_ref(call.func.value)  # type: ignore[arg-type, attr-defined]
            if ref is None or ref in seen:
                continue
            seen.add(ref)
            found = self.resolve(mod, ref)
            if found is not None and {"init", SPAWNED_INIT} & self.effects(found[0], found[1]):
                return True  # a set-up, or a launcher whose workers make a group
            if self._class_sets_up(mod, ref, called):
                return True
        # `class Trainer(BaseTrainer)` here, whose `super().__init__()` or an inherited method
        # may set the group up.
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                for base in filter(None, map(dotted, node.bases)):
                    head, _, attr = base.rpartition(".")
                    ref = ("attr", head, attr) if head else ("name", base)
                    if self._class_sets_up(mod, ref, called | {"__init__"}):
                        return True
        return False

    def _module_may_set_up(self, mod: ModuleFacts, table: FunctionTable) -> bool:
        """Whether a method of this module can reach an init at all: the module names the
        call, or imports a module of a chain that ends in one (see links_to). Spares reading
        every method of every class a large project builds."""
        known = self._may_set_up.get(mod.path)
        if known is None:
            data = table.source_bytes()
            known = b"init_process_group" in data or self._links_to(data)
            self._may_set_up[mod.path] = known
        return known

    def _class_sets_up(self, mod: ModuleFacts, ref: Ref, called: set[str]) -> bool:
        """A class of the project (built or subclassed here) one of whose methods named in
        `called`, its own or inherited, may set the group up."""
        if (
            ref[0] == "name"
            and ref[1].split(".", 1)[0] not in mod.from_imports
            and not any(key.startswith("*") for key in mod.from_imports)
        ):
            return False  # not imported, and no `from .base import *` it may come through
        if not ref[-1][:1].isupper():
            return False  # `utils.setup(...)`: a function (classes are named in CamelCase)
        found = self.resolve_class(mod, ref)
        depth = 0
        while found is not None and depth <= MAX_DEPTH:
            cls_mod, cls = found
            table = cls_mod.functions
            if not isinstance(table, FunctionTable):
                return False
            if self._module_may_set_up(cls_mod, table) and any(
                {"init", SPAWNED_INIT} & self.effects(cls_mod, f"{cls}.{m}")
                for m in table.methods(cls)
                if m in called
            ):
                return True
            bases = table.bases(cls)
            found = self._base_class(cls_mod, bases[0], depth) if bases else None
            depth += 1
        return False

    # -- processes ----------------------------------------------------------------------------
    def spawned_elsewhere(self, path: str, names: set[str]) -> set[str]:
        """Which of these top-level functions of `path` another module of the project starts as
        a process (`mp.spawn(workers.run, ...)`): each is a process's entry point, though no
        line of its own file says so. Read only on demand (a helper module that sets a group up
        and never tears it down): only files holding a spawn call and one of the names are
        parsed, each once."""
        here = os.path.abspath(path)
        found: set[str] = set()
        for other, data in self._spawn_files():
            if other not in self._started:  # read once: every file of a project may ask
                self._started[other] = _started_names(data)
            if other == here or not _may_start(self._started[other], names):
                continue
            found |= {name for target, name in self._spawn_sites(other) if target == here}
        return found & names

    def _spawn_files(self) -> list[tuple[str, bytes]]:
        """The project's files that may start a process, with their bytes."""
        if self._spawners is None:
            self._scan()
        return self._spawners or []

    def _spawn_sites(self, path: str) -> set[tuple[str, str]]:
        """(file, function) pairs that the spawn calls of `path` start, resolved through its
        imports."""
        if path not in self._spawned:
            self._spawned[path] = set()
            try:
                tree = ast.parse(read_bytes(path), filename=path)
            except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
                return self._spawned[path]
            mod = facts_of(tree, path, with_functions=False)
            for node in _nodes(tree):
                if not isinstance(node, ast.Call) or _last(node.func) not in SPAWN_CALLS:
                    continue
                fn = spawn_target(node)
                ref = callee_ref(ast.Call(func=fn, args=[], keywords=[])) if fn else None
                target = self.resolve(mod, ref) if ref else None
                if target is not None:
                    self._spawned[path].add((target[0].path, target[1]))
        return self._spawned[path]

    # -- functions ----------------------------------------------------------------------------
    def resolve(self, mod: ModuleFacts, ref: Ref, depth: int = 0) -> tuple[ModuleFacts, str] | None:
        """The project function a callee written in `mod` names, through re-exports. A class
        without an `__init__` of its own names its base's constructor; `super().m()` in a
        method names the method its class inherits."""
        if ref[0] == SUPER:
            if len(ref) < 3:
                return None
            if ref[1] == "__init__":
                return self.inherited_init(mod, ref[2], depth)
            return self.find_method(mod, ref[2], ref[1], depth, inherited_only=True)
        found = self._locate(mod, ref, depth, _defines)
        if found is None or found[1] in found[0].functions:
            return found
        return self.inherited_init(found[0], found[1], depth)  # a class with no __init__

    def resolve_class(self, mod: ModuleFacts, ref: Ref, depth: int = 0):
        """The project class (its module's facts, its name) a name written in `mod` names."""
        return self._locate(mod, ref, depth, _is_class)

    def find_method(
        self, mod: ModuleFacts, cls: str, method: str, depth: int = 0, inherited_only=False
    ) -> tuple[ModuleFacts, str] | None:
        """`Class.method` as the class has it: its own, else the first of its bases' (in the
        order Python looks, depth first, which is that order for single inheritance)."""
        table = mod.functions
        if depth > MAX_DEPTH or not isinstance(table, FunctionTable):
            return None
        if not inherited_only and table.has_method(cls, method):
            return mod, f"{cls}.{method}"
        for base in table.bases(cls):
            found = self._base_class(mod, base, depth)
            if found is not None:
                hit = self.find_method(found[0], found[1], method, depth + 1)
                if hit is not None:
                    return hit
        return None

    def inherited_init(
        self, mod: ModuleFacts, cls: str, depth: int = 0
    ) -> tuple[ModuleFacts, str] | None:
        """The nearest base of the class (in the project) with an `__init__` of its own: what
        building the class, or its `super().__init__()`, runs."""
        table = mod.functions
        if depth > MAX_DEPTH or not isinstance(table, FunctionTable):
            return None
        for base in table.bases(cls):
            found = self._base_class(mod, base, depth)
            if found is None:
                continue
            if found[1] in found[0].functions:
                return found
            deeper = self.inherited_init(found[0], found[1], depth + 1)
            if deeper is not None:
                return deeper
        return None

    def _base_class(self, mod: ModuleFacts, base: str, depth: int):
        head, _, attr = base.rpartition(".")
        ref = ("attr", head, attr) if head else ("name", base)
        return self._locate(mod, ref, depth + 1, _is_class)

    def _locate(
        self, mod: ModuleFacts, ref: Ref, depth: int, present
    ) -> tuple[ModuleFacts, str] | None:
        """Where a name written in `mod` is defined (`present(module, name)`), through
        imports and re-exports."""
        if depth > MAX_DEPTH:
            return None
        if ref[0] == "name":
            local = ref[1]
            if not present(mod, local) and local not in mod.from_imports and not mod.complete:
                mod = self._complete(mod)
            if present(mod, local):
                return mod, local
            spec = mod.from_imports.get(local)
            if spec is None:
                return self._through_star(mod, local, depth, present)
            module, level, name = spec
            target = self._module(mod.path, module, level)
            if target is None:
                return None
            return self._locate(target, ("name", name), depth + 1, present)
        _, recv, attr = ref
        head, _, rest = recv.partition(".")
        if head in mod.module_imports:
            module, level = mod.module_imports[head] + (f".{rest}" if rest else ""), 0
        elif head in mod.from_imports:
            base, level, name = mod.from_imports[head]
            module = ".".join(p for p in (base, name, rest) if p)
        else:
            return None
        target = self._module(mod.path, module, level)
        if target is not None and attr.endswith("*"):  # picked by a name made at run time
            if not target.complete:
                target = self._complete(target)
            attr = next((n for n in sorted(target.functions) if n.startswith(attr[:-1])), "")
        if target is None:
            return None
        return self._locate(target, ("name", attr), depth + 1, present)

    def _through_star(
        self, mod: ModuleFacts, name: str, depth: int, present
    ) -> tuple[ModuleFacts, str] | None:
        """A name a package re-exports with `from .dist import *`."""
        for key, (module, level, star) in mod.from_imports.items():
            if star != "*" or not key.startswith("*"):
                continue
            target = self._module(mod.path, module, level)
            found = target and self._locate(target, ("name", name), depth + 1, present)
            if found:
                return found
        return None

    def _module(self, importer: str, module: str, level: int) -> ModuleFacts | None:
        path = self.module_path(importer, module, level)
        return None if path is None else self.facts(path)

    def effects(self, mod: ModuleFacts, name: str, depth: int = 0) -> frozenset[str]:
        """Everything calling `name` in `mod` may do, through local and imported callees."""
        key = (mod.path, name)
        if key in self._effects:
            return self._effects[key]
        self._effects[key] = frozenset()  # cycle guard
        facts = mod.functions.get(name)
        out: set[str] = set()
        if facts is not None and depth <= MAX_DEPTH:
            out |= facts.direct
            # In name order: a callee met again on a cycle adds nothing (the guard), so an
            # order a set of names gives by its salted hash would change the answer.
            for callee in sorted(facts.local):
                out |= self.effects(mod, callee, depth + 1)
            for ref in facts.external:
                found = self.resolve(mod, ref)
                if found is not None:
                    out |= self.effects(found[0], found[1], depth + 1)
            for callee in sorted(facts.part_local):
                out |= self.effects(mod, callee, depth + 1) - OBJECT_OWN
            for worker in sorted(facts.spawned):
                # The workers it starts: their set-up and teardown are told apart from the
                # caller's own (the caller's process makes no group by starting them).
                started = self.effects(mod, worker, depth + 1)
                out |= {f"{SPAWNED}{e}" for e in started & {"init", "destroy"}}
            for ref in facts.part_external:
                found = self.resolve(mod, ref)
                if found is not None:
                    out |= self.effects(found[0], found[1], depth + 1) - OBJECT_OWN
        if "rank_aware" in out:
            # A function that tests the rank guards its own writes (and its callees'): its
            # caller does not write on every rank through it; unless one of its own writes
            # lies outside every rank test it makes.
            if facts is not None and WRITES_ANYWAY in facts.direct:
                out.discard("rank_aware")
            else:
                out -= {"rank_aware", "writes"}
                out = {e for e in out if not e.startswith(WRITES_IF)}
        out.discard(WRITES_ANYWAY)
        self._effects[key] = frozenset(out)
        return self._effects[key]


def _names_an_import(index: ModuleIndex, call: ast.Call) -> bool:
    """The callee's first name is imported (`utils.setup(...)`, `setup(...)`): the cheap test
    that most calls (methods of local values, builtins) fail."""
    func = call.func
    if type(func) is ast.Name:
        return func.id in index.from_imports or (
            index.has_star_import and func.id not in BUILTIN_NAMES
        )
    if type(func) is ast.Call and func.args:  # `getattr(common_utils, "init_dist_%s" % l)(...)`
        func = func.args[0]
    while type(func) is ast.Attribute:
        func = func.value
    return type(func) is ast.Name and (
        func.id in index.module_imports or func.id in index.from_imports
    )


def external_effects(index: ModuleIndex, call: ast.Call) -> frozenset[str] | None:
    """What a call into another module of the project does; None when the callee is not a
    function of the project (a library, a method, a name we cannot follow)."""
    project: Project | None = index.project
    if project is None or index.path is None:
        return None
    if not _names_an_import(index, call):
        return _method_effects(index, call)
    ref = callee_ref(call)
    return None if ref is None else ref_effects(index, ref)


def ref_effects(index: ModuleIndex, ref: Ref) -> frozenset[str] | None:
    """What the project function an imported name stands for does (`init_processes`, handed
    as a Process target, or called); None when it is not one."""
    project: Project | None = index.project
    if project is None:
        return None
    if ref[0] == "name" and ref[1] not in index.from_imports and not index.has_star_import:
        return None  # neither imported by name nor through `from utils import *`
    if ref[0] == "attr":
        head = ref[1].split(".", 1)[0]
        if head not in index.module_imports and head not in index.from_imports:
            return None
    # The same callee is called many times in a file (`dist.get_rank()`): resolve it once.
    cache: dict[Ref, frozenset[str] | None] = index.__dict__.setdefault("_external", {})
    if ref not in cache:
        found = project.resolve(_as_module(index), ref)
        cache[ref] = None if found is None else project.effects(found[0], found[1])
    return cache[ref]


def _method_effects(index: ModuleIndex, call: ast.Call) -> frozenset[str] | None:
    """What a method of a project class does, called on an object built here (`trainer =
    Trainer(args)`, then `trainer.init_ddp()`; `Options().parse_and_setup()`), own or
    inherited from a base class of the project; or `super().__init__(...)` in a class of this
    file whose base is the project's. None for anything else."""
    func = call.func
    if type(func) is not ast.Attribute:
        return None
    recv = func.value  # type: ignore[attr-defined]
    if type(recv) is ast.Name and recv.id == "self":
        return _self_method_effects(index, call)
    if not (
        (type(recv) is ast.Name and _built_in_the_project(index, recv.id))
        or (
            type(recv) is ast.Call
            and (_calls_super(func) or callee_module(index, recv) is not None)
        )
    ):
        return None  # the cheap test: most `x.m()` are of a library's objects
    cache: dict[int, frozenset[str] | None] = index.__dict__.setdefault("_method_effects", {})
    key = id(call)
    if key not in cache:
        found = _super_target(index, call) if _calls_super(func) else method_target(index, call)
        cache[key] = None if found is None else index.project.effects(found[0], found[1])
    return cache[key]


def _self_method_effects(index: ModuleIndex, call: ast.Call) -> frozenset[str] | None:
    """What `self.m()` does when `m` comes from a base class of the project; asked once per
    class and method name."""
    cls = index.enclosing_class(index.scope_of(call))
    if cls is None or not cls.bases:
        return None
    cache: dict[tuple[int, str], frozenset[str] | None]
    cache = index.__dict__.setdefault("_self_methods", {})
    key = (id(cls), call.func.attr)  # type: ignore[attr-defined]
    if key not in cache:
        found = _inherited_self_method(index, call)
        cache[key] = None if found is None else index.project.effects(found[0], found[1])
    return cache[key]


def _built_in_the_project(index: ModuleIndex, name: str) -> bool:
    """Some value of the name here is made by a call into the project (`Trainer(args)`, not
    `torch.optim.Adam(...)`); answered once per name and file."""
    known: dict[str, bool] = index.__dict__.setdefault("_built_in_the_project", {})
    found = known.get(name)
    if found is None:
        found = known[name] = any(
            type(v) is ast.Call and callee_module(index, v) is not None
            for _, v in index.bindings.get(name, ())
        )
    return found


def callee_module(index: ModuleIndex, call: ast.Call) -> str | None:
    """The module of the project the callee's first name is imported from, by its import
    line alone (`from data_utils import BucketSampler`, `import engine`), or None (a library:
    `torch.optim.Adam(...)`)."""
    head = call.func
    while isinstance(head, ast.Attribute):
        head = head.value
    if not isinstance(head, ast.Name) or index.project is None or index.path is None:
        return None
    here = os.path.abspath(index.path)
    spec = index.from_imports.get(head.id)
    if spec is not None:
        return index.project.module_path(here, spec[0], spec[1])
    module = index.module_imports.get(head.id)
    return None if module is None else index.project.module_path(here, module, 0)


def _super_target(index: ModuleIndex, call: ast.Call) -> tuple[ModuleFacts, str] | None:
    """`super().m(...)` in a method of a class of this file: the method (for `__init__`, the
    constructor) of the first of its bases that the project defines."""
    cls = index.enclosing_class(index.scope_of(call))
    return None if cls is None else _base_method(index, cls, call.func.attr)  # type: ignore[attr-defined]


def _inherited_self_method(index: ModuleIndex, call: ast.Call) -> tuple[ModuleFacts, str] | None:
    """`self.m(...)` in a method of a class of this file that does not define `m`: the method
    it inherits from a base the project defines (ROMP's `self._build_model_()`, a Base
    class's method that sets the group up)."""
    cls = index.enclosing_class(index.scope_of(call))
    method = call.func.attr  # type: ignore[attr-defined]
    if cls is None or any(isinstance(f, FUNC_TYPES) and f.name == method for f in cls.body):
        return None
    return _base_method(index, cls, method)


def _base_method(
    index: ModuleIndex, cls: ast.ClassDef, method: str
) -> tuple[ModuleFacts, str] | None:
    """The method (for `__init__`, the constructor) of the first base of a class of this
    file that the project defines: imported by name, through a module, or by `import *`."""
    project: Project = index.project
    star = any(key.startswith("*") for key in index.from_imports)
    for base in filter(None, map(dotted, cls.bases)):
        head, _, attr = base.rpartition(".")
        ref = ("attr", head, attr) if head else ("name", base)
        if ref[1].split(".", 1)[0] not in index.from_imports | index.module_imports and not (
            star and not head
        ):
            continue
        found = project.resolve_class(_as_module(index), ref)
        if found is None:
            continue
        mod, name = found
        if method == "__init__":
            return found if name in mod.functions else project.inherited_init(mod, name)
        return project.find_method(mod, name, method)
    return None


def _as_module(index: ModuleIndex) -> ModuleFacts:
    """This file's own import tables, from its index: the project's facts of it may be the
    empty ones of a file without effect words, read earlier as someone's import."""
    mod = index.__dict__.get("_as_module")
    if mod is None:
        here = os.path.abspath(index.path or "")
        mod = index.__dict__["_as_module"] = ModuleFacts(
            here, {}, index.from_imports, index.module_imports
        )
    return mod


def project_target(index: ModuleIndex, call: ast.Call) -> tuple[ModuleFacts, str] | None:
    """The project function (its module's facts, its name) a call into another module names;
    None for a library, a method or a name we cannot follow."""
    ref = callee_ref(call)
    if index.project is None or ref is None:
        return None
    if not _names_an_import(index, call):
        own = isinstance(call.func, ast.Attribute) and dotted(call.func.value) == "self"
        return _inherited_self_method(index, call) if own else None
    return index.project.resolve(_as_module(index), ref)


def target_facts(index: ModuleIndex, call: ast.Call) -> FuncFacts | None:
    """The facts of the project function a call names (see project_target), or None."""
    found = project_target(index, call)
    return found[0].functions.get(found[1]) if found else None


def method_target(
    index: ModuleIndex, call: ast.Call
) -> tuple[ModuleFacts, str, list[ast.Call]] | None:
    """`parser.save(path)` where every value of `parser` here is `ConfigParser(...)`, a class
    of another module of the project: that module's facts, `ConfigParser.save` and the calls
    that built the object; None for anything else (a library object, a parameter, a method
    the class inherits)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or index.project is None:
        return None
    if isinstance(func.value, ast.Call):  # `Options().parse()`
        built = [func.value]
    elif isinstance(func.value, ast.Name) and func.value.id in index.bindings:
        values = index.values_of(func.value.id, call)
        built = [v for v in values if isinstance(v, ast.Call)]
        if not built or len(built) != len(values):
            return None
    else:
        return None  # never assigned here: a parameter, a module, a global of elsewhere
    found = [_class_built(index, v) for v in built]
    target = found[0]
    if target is None or any(
        f is None or f[0].path != target[0].path or f[1] != target[1] for f in found
    ):
        return None
    method = index.project.find_method(target[0], target[1], func.attr)
    return None if method is None else (*method, built)


def _class_built(index: ModuleIndex, call: ast.Call) -> tuple[ModuleFacts, str] | None:
    """The project class a call builds (`Trainer(args)`, `trainers.Trainer(args)`)."""
    ref = callee_ref(call)
    if index.project is None or ref is None or ref[0] == SUPER or not _names_an_import(index, call):
        return None
    return index.project.resolve_class(_as_module(index), ref)


def local_effects(index: ModuleIndex, func: ast.AST) -> frozenset[str]:
    """What a function of this file may do, through its local and imported callees."""
    cache: dict[int, frozenset[str]] = index.__dict__.setdefault("_local_effects", {})
    key = id(func)
    if key in cache:
        return cache[key]
    cache[key] = frozenset()
    out: set[str] = set()
    for call in index.calls_by_scope.get(key, ()):
        out |= call_effects(index, call)
    for target in PRINT_TARGETS:
        if any(scope is func for scope, _ in index.bindings.get(target, ())):
            out.add("silence_print")
    cache[key] = frozenset(out)
    return cache[key]


def call_effects(index: ModuleIndex, call: ast.Call) -> frozenset[str]:
    """What this call may do to the process group, here or in the project's other modules."""
    effect = DIRECT.get(index.callee_name(call))
    if effect:
        return frozenset({effect})
    local = index.resolve_call(call)
    if local:
        out: set[str] = set()
        for f in local:
            out |= local_effects(index, f)
        return frozenset(out)
    return external_effects(index, call) or frozenset()


def program_effects(index: ModuleIndex) -> frozenset[str]:
    """Everything the file's calls may do, anywhere in it (the checks' cheap gate)."""
    cached = index.__dict__.get("_program_effects")
    if cached is None:
        out: set[str] = set()
        for call in index.calls:
            if not _names_an_import(index, call) and type(call.func) is not ast.Attribute:
                continue
            if index.callee_name(call) in DIRECT or index.resolve_call(call):
                continue  # direct calls are in calls_by_name; local functions are in this file
            out |= external_effects(index, call) or frozenset()
        cached = index.__dict__["_program_effects"] = frozenset(out)
    return cached


def external_init_calls(index: ModuleIndex) -> list[ast.Call]:
    """Calls into another module of the project that set the process group up."""
    if index.project is None or "init" not in program_effects(index):
        return []
    return [
        c
        for c in index.calls
        if not index.resolve_call(c) and "init" in (external_effects(index, c) or ())
    ]


def imported_name(index: ModuleIndex, expr: ast.AST) -> tuple[str, str] | None:
    """The project file and the name there that `Name` (`from trainers import Name`) or
    `module.Name` (`import trainers`) stands for. The file may be a package's `__init__`
    that only re-exports the name: the caller follows it on (built_classes)."""
    project = index.project
    if project is None or index.path is None:
        return None
    if isinstance(expr, ast.Name):
        return from_import_target(index, expr.id)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        module = index.module_imports.get(expr.value.id)
        found = project.module_path(index.path, module, 0) if module else None
        return None if found is None else (found, expr.attr)
    return None


def from_import_target(index: ModuleIndex, local: str) -> tuple[str, str] | None:
    """The project file and the name there that `from m import name [as local]` binds; None
    when `m.name` is itself a module, or m is no file of the project."""
    spec = index.from_imports.get(local)
    if index.project is None or index.path is None or spec is None:
        return None
    module, level, name = spec
    found = index.project.module_path(index.path, module, level)
    sub = index.project.module_path(index.path, f"{module}.{name}", level) if module else None
    return None if found is None or sub is not None else (found, name)
