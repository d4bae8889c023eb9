"""DDL006 in the constructor of a class that a DDP program builds on every rank, judged in the
class's own file: a trainer base class in another module (`BaseTrainer.__init__` opening a
SummaryWriter) is where the mistake is, though no line of that module sets a group up or
trains. The program's checks note each such class (Project.note_built); this pass runs once
every file is linted, and follows a subclass to the bases whose constructors it runs."""

from __future__ import annotations

import ast
import os

from ddpdoctor.lint.files import read_bytes
from ddpdoctor.lint.finding import LintFinding
from ddpdoctor.lint.guards import guarded_locally
from ddpdoctor.lint.index import FUNC_TYPES, ModuleIndex
from ddpdoctor.lint.project import Project, from_import_target, imported_name
from ddpdoctor.lint.rank_zero import _write, note_built_classes

MAX_PROGRAMS = 8  # programs read per module linted without them


def built_class_writes(project: Project, linted: set[str]) -> list[LintFinding]:
    """The unguarded writes of every noted class's constructor (and of the methods it runs
    through `self.m()`, and of the base constructors it runs), in the files being linted."""
    findings: list[LintFinding] = []
    _ask_programs(project, linted)
    # (file, class) -> (the file that builds it, the line, the class it builds there)
    todo = [(key, (*site, key[1])) for key, site in sorted(project.built.items())]
    done: set[tuple[str, str]] = set()
    indexes: dict[str, ModuleIndex | None] = {}
    while todo:
        (path, name), (site, line, built) = todo.pop(0)
        if (path, name) in done:
            continue
        done.add((path, name))
        if path not in indexes:
            indexes[path] = _index_of(project, path)
        index = indexes[path]
        cls = _class_named(index, name) if index is not None else None
        if cls is None:
            # Not defined here: a re-export (`from .vision import VisionTrainer`), followed.
            found = from_import_target(index, name) if index is not None else None
            if found is not None:
                todo.append((found, (site, line, built)))
            continue
        init = next(
            (f for f in cls.body if isinstance(f, FUNC_TYPES) and f.name == "__init__"), None
        )
        if init is None or _runs_base_init(init):
            todo += [(base, (site, line, built)) for base in _bases(index, cls)]
        if init is None or path not in linted:
            continue
        what_is_built = built if built == name else f"{built}, a {name},"
        where = f"{os.path.relpath(site, project.root)} builds {what_is_built} on every rank"
        given = _given_attributes(init)
        for func in _runs_unguarded(index, cls, init):
            for call in index.calls_by_scope.get(id(func), ()):
                what = _write(index, call)
                if what is None or guarded_locally(index, call) or _locked(index, call):
                    continue
                if _caller_chooses(func, call, given):
                    continue
                findings.append(
                    LintFinding(
                        path,
                        call.lineno,
                        call.col_offset + 1,
                        "DDL006",
                        f"{what} in {name}.{getattr(func, 'name', '__init__')}() runs on every "
                        f"rank: N ranks write the same file ({where}, line {line})",
                    )
                )
    return findings


def _ask_programs(project: Project, linted: set[str]) -> None:
    """When some of the project's DDP programs are not linted (a module linted alone), read
    those that reach a linted module with classes, for the classes they build on every rank."""
    modules = project.class_modules & linted
    if not modules or project.ddp_files() <= linted:
        return  # no class to ask about, or each program noted its classes when it was linted
    asked: set[str] = set()
    for module in sorted(modules):
        # A shared module is reached by many programs (icefall's 150 recipes): a few tell.
        for program in sorted(project.programs_reaching(module) - linted - asked)[:MAX_PROGRAMS]:
            asked.add(program)
            index = _index_of(project, program)
            if index is not None:
                note_built_classes(index)


def _runs_unguarded(index: ModuleIndex, cls: ast.ClassDef, init: ast.AST) -> list[ast.AST]:
    """The constructor and the methods it runs through `self.m()` with no rank test around
    the call (`if self.params.is_master: self.create_reference_files()` runs on rank 0)."""
    methods = {f.name: f for f in cls.body if isinstance(f, FUNC_TYPES)}
    order, todo = [init], [init]
    while todo:
        for call in index.calls_by_scope.get(id(todo.pop()), ()):
            func = call.func
            if not (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
            ):
                continue
            method = methods.get(func.attr)
            if method is not None and method not in order and not guarded_locally(index, call):
                order.append(method)
                todo.append(method)
    return order


def _params(func: ast.AST) -> set[str]:
    spec = func.args  # type: ignore[attr-defined]
    return {a.arg for a in (*spec.posonlyargs, *spec.args, *spec.kwonlyargs)} - {"self"}


def _given_attributes(init: ast.AST) -> set[str]:
    """The attributes the constructor sets straight from a parameter (`self.fname = fname`)."""
    params = _params(init)
    return {
        t.attr
        for n in ast.walk(init)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in params
        for t in n.targets
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }


def _caller_chooses(func: ast.AST, call: ast.Call, given: set[str]) -> bool:
    """The write is handed its file by the one who builds the object (`open(path, "w")` with
    `path` a parameter, or `self.fname` set from one): judged at each call that builds it, by
    the file given there (ijepa's `CSVLogger(f"{tag}_r{rank}.csv")`)."""
    params = _params(func)
    for arg in (*call.args, *(k.value for k in call.keywords)):
        if isinstance(arg, ast.Name) and arg.id in params:
            return True
        if (
            isinstance(arg, ast.Attribute)
            and isinstance(arg.value, ast.Name)
            and arg.value.id == "self"
            and arg.attr in given
        ):
            return True
    return False


def _locked(index: ModuleIndex, call: ast.Call) -> bool:
    """Inside `with FileLock(...)`: one process at a time, and the next finds the file made
    (a dataset's feature cache)."""
    return any(
        isinstance(anc, ast.With)
        and any(
            "lock" in (index.callee_name(i.context_expr) or "").lower()
            for i in anc.items
            if isinstance(i.context_expr, ast.Call)
        )
        for anc in index.ancestors(call)
    )


def _index_of(project: Project, path: str) -> ModuleIndex | None:
    """A fresh index of a module (its tree went when it was linted): few classes are noted."""
    try:
        tree = ast.parse(read_bytes(path), filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    index = ModuleIndex(tree)
    index.path, index.project = path, project
    return index


def _class_named(index: ModuleIndex, name: str) -> ast.ClassDef | None:
    return next(
        (n for n in index.tree.body if isinstance(n, ast.ClassDef) and n.name == name), None
    )


def _runs_base_init(init: ast.AST) -> bool:
    """`super().__init__(...)` or `Base.__init__(self, ...)` in the constructor."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"
        for n in ast.walk(init)
    )


def _bases(index: ModuleIndex, cls: ast.ClassDef) -> list[tuple[str, str]]:
    """The (file, name) of each base the project defines, here or where an import names it."""
    out: list[tuple[str, str]] = []
    for base in cls.bases:
        if isinstance(base, ast.Name) and _class_named(index, base.id) is not None:
            out.append((index.path or "", base.id))
        elif (found := imported_name(index, base)) is not None:
            out.append(found)
    return out
