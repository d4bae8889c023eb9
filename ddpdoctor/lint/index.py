"""What the checks need to know about one module, gathered in a single walk over its tree: parents,
calls by name, functions, classes, assignments and import aliases. The checks ask it questions
(where does this value come from? who calls this function?) instead of walking the tree again."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from functools import cached_property

FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
NO_CONSTANT = object()  # what ModuleIndex.constant_value answers for a value that may vary
LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)
COMP_TYPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
SCOPE_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)


# Fields that never hold a node worth visiting: names and flags, and the ctx/op nodes (one
# shared `Load()` object serves a whole tree, so a parent link for it means nothing). Skipping
# them makes the one walk about a third shorter.
_LEAF_FIELDS = frozenset(
    {"ctx", "op", "ops", "id", "attr", "arg", "name", "asname", "module", "level", "kind"}
    | {"type_comment", "conversion", "is_async", "simple"}
)
CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(node_type: type) -> tuple[str, ...]:
    """The fields of this node type that may hold child nodes (a constant's value does not)."""
    fields = CHILD_FIELDS.get(node_type)
    if fields is None:
        leaf = node_type in (ast.Constant, ast.MatchSingleton)
        fields = tuple(
            f for f in node_type._fields if f not in _LEAF_FIELDS and not (leaf and f == "value")
        )
        CHILD_FIELDS[node_type] = fields
    return fields


# The node types the walk records something about; every other node only gets its parent link.
_INDEXED = frozenset(
    {ast.Call, ast.Attribute, ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.Return}
    | {ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.AsyncFor, ast.While}
    | {ast.comprehension, ast.withitem, ast.ClassDef, ast.Import, ast.ImportFrom}
    | {ast.Assert, ast.If, ast.AugAssign, ast.Global, ast.Nonlocal}
)

for _cls in vars(ast).values():
    if isinstance(_cls, type) and issubclass(_cls, ast.AST):
        child_fields(_cls)


class _Unknown:
    """An origin we cannot see (a parameter, a loop variable, an import): checks stay silent."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
Origin = ast.AST | _Unknown

DDP_NAMES = frozenset({"DistributedDataParallel", "DDP"})
WRAPPER_NAMES = DDP_NAMES | {"FullyShardedDataParallel", "FSDP"}


def dotted(expr: ast.AST) -> str | None:
    """`self.train_sampler` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def last_name(expr: ast.AST) -> str:
    """The last identifier of a callee or receiver (`dist.barrier` → `barrier`), or ''."""
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Call):
        return last_name(expr.func)
    return ""


def kwarg(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


# Calls that start a function as a new process; spawn_target() finds the function.
SPAWN_CALLS = ("spawn", "start_processes", "Process")


def spawn_target(call: ast.Call) -> ast.expr | None:
    """The function a spawn call starts: `mp.spawn(fn, ...)`, `spawn(fn=...)`,
    `start_processes(fn, ...)`, `Process(target=fn)` (its first positional is a group, not the
    target), with a `functools.partial(fn, ...)` unwrapped. None when it is none of these."""
    fn = kwarg(call, "target") or kwarg(call, "fn")
    if fn is None and call.args and last_name(call.func) != "Process":
        fn = call.args[0]
    if isinstance(fn, ast.Call) and last_name(fn.func) == "partial" and fn.args:
        fn = fn.args[0]
    return fn if isinstance(fn, ast.Name | ast.Attribute) else None


def destroys_default_group(call: ast.Call) -> bool:
    """`destroy_process_group()` (or of `None`, `group.WORLD`); one given a subgroup made with
    new_group (`destroy_process_group(cpu_pg)`) leaves the default group up."""
    group = call.args[0] if call.args else kwarg(call, "group")
    if group is None or (isinstance(group, ast.Constant) and group.value is None):
        return True
    return last_name(group) == "WORLD"


def import_key(alias: ast.alias, table: dict[str, object]) -> str:
    """The key `from m import name [as x]` is kept under in an import table: its local name, or
    for a star import `*0`, `*1`, ... (each one kept, in order)."""
    key = alias.asname or alias.name
    return f"*{sum(k.startswith('*') for k in table)}" if key == "*" else key


def argument_for(call: ast.Call, params: list[str], name: str) -> ast.expr | None:
    """What a call passes for the parameter `name`, by keyword or by position among `params`
    (the positional ones, less `self`); None where it cannot be told (a default, `*args`)."""
    arg = kwarg(call, name)
    if arg is None and name in params and not has_star_args(call):
        at = params.index(name)
        arg = call.args[at] if at < len(call.args) else None
    return arg


def has_star_args(call: ast.Call) -> bool:
    """`f(*args)` / `f(**kwargs)`: any argument may be hiding in there."""
    return any(kw.arg is None for kw in call.keywords) or any(
        isinstance(a, ast.Starred) for a in call.args
    )


def param_default(func: ast.AST, name: str) -> ast.expr | None:
    """The default a function's parameter has (`def train(resume=False)`), or None when it has
    none or is no parameter."""
    args = getattr(func, "args", None)
    if not isinstance(args, ast.arguments):
        return None
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d]
    return next((d for a, d in pairs if a.arg == name), None)


def is_const(expr: ast.AST | None, value: object) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is value


def none_tested(test: ast.AST, given: bool) -> ast.expr | None:
    """What `x is not None` (given) or `x is None` (not given) asks about: `x`; None for any
    other test."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op = ast.IsNot if given else ast.Is
    return (
        test.left if isinstance(test.ops[0], op) and is_const(test.comparators[0], None) else None
    )


# Library helpers that make the default process group (and leave its teardown to the caller).
LIBRARY_INITS = frozenset(
    {"mmcv.runner.init_dist", "mmcv.runner.dist_utils.init_dist", "mmengine.dist.init_dist"}
    | {"timm.utils.init_distributed_device", "timm.utils.distributed.init_distributed_device"}
)
FRAMEWORKS = frozenset(
    {"accelerate", "lightning", "pytorch_lightning", "deepspeed", "fabric", "composer"}
)


class ModuleIndex:
    """Facts about one parsed module. Built once per file; every check reads from it."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents: dict[int, ast.AST] = {}
        # id(call or function) -> its scope, and id(call) -> its callee's name: asked often.
        self.scopes: dict[int, ast.AST] = {}
        self.names: dict[int, str] = {}
        self.calls: list[ast.Call] = []
        self.calls_by_name: dict[str, list[ast.Call]] = defaultdict(list)
        self.functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = defaultdict(list)
        self.classes: dict[str, ast.ClassDef] = {}
        self.bindings: dict[str, list[tuple[ast.AST, Origin | ast.expr]]] = defaultdict(list)
        self.returns: list[ast.Return] = []
        self.asserts: list[ast.Assert] = []
        self.ifs: list[ast.If] = []
        self.assigns: list[ast.Assign] = []
        self.loops: list[ast.AST] = []
        self.aliases: dict[str, str] = {}
        # For following the project's own imports: local name -> (module, level, name) for
        # `from m import name`, local name -> module for `import m` / `import m.sub as x`.
        self.from_imports: dict[str, tuple[str, int, str]] = {}
        self.module_imports: dict[str, str] = {}
        self.path: str | None = None  # set by the engine
        self.project = None  # a Project when linting with cross-file reading
        self.name_loads: set[str] = set()
        self.attr_names: set[str] = set()
        self.global_names: set[str] = set()  # declared `global` or `nonlocal` somewhere
        self.strings: list[str] = []
        self.has_main_guard = False
        self._resolved: dict[int, list] = {}
        self._walk()

    # -- the one walk -------------------------------------------------------------------------
    def _walk(self) -> None:
        # Parents live in a dict keyed by id(), not on the nodes: no reference cycles, so a
        # file's tree is freed as soon as its index is, without waiting for the cycle collector.
        parents = self.parents
        stack: list[tuple[ast.AST, ast.AST]] = [(self.tree, self.tree)]
        calls, functions, bindings, scopes = self.calls, self.functions, self.bindings, self.scopes
        node_type, list_type = ast.AST, list
        name_type, const_type, load_type = ast.Name, ast.Constant, ast.Load
        name_loads, strings = self.name_loads, self.strings
        fields_of, pop, push = CHILD_FIELDS.get, stack.pop, stack.append
        while stack:
            node, scope = pop()
            t = type(node)
            inner = node if t in FUNC_TYPES else scope
            for field in fields_of(t) or child_fields(t):
                value = getattr(node, field, None)
                for child in value if type(value) is list_type else (value,):
                    ct = type(child)
                    # Names and constants, two nodes in five, are leaves: read them here
                    # instead of a trip through the stack.
                    if ct is name_type:
                        parents[id(child)] = node
                        if type(child.ctx) is load_type:
                            name_loads.add(child.id)
                    elif ct is const_type:
                        parents[id(child)] = node
                        if type(child.value) is str and len(child.value) < 64:
                            strings.append(child.value)
                    elif isinstance(child, node_type):
                        parents[id(child)] = node
                        push((child, inner))
            if t not in _INDEXED:
                continue  # most nodes (operators, subscripts, literals) only need parents
            if t is ast.Call:
                calls.append(node)
                scopes[id(node)] = scope
            elif t is ast.Attribute:
                self.attr_names.add(node.attr)
            elif t is ast.Assign:
                self.assigns.append(node)
                for target in node.targets:
                    self._bind(target, node.value, scope)
            elif t is ast.AnnAssign or t is ast.NamedExpr:
                if node.value is not None:
                    self._bind(node.target, node.value, scope)
            elif t is ast.AugAssign and type(node.op) is ast.BitOr:
                # `is_save |= not args.multiprocessing_distributed` (LUPerson): the flag is
                # also true wherever this is; a flag test reads each such value
                self._bind(node.target, node.value, scope)
            elif t is ast.AugAssign:  # `step += 1`: a value we do not follow
                self._bind(node.target, None, scope)
            elif t is ast.Global or t is ast.Nonlocal:
                self.global_names.update(node.names)
            elif t in FUNC_TYPES:
                functions[node.name].append(node)
                scopes[id(node)] = scope
                args = node.args
                for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                    bindings[a.arg].append((node, UNKNOWN))
            elif t is ast.Return:
                self.returns.append(node)
            elif t in LOOP_TYPES:
                self.loops.append(node)
                if t is not ast.While:
                    self._bind(node.target, None, scope)
            elif t is ast.comprehension:
                self._bind(node.target, None, scope)
            elif t is ast.withitem:
                if node.optional_vars is not None:
                    self._bind(node.optional_vars, None, scope)
            elif t is ast.ClassDef:
                self.classes[node.name] = node
            elif t is ast.Import:
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                        self.module_imports[a.asname] = a.name
                    else:
                        head = a.name.split(".", 1)[0]
                        self.module_imports[head] = head
            elif t is ast.ImportFrom:
                for a in node.names:
                    key = import_key(a, self.from_imports)
                    if a.name != "*":
                        self.aliases[key] = f"{node.module or ''}.{a.name}"
                    self.from_imports[key] = (node.module or "", node.level, a.name)
            elif t is ast.Assert:
                self.asserts.append(node)
            elif t is ast.If:
                self.ifs.append(node)
                test = node.test
                if (
                    type(test) is ast.Compare
                    and type(test.left) is ast.Name
                    and test.left.id == "__name__"
                ):
                    self.has_main_guard = True
        names = self.names
        # `def DDP(address, port, rank, n):` of the script's own (a set-up helper named so):
        # its calls are calls of that function, not DistributedDataParallel.
        own = {n for n in WRAPPER_NAMES if n in self.functions and n not in self.aliases}
        for call in calls:
            name = self.callee_name(call)
            if name in own and type(call.func) is ast.Name:
                name = f"{name}()"
            names[id(call)] = name
            self.calls_by_name[name].append(call)

    def _bind(self, target: ast.AST, value: ast.expr | None, scope: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            pairs = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            if pairs and not any(type(e) is ast.Starred for e in (*target.elts, *value.elts)):
                for elt, part in zip(target.elts, value.elts, strict=True):  # `a, b = x, y`
                    self._bind(elt, part, scope)
                return
            for elt in target.elts:
                self._bind(elt, None, scope)
            return
        if isinstance(target, ast.Starred):
            self._bind(target.value, None, scope)
            return
        key = dotted(target)
        if key is not None:
            self.bindings[key].append((scope, UNKNOWN if value is None else value))

    def values_of(self, key: str, at: ast.AST) -> list[Origin | ast.expr]:
        """What `key` may have been assigned, seen from `at`: a plain name looks in its own
        function first, then at module level (Python's local/global rule); an attribute such
        as `self.sampler` may be assigned anywhere in the file."""
        entries = self.bindings.get(key)
        if not entries:
            return []
        if "." not in key:
            scope = self.scope_of(at)
            local = [v for s, v in entries if s is scope]
            if local:
                return local
            module = [v for s, v in entries if s is self.tree]
            if module:
                return module
        return [v for _, v in entries]

    def constant_value(self, expr: ast.AST) -> object:
        """The one constant an expression always holds: a literal, or a name whose every value
        here is that same literal (`gpu = 0`; `step = 0` never incremented) and that is never
        declared global or nonlocal. NO_CONSTANT otherwise."""
        if isinstance(expr, ast.Constant):
            return expr.value
        if not isinstance(expr, ast.Name) or expr.id in self.global_names:
            return NO_CONSTANT
        values = self.values_of(expr.id, expr)
        if not values or not all(isinstance(v, ast.Constant) for v in values):
            return NO_CONSTANT
        found = {(type(v.value), v.value) for v in values}  # type: ignore[union-attr]
        return values[0].value if len(found) == 1 else NO_CONSTANT  # type: ignore[union-attr]

    # -- names --------------------------------------------------------------------------------
    def qualname(self, expr: ast.AST) -> str:
        """`torch.distributed.barrier` for `dist.barrier` after `import torch.distributed as
        dist`; the dotted text when there is no import alias; '' for anything else."""
        text = dotted(expr)
        if text is None:
            return ""
        head, _, rest = text.partition(".")
        full = self.aliases.get(head)
        if full is None:
            return text
        return f"{full}.{rest}" if rest else full

    def callee_name(self, call: ast.Call) -> str:
        """The callee's last name after resolving import aliases (`DDP` → the class name)."""
        known = self.names.get(id(call))
        if known is not None:
            return known
        func = call.func
        if isinstance(func, ast.Name):
            full = self.aliases.get(func.id)
            return full.rsplit(".", 1)[-1] if full else func.id
        if isinstance(func, ast.Attribute):
            return func.attr
        return ""

    def calls_named(self, *names: str) -> list[ast.Call]:
        out: list[ast.Call] = []
        for name in names:
            out.extend(self.calls_by_name.get(name, ()))
        return sorted(out, key=position)

    def is_torch_distributed(self, call: ast.Call) -> bool:
        return self.qualname(call.func).startswith("torch.distributed.")

    def mentions(self, *names: str) -> bool:
        """Whether any of these names is called or read anywhere in the module."""
        return any(n in self.calls_by_name or n in self.name_loads for n in names)

    # -- the distributed picture --------------------------------------------------------------
    @cached_property
    def init_calls(self) -> list[ast.Call]:
        return self.calls_named("init_process_group")

    @cached_property
    def wrapper_calls(self) -> list[ast.Call]:
        return self.calls_named(*WRAPPER_NAMES)

    @cached_property
    def all_init_calls(self) -> list[ast.Call]:
        """init_process_group here, calls into the project's own modules that run it
        (`utils.init_distributed_mode(args)`), and the set-up helpers of libraries that make
        the default group and never destroy it (mmcv's `init_dist("pytorch")`)."""
        from ddpdoctor.lint.project import external_init_calls

        return sorted(
            self.init_calls + external_init_calls(self) + self.library_inits, key=position
        )

    @cached_property
    def has_star_import(self) -> bool:
        """`from utils import *` somewhere here: a bare name may come through it."""
        return any(k.startswith("*") for k in self.from_imports)

    @cached_property
    def library_inits(self) -> list[ast.Call]:
        """Calls of LIBRARY_INITS, which also pin each process's GPU (`set_device`)."""
        return [
            c
            for c in self.calls_named("init_dist", "init_distributed_device")
            if self.qualname(c.func) in LIBRARY_INITS
        ]

    @cached_property
    def is_ddp_script(self) -> bool:
        """The file sets up or uses data-parallel training itself."""
        return bool(self.all_init_calls or self.wrapper_calls)

    @cached_property
    def in_ddp_program(self) -> bool:
        """A module that trains (runs backward) and that a data-parallel program of the project
        imports, though it says nothing of DDP itself: its loop runs on every rank."""
        if self.is_ddp_script or self.project is None or self.path is None:
            return False
        if not self.calls_by_name.get("backward"):
            return False
        return self.project.in_ddp_program(self.path)

    @cached_property
    def restores_in_program(self) -> bool:
        """A module that restores checkpoints (`torch.load` and `load_state_dict`) and that a
        data-parallel program of the project imports: a resume helper every rank runs."""
        if self.is_ddp_script or self.project is None or self.path is None:
            return False
        if not (self.calls_by_name.get("load") and self.calls_by_name.get("load_state_dict")):
            return False
        return self.project.in_ddp_program(self.path)

    @cached_property
    def training_calls(self) -> list[ast.Call]:
        """The calls that run backward: `loss.backward()`, and calls of this file's functions
        that do, directly or through others."""
        from ddpdoctor.lint.project import external_effects, program_effects

        trainers = self.functions_calling(("backward",))
        # A training step of another module of the project (`train_one_epoch(model, ...)` from
        # engine.py) trains too, when that module was read (it has effect words or links).
        elsewhere = "trains" in program_effects(self)
        return [
            call
            for call in self.calls
            if self.callee_name(call) == "backward"
            or any(f in trainers for f in self.resolve_call(call))
            or (elsewhere and "trains" in (external_effects(self, call) or ()))
        ]

    @cached_property
    def training_loops(self) -> set[int]:
        """id() of the loops that run backward, directly or through a function of this file;
        and, where backward hides in the model (`model(batch, optimizer=opt)`: A-LLMRec), an
        epoch loop that calls `sampler.set_epoch(epoch)` and the loops over a loader in it."""
        loops = {id(loop) for call in self.training_calls for loop in self.enclosing_loops(call)}
        for call in self.calls_by_name.get("set_epoch", ()):
            for epoch_loop in self.enclosing_loops(call):
                loops.add(id(epoch_loop))
                loops |= {
                    id(n)
                    for n in ast.walk(epoch_loop)
                    if isinstance(n, (ast.For, ast.AsyncFor))
                    and "loader" in ast.dump(n.iter).lower()
                }
        return loops

    @cached_property
    def loop_helpers(self) -> set[ast.AST]:
        """This file's functions that a training loop calls, directly or through others
        (`validate()` each epoch): what they print, they print once per epoch or step."""
        loops = self.training_loops
        seeds: set[ast.AST] = set()
        for call in self.calls:
            if any(id(loop) in loops for loop in self.enclosing_loops(call)):
                seeds.update(self.resolve_call(call))
        return self.reachable(*seeds)

    @cached_property
    def trainer_roots(self) -> set[ast.AST]:
        """In a DDP script, or a module a DDP program imports (in_ddp_program), the functions
        that hold a training loop and that nothing here calls: the program calls them, on every
        rank. A trainer class's `__init__` too: every rank builds the object."""
        if not (self.in_ddp_program or self.is_ddp_script):
            return set()
        roots = {
            scope
            for call in self.training_calls
            if self.enclosing_loops(call) and (scope := self.scope_of(call)) not in self.call_sites
        }
        classes = {c for f in roots if (c := self.enclosing_class(f)) is not None}
        return roots | {
            f
            for c in classes
            for f in c.body
            if isinstance(f, FUNC_TYPES) and f.name == "__init__" and f not in self.call_sites
        }

    @cached_property
    def calls_by_scope(self) -> dict[int, list[ast.Call]]:
        """id(function or module) -> the calls directly in its body."""
        out: dict[int, list[ast.Call]] = defaultdict(list)
        for call in self.calls:
            out[id(self.scope_of(call))].append(call)
        return out

    @cached_property
    def framework_roots(self) -> frozenset[str]:
        """The frameworks (FRAMEWORKS) this file reads: an import that nothing reads
        (`from accelerate import Accelerator` left in a plain DDP script) hands them nothing."""
        used = self.name_loads
        roots = {v.split(".", 1)[0] for k, v in self.aliases.items() if k in used}
        roots |= {k for k in self.aliases if k in used}
        roots |= {k for k, v in self.module_imports.items() if k == v and k in used}
        return frozenset(roots & FRAMEWORKS)

    @cached_property
    def uses_framework(self) -> bool:
        """Accelerate, Lightning, DeepSpeed and friends shard data and guard I/O themselves."""
        return bool(self.framework_roots)

    @cached_property
    def framework_run(self) -> bool:
        """A framework runs the program (shards the data, sets the epoch, picks the devices):
        it uses one and sets no group up itself. A script that calls `init_process_group`, or
        a set-up helper of its project that does (pangu's `init_dist`), has a plain DDP path
        (`--dist`) beside its framework branch (`--use_deepspeed`): that path is checked."""
        return self.uses_framework and not self.all_init_calls

    @cached_property
    def framework_loads(self) -> bool:
        """A framework shards and re-seeds the program's loaders (Lightning's Trainer, accelerate's
        `prepare`, Fabric): all but DeepSpeed, whose engine leaves the user's loaders alone."""
        return self.framework_run or bool(self.framework_roots - {"deepspeed"})

    @cached_property
    def framework_writes(self) -> bool:
        """A framework that also guards the program's output runs it (Lightning's hooks and
        callbacks, DeepSpeed's engine). Accelerate guards nothing: its launcher runs the whole
        script once per process, so a raw `torch.save` there is every process's
        (`accelerator.is_main_process` is the guard; `accelerator.save` is its own)."""
        return self.framework_run and bool(self.framework_roots - {"accelerate"})

    # -- structure ----------------------------------------------------------------------------
    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The function (or the module) whose body holds this node (known from the walk for
        calls and functions, the nodes most asked about)."""
        known = self.scopes.get(id(node))
        if known is not None:
            return known
        p = self.parents.get(id(node))
        while p is not None and not isinstance(p, SCOPE_TYPES):
            p = self.parents.get(id(p))
        return p if p is not None else self.tree

    def ancestors(self, node: ast.AST, stop: ast.AST | None = None) -> Iterator[ast.AST]:
        """Parents of node up to (not including) its scope, innermost first."""
        p = self.parents.get(id(node))
        while p is not None and p is not stop and not isinstance(p, SCOPE_TYPES):
            yield p
            p = self.parents.get(id(p))

    def in_loop(self, node: ast.AST) -> bool:
        """Lexically inside a loop or comprehension of its own function."""
        return any(isinstance(a, LOOP_TYPES + COMP_TYPES) for a in self.ancestors(node))

    def enclosing_loops(self, node: ast.AST) -> list[ast.AST]:
        return [a for a in self.ancestors(node) if isinstance(a, LOOP_TYPES)]

    def enclosing_class(self, func: ast.AST) -> ast.ClassDef | None:
        p = self.parents.get(id(func))
        return p if isinstance(p, ast.ClassDef) else None

    def resolve_call(self, call: ast.Call) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions of this file a call may run: `f()` → plain functions named f,
        `Cls()` → its `__init__`, `obj.f()` → methods named f (of `self`'s class when the
        receiver is self, of the class `obj` was built from when we can see it)."""
        key = id(call)
        if key not in self.names:
            # A call made up for the asking (a decorator read as `dec()`): not of this tree, so
            # its id may be reused by the next one; an answer kept under it would go stale.
            return self._resolve(call)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(call)
        return self._resolved[key]

    def _resolve(self, call: ast.Call) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        func = call.func
        if isinstance(func, ast.Name):
            if func.id in self.classes:
                return self._methods_of(self.classes[func.id], "__init__")
            if func.id not in self.functions:
                return self._chosen_functions(func.id, call)
            return [
                f
                for f in self.functions.get(func.id, ())
                if not self.enclosing_class(f) and self._visible_from(f, call)
            ]
        if isinstance(func, ast.Attribute):
            methods = [f for f in self.functions.get(func.attr, ()) if self.enclosing_class(f)]
            if not methods:
                return []
            recv = dotted(func.value)
            if recv in ("self", "cls"):
                cls = self.enclosing_class(self.scope_of(call))
                same = [m for m in methods if self.enclosing_class(m) is cls]
                return same or methods
            head = recv.split(".", 1)[0] if recv is not None else None
            if head is not None and (head in self.aliases or head in self.module_imports):
                return []  # a module's function (`torch.save`), not a method of ours
            if recv in self.classes:
                return self._methods_of(self.classes[recv], func.attr)
            return self._methods_on(func.value, func.attr, methods)
        return []

    def _chosen_functions(
        self, name: str, call: ast.Call
    ) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """A name every value of which is a plain function of this file, or a choice between
        such (`validate_fn = validate if flat else validate_sphere`): all of them may run."""
        out: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        for value in self.values_of(name, call):
            options = (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,)
            for option in options:
                if not (isinstance(option, ast.Name) and option.id in self.functions):
                    return []
                out += [f for f in self.functions[option.id] if not self.enclosing_class(f)]
        return out

    def _visible_from(self, func: ast.AST, call: ast.Call) -> bool:
        """A function defined inside another one (the `print` override of
        setup_for_distributed) is a local name there, not a global one."""
        home = self.scope_of(func)
        if home is self.tree:
            return True
        scope = self.scope_of(call)
        while scope is not self.tree:
            if scope is home:
                return True
            scope = self.scope_of(scope)
        return False

    def _methods_of(self, cls: ast.ClassDef, name: str) -> list[ast.AST]:
        return [f for f in self.functions.get(name, ()) if self.enclosing_class(f) is cls]

    def _methods_on(self, recv: ast.expr, name: str, methods: list[ast.AST]) -> list[ast.AST]:
        """`trainer.train()` runs Trainer.train when trainer = Trainer(...); a receiver we
        cannot trace may be any of our classes; `self.model.train()` on a torch module is
        none of ours."""
        found: list[ast.AST] = []
        for origin in self.origins(recv):
            if origin is UNKNOWN:
                return methods
            if isinstance(origin, ast.Call) and isinstance(origin.func, ast.Name):
                cls = self.classes.get(origin.func.id)
                if cls is not None:
                    found.extend(m for m in self._methods_of(cls, name) if m not in found)
        return found

    @cached_property
    def call_sites(self) -> dict[ast.AST, list[ast.Call]]:
        """function → the calls in this file that may run it."""
        sites: dict[ast.AST, list[ast.Call]] = defaultdict(list)
        for call in self.calls:
            for f in self.resolve_call(call):
                sites[f].append(call)
        return sites

    def passed_args(self, name: ast.AST) -> list[ast.expr | None] | None:
        """What this file's calls pass for a parameter of the function a name is used in
        (`def train(rank, ...)` called as `train(int(os.environ["SLURM_PROCID"]), ...)`): one
        entry per call site, None where it cannot be told (a default, `*args`); None when the
        name is no parameter of its function."""
        scope = self.scope_of(name)
        if not isinstance(name, ast.Name) or not isinstance(scope, FUNC_TYPES):
            return None
        params = [a.arg for a in (*scope.args.posonlyargs, *scope.args.args)]
        if name.id not in params and name.id not in [a.arg for a in scope.args.kwonlyargs]:
            return None
        if params[:1] in (["self"], ["cls"]):
            params = params[1:]
        return [argument_for(site, params, name.id) for site in self.call_sites.get(scope, [])]

    @cached_property
    def spawn_targets(self) -> set[ast.AST]:
        """Functions of this file started as new processes (mp.spawn(fn), Process(target=fn),
        start_processes, through functools.partial too): they begin without the parent's
        process group, and end with their own."""
        targets: set[ast.AST] = set()
        # `runner = torch.multiprocessing.start_processes; runner(fn, ...)`: a local alias.
        aliases = [
            key
            for key, entries in self.bindings.items()
            if "." not in key
            and any(isinstance(v, ast.Attribute) and v.attr in SPAWN_CALLS for _, v in entries)
        ]
        for call in self.calls_named(*SPAWN_CALLS, *aliases):
            fn = spawn_target(call)
            if isinstance(fn, ast.Name):
                targets.update(self._started_functions(fn))
            elif isinstance(fn, ast.Attribute) and dotted(fn.value) in ("self", "cls"):
                cls = self.enclosing_class(self.scope_of(call))
                if cls is not None:
                    targets.update(self._methods_of(cls, fn.attr))
        return targets | self._handed_to_a_launcher()

    @cached_property
    def forked_children(self) -> set[ast.AST]:
        """Spawn targets started by `Process(target=fn)` after the group is made in the same
        scope, with the default start method (fork on Linux): the child is a copy of a parent
        that holds the group (a data reader), so `dist.get_rank()` works there. Not when the
        file asks for "spawn" or "forkserver" anywhere (a fresh interpreter)."""
        if any(
            isinstance(n, ast.Constant) and n.value in ("spawn", "forkserver")
            for call in self.calls_named("set_start_method", "get_context")
            for n in call.args
        ):
            return set()
        found: set[ast.AST] = set()
        for call in self.calls_named("Process"):
            fn = spawn_target(call)
            scope = self.scope_of(call)
            if not isinstance(fn, ast.Name) or not any(
                self.scope_of(init) is scope and position(init) < position(call)
                for init in self.init_calls
            ):
                continue
            found.update(self._started_functions(fn))
        return found & self.spawn_targets

    def _started_functions(self, fn: ast.Name) -> list[ast.AST]:
        """The top-level functions a spawn call's target names: its own, or, for a launcher's
        parameter (`def launch(world_size, run_fn): mp.spawn(run_fn, ...)`), the functions this
        file passes for it."""
        passed = [a.id for a in self.passed_args(fn) or () if isinstance(a, ast.Name)]
        # `train_fn = partial(distributed_train, ...)`, then `Process(target=train_fn)`
        # (diffwave-sashimi): the function the partial wraps.
        wrapped = [
            v.args[0].id
            for v in self.values_of(fn.id, fn)
            if isinstance(v, ast.Call)
            and last_name(v.func) == "partial"
            and v.args
            and isinstance(v.args[0], ast.Name)
        ]
        return [
            f
            for name in [fn.id, *passed, *wrapped]
            for f in self.functions.get(name, ())
            if not self.enclosing_class(f)
        ]

    @cached_property
    def spawn_index_params(self) -> set[tuple[int, str]]:
        """(id of function, parameter) for the first parameter of each function of this file
        that `mp.spawn` / `start_processes` starts: they pass it the process's index on this
        machine, a local rank (a global one is built from it: `node * ngpus + gpu`)."""
        found: set[tuple[int, str]] = set()
        for call in self.calls_named("spawn", "start_processes"):
            fn = spawn_target(call)
            if not isinstance(fn, ast.Name):
                continue  # `partial(fn, x)` moves the index to a later parameter
            for f in self._started_functions(fn):
                params = [a.arg for a in (*f.args.posonlyargs, *f.args.args)]
                if params:
                    found.add((id(f), params[0]))
        return found

    def _handed_to_a_launcher(self) -> set[ast.AST]:
        """Functions of this file handed first to a launcher of the project that spawns
        processes (detectron2-style `launch(main_worker, ngpus, ...)`): each process runs them,
        after the launcher's own set-up."""
        if self.project is None:
            return set()
        from ddpdoctor.lint.project import external_effects

        found: set[ast.AST] = set()
        for call in self.calls:
            first = call.args[0] if call.args else None
            if not isinstance(first, ast.Name) or first.id not in self.functions:
                continue
            funcs = [f for f in self.functions[first.id] if not self.enclosing_class(f)]
            if funcs and "spawns" in (external_effects(self, call) or ()):
                found.update(funcs)
        return found

    def uncalled(self, func: ast.AST) -> bool:
        """A top-level function of this file that nothing here calls or starts, and no decorator
        runs (`@main.command()`: a CLI does)."""
        return (
            isinstance(func, FUNC_TYPES)
            and self.scope_of(func) is self.tree
            and not func.decorator_list
            and not self.call_sites.get(func)
            and func not in self.entry_points
        )

    def unread(self, func: ast.AST) -> bool:
        """uncalled, and its name never read either: not handed over (`atexit.register(f)`,
        `mp.spawn(f)`), not looked up as an attribute: a leftover (`fliplr`) no run reaches."""
        return (
            self.uncalled(func)
            and func.name not in self.name_loads  # type: ignore[attr-defined]
            and func.name not in self.attr_names  # type: ignore[attr-defined]
        )

    def handed_over(self, name: str) -> bool:
        """The function (or class) is passed to another call as a value (`Process(target=
        init_processes, args=(rank, size, main, args))`): whoever gets it runs it, after its own
        set-up, with arguments of its choosing. `super(Net, self)` and `isinstance(x, Net)`
        only name it."""
        for call in self.calls:
            if last_name(call.func) in ("super", "isinstance", "issubclass"):
                continue
            values = [*call.args, *(k.value for k in call.keywords)]
            for value in values:
                elts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
                if any(isinstance(e, ast.Name) and e.id == name for e in elts):
                    return True
        return False

    def reachable(self, *funcs: ast.AST) -> set[ast.AST]:
        """The functions of this file that running these may run (themselves included): what a
        process started at one executes, as far as this file shows."""
        seen = set(funcs)
        stack = list(funcs)
        while stack:
            for call in self.calls_by_scope.get(id(stack.pop()), ()):
                for callee in self.resolve_call(call):
                    if callee not in seen:
                        seen.add(callee)
                        stack.append(callee)
        return seen

    @cached_property
    def entry_points(self) -> set[ast.AST]:
        """Functions that start a run though nothing here calls them: `main`, spawned workers,
        and functions handed to a call at module level (`fire.Fire(train)`)."""
        entries = set(self.spawn_targets)
        # `main` only when nothing here calls it: a main() called from the __main__ block
        # runs in the order that block gives it (an init there before main() covers main).
        entries.update(
            f
            for f in self.functions.get("main", ())
            if not self.enclosing_class(f)
            and f not in self.call_sites
            and not self.handed_over("main")
        )
        for call in self.calls:
            # `fire.Fire(train)`: a library call at module level handed one of our functions.
            # Not a call of our own (`trainer.fit(model)`) and not one repeated in a loop.
            if self.scope_of(call) is not self.tree or self.resolve_call(call):
                continue
            if self.in_loop(call):
                continue
            for arg in call.args:
                if isinstance(arg, ast.Name):
                    entries.update(
                        f
                        for f in self.functions.get(arg.id, ())
                        if self.scope_of(f) is self.tree and not self.enclosing_class(f)
                    )
        return entries

    @cached_property
    def run_after_set_up(self) -> set[ast.AST]:
        """Functions of this file handed to a helper of the project that makes the group before
        it runs what it is handed (`init_processes(0, size, train, args)`, or that helper as a
        Process target): they start with the group up, though they start a run."""
        if self.project is None:
            return set()
        from ddpdoctor.lint.project import external_effects

        found: set[ast.AST] = set()
        for call in self.calls:
            target = spawn_target(call)
            if isinstance(target, ast.Name) and last_name(call.func) == "Process":
                handed = kwarg(call, "args")  # `Process(target=init_processes, args=(..., train))`
                values = handed.elts if isinstance(handed, (ast.Tuple, ast.List)) else []
                if target.id in self.functions or not self._imported_set_up(target.id):
                    continue
            elif "init" in (external_effects(self, call) or ()):
                values = [*call.args, *(k.value for k in call.keywords)]
            else:
                continue
            for value in values:
                if isinstance(value, ast.Name):
                    found.update(
                        f for f in self.functions.get(value.id, ()) if not self.enclosing_class(f)
                    )
        return found

    def _imported_set_up(self, name: str) -> bool:
        """A name imported from the project whose function makes the group."""
        from ddpdoctor.lint.project import ref_effects

        return "init" in (ref_effects(self, ("name", name)) or ())

    def closure(self, seeds: set[ast.AST]) -> set[ast.AST]:
        """Functions in seeds plus every function that (transitively) calls one of them."""
        found = set(seeds)
        changed = True
        while changed:
            changed = False
            for call in self.calls:
                scope = self.scope_of(call)
                if scope in found or not isinstance(scope, FUNC_TYPES):
                    continue
                if any(f in found for f in self.resolve_call(call)):
                    found.add(scope)
                    changed = True
        return found

    def functions_calling(self, names: tuple[str, ...]) -> set[ast.AST]:
        """Functions whose body calls one of these names, directly or through local helpers."""
        seeds = {self.scope_of(c) for n in names for c in self.calls_by_name.get(n, ())}
        seeds.discard(self.tree)
        return self.closure(seeds)

    def returns_of(self, func: ast.AST) -> list[ast.expr]:
        return [r.value for r in self.returns if r.value is not None and self.scope_of(r) is func]

    # -- values -------------------------------------------------------------------------------
    def origins(self, expr: ast.AST | None, _depth: int = 0) -> set[Origin]:
        """Where a value may come from: the constructing calls and constants it may hold,
        following assignments, attributes, conditional expressions and local helper returns.
        UNKNOWN marks anything we cannot see."""
        if expr is None or _depth > 8:
            return {UNKNOWN}
        if isinstance(expr, (ast.Name, ast.Attribute)):
            values = self.values_of(dotted(expr) or "", expr)
            if not values:
                return {UNKNOWN}
            out: set[Origin] = set()
            for v in values:
                out |= {UNKNOWN} if v is UNKNOWN else self.origins(v, _depth + 1)
            return out
        if isinstance(expr, ast.IfExp):
            return self.origins(expr.body, _depth + 1) | self.origins(expr.orelse, _depth + 1)
        if isinstance(expr, ast.BoolOp):
            out = set()
            for v in expr.values:
                out |= self.origins(v, _depth + 1)
            return out
        if isinstance(expr, ast.NamedExpr):
            return self.origins(expr.value, _depth + 1)
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, (ast.Name, ast.Attribute)):
            return self._item_origins(expr, _depth)
        if isinstance(expr, ast.Call):
            plain = isinstance(expr.func, ast.Name) and expr.func.id not in self.classes
            funcs = self.resolve_call(expr) if plain else []
            if funcs:
                out = set()
                for f in funcs:
                    rets = self.returns_of(f)
                    for r in rets or [None]:
                        out |= self.origins(r, _depth + 1) if r is not None else {UNKNOWN}
                return out
            return {expr}
        if isinstance(expr, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.Compare)):
            return {expr}
        return {UNKNOWN}

    def _item_origins(self, expr: ast.Subscript, _depth: int) -> set[Origin]:
        """`samplers[x]` where `samplers = {x: DistributedSampler(sets[x]) for x in ...}` (or a
        dict, list or tuple display): what its items may be."""
        out: set[Origin] = set()
        for value in self.values_of(dotted(expr.value) or "", expr.value) or [UNKNOWN]:
            if isinstance(value, ast.DictComp):
                items = [value.value]
            elif isinstance(value, ast.Dict):
                items = [v for v in value.values if v is not None]
            elif isinstance(value, (ast.List, ast.Tuple, ast.ListComp)):
                items = [value.elt] if isinstance(value, ast.ListComp) else value.elts
            else:
                return {UNKNOWN}
            for item in items or [None]:
                out |= self.origins(item, _depth + 1)
        return out


def position(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def statement_block(index: ModuleIndex, node: ast.AST) -> tuple[list[ast.stmt], int] | None:
    """The statement list (a body, an else, a finally) holding the node's statement, and the
    statement's place in it."""
    child = node
    for anc in (*index.ancestors(node), index.scope_of(node)):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(anc, name, None)
            if isinstance(block, list) and child in block:
                return block, block.index(child)
        child = anc
    return None


def follows_in_block(index: ModuleIndex, node: ast.AST, block: list[ast.stmt], at: int) -> bool:
    """The node lies in a statement of `block` after its `at`-th (so runs after it, on the
    same path)."""
    later = block[at + 1 :]
    return any(anc in later for anc in (node, *index.ancestors(node)))


def calls_in_order(index: ModuleIndex, scope: ast.AST) -> list[ast.Call]:
    """The calls a function (or the module) runs itself, in source order: not those in the
    bodies of nested functions, classes or lambdas. Read from the index, not a new walk."""
    found: list[ast.Call] = []
    parents = index.parents
    for call in index.calls_by_scope.get(id(scope), ()):
        p = parents.get(id(call))
        while p is not None and p is not scope:
            if isinstance(p, (ast.ClassDef, ast.Lambda)):
                break
            p = parents.get(id(p))
        else:
            found.append(call)
    return sorted(found, key=position)
