"""Lint sources and paths: parse once, build the module index only for files that look like
distributed or AMP training code, run the checks, apply `# noqa`, sort."""

from __future__ import annotations

import ast
import gc
import io
import os
import re
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import replace

from ddpdoctor.lint import (
    device_pins,
    devices,
    grad_scaler,
    init_order,
    rank_zero,
    sampling,
    teardown,
)
from ddpdoctor.lint.built_classes import built_class_writes
from ddpdoctor.lint.dormant import why_dormant
from ddpdoctor.lint.files import collect, read_bytes
from ddpdoctor.lint.finding import Hit, LintFinding, Related
from ddpdoctor.lint.index import ModuleIndex, dotted
from ddpdoctor.lint.project import (
    MARKERS,
    SPAWNED_INIT,
    WRITE_WORDS,
    Project,
    find_root,
    program_effects,
)
from ddpdoctor.lint.rules import RULES_BY_CODE

Check = Callable[[ModuleIndex], list[Hit]]

CHECKS: list[Check] = [
    init_order.check,
    sampling.check_missing_sampler,
    sampling.check_set_epoch,
    devices.check,
    device_pins.check,
    grad_scaler.check,
    rank_zero.check,
    teardown.check,
]
# A module with no DDP words that a DDP program imports for its training loop: what every rank
# repeats there (loads, writes, progress) is judged; its samplers and set-up are its caller's.
PROGRAM_LOOP_CHECKS: list[Check] = [
    sampling.check_missing_sampler,
    device_pins.check,
    rank_zero.check,
]


NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)


def _noqa_codes(line: str) -> set[str] | None:
    """None: no noqa. Empty set: bare `# noqa` (everything). Else the codes listed."""
    match = NOQA.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    return set(re.split(r"[\s,]+", codes.upper())) if codes else set()


def _suppressed(finding: LintFinding, lines: list[str]) -> bool:
    if not 1 <= finding.line <= len(lines):
        return False
    line = lines[finding.line - 1]
    if "noqa" not in line.lower():
        return False
    codes = _noqa_codes(line)
    return codes is not None and (not codes or finding.code in codes)


def _syntax_error(path: str, err: Exception) -> LintFinding:
    line = getattr(err, "lineno", None) or 1
    col = getattr(err, "offset", None) or 1
    reason = getattr(err, "msg", None) or str(err) or type(err).__name__
    return LintFinding(path, line, max(col, 1), "DDL000", f"cannot parse: {reason}")


def lint_source(
    source: str,
    path: str = "<string>",
    project: Project | None = None,
    tree: ast.Module | None = None,
    marked: bool | None = None,
    named: bool = True,
) -> list[LintFinding]:
    """All findings for one file's text, sorted, `# noqa` applied. Never raises on bad input.
    With a project, calls into the project's other modules are followed (read, never run);
    `tree` is the source already parsed; `marked`, whether the text holds a marker (MARKERS),
    when the caller already knows; `named`, whether the user named the file (else it was
    found in a folder, and is not even parsed when the checks have nothing to ask of it)."""
    notes: list[LintFinding] = []
    if marked is None:
        marked = any(m in source for m in MARKERS)
    # Parsed without error as someone's import, and nothing for the checks here: done.
    seen = project is not None and os.path.abspath(path) in project.parsed
    if tree is None and seen and not _needs_tree(source, path, project, marked):
        return []
    if tree is None and seen:
        tree = project.take_tree(path)
    # Found in a folder, and nothing for the checks here (no DDP word, no link to the project's
    # set-up, not a loop a DDP program runs): not parsed unless another module reaches it. A
    # syntax error there hides nothing from these rules, so no DDL000 (a file named on the
    # command line is always parsed, and told).
    if (
        tree is None
        and project is not None
        and not (seen or named or marked)
        and not _worth_reading(source, path, project)
    ):
        project.put_off(path, source)
        return []
    try:
        tree = tree or ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        repaired = _repair_async_keyword(source)
        tree = _try_parse(repaired, path) if repaired is not None else None
        if tree is None:
            return [_syntax_error(path, err)]
        line = getattr(err, "lineno", None) or 1
        notes.append(
            LintFinding(
                path,
                line,
                max(getattr(err, "offset", None) or 1, 1),
                "DDL000",
                "cannot parse on Python 3.7+: `async` is a reserved word, so `.cuda(async=True)` "
                "is a syntax error (it is `non_blocking=True` now); the other rules ran on a "
                "copy with that repaired",
            )
        )
        for other, col in _async_keywords(source):  # every other line that needs the fix
            if other != line:
                notes.append(
                    LintFinding(
                        path, other, col, "DDL000", "`async=` here too: rename it `non_blocking=`"
                    )
                )
        source = repaired
        marked = any(m in source for m in MARKERS)
    index = None
    checks = CHECKS
    if not marked:
        # A script whose only contact with DDP is a set-up helper of its project with a name
        # of its own (`dist.init()` from torch_utils/distributed.py): read it as a DDP script.
        # So is a set-up module that makes the group through such a chain (`setup()` in
        # config.py calling `distributed.enable()`): what it does after that runs on every rank.
        # And a training loop the program imports (`engine.do_train`): it runs on every rank.
        if project is None or not _worth_reading(source, path, project, tree):
            if project is not None:
                project.remember(tree, path, source)
            return notes
        if (
            not _trains_in_program(source, path, project)
            and not _restores_in_program(source, path, project)
            and not project.may_reach_init(tree, path)
        ):
            # no loop, no restore, and no call that sets a group up
            project.remember(tree, path, source)
            return notes
        index = _indexed(tree, path, project)
        project.remember(tree, path, source)
        if not index.all_init_calls:
            if index.in_ddp_program:
                checks = PROGRAM_LOOP_CHECKS
            elif index.restores_in_program:
                checks = [device_pins.check]  # a resume helper: its loads
            elif SPAWNED_INIT in program_effects(index):
                checks = [teardown.check]  # `launch(main_worker, ...)`: its workers' group
            else:
                return notes
    if index is None:
        index = _indexed(tree, path, project)
        if project is not None:
            project.remember(tree, path, source)
    findings: set[LintFinding] = set()
    for check in checks:
        try:
            hits = check(index)
        except RecursionError:
            continue  # pathologically deep code: say nothing rather than guess
        for hit in hits:
            line = getattr(hit.node, "lineno", 1)
            col = getattr(hit.node, "col_offset", 0) + 1
            related = tuple(_related(path, r) for r in hit.related)
            message, level = hit.message, hit.level
            if (level or RULES_BY_CODE[hit.code].level) == "fail":
                why = why_dormant(index, hit.node)  # it bites once someone edits the script
                if why is not None:
                    message, level = f"{message} ({why})", "warn"
            findings.add(LintFinding(path, line, col, hit.code, message, related, level))
    lines = source.splitlines()
    return sorted([*notes, *(f for f in findings if not _suppressed(f, lines))])


def _related(path: str, place: tuple[str | None, int, str]) -> Related:
    """A check's other place, its path written as the finding's is (as given, or relative)."""
    where, line, note = place
    if where is None:
        where = path
    elif not os.path.isabs(path):
        where = os.path.relpath(where)
    return Related(where, line, note)


def _needs_tree(source: str, path: str, project: Project, marked: bool) -> bool:
    """Whether the checks may have something to say about this file (else a parse that
    succeeded elsewhere is all the engine needs)."""
    return "__main__" in source or marked or _worth_reading(source, path, project)


def _worth_reading(
    source: str, path: str, project: Project, tree: ast.Module | None = None
) -> bool:
    """Whether a file without DDP words has something for the checks: a run that starts here
    (a main block, or workers started) and may set a group up through the project, a write in
    a module linked to the set-up, or a loop a DDP program runs. Asked of the text alone
    before parsing (a file that fails it is not parsed at all), then with the tree."""
    starts = _may_start(source) and _may_set_up(source, path, project)
    if starts and tree is not None:
        starts = _main_guard(tree) or _starts_processes(source)
    return starts or _writing_link(source, project) or _program_loop(source, path, project)


# What starts worker processes; a module that does and links to the set-up is read like a script
# (PreSumm's train_abstractive: `Process(target=run)`, whose `run` joins through a helper).
START_WORDS = ("Process(", "spawn(", "start_processes(")


def _starts_processes(source: str) -> bool:
    return any(w in source for w in START_WORDS)


def _may_start(source: str) -> bool:
    """A script (`if __name__ == "__main__":`) or a module that starts worker processes:
    where a run begins. Not `__name__` alone, which every `getLogger(__name__)` says."""
    return "__main__" in source or _starts_processes(source)


def _may_set_up(source: str, path: str, project: Project) -> bool:
    """Whether a script without DDP words may still set a group up (it imports a set-up module
    of the project, or a chain of modules ending in one) or run a loop that a DDP program of the
    project imports (it calls backward): else indexing it would find nothing to check."""
    return project.links_to(source) or _trains_in_program(source, path, project)


def _trains_in_program(source: str, path: str, project: Project) -> bool:
    """A module that calls backward and that a DDP program of the project imports (what
    ModuleIndex.in_ddp_program asks of a module that sets nothing up)."""
    return "backward(" in source and project.in_ddp_program(path)


def _restores_in_program(source: str, path: str, project: Project) -> bool:
    """A module that restores a checkpoint (`torch.load` and `load_state_dict`) and that a
    DDP program of the project imports: a resume helper, which every rank runs (each needs the
    weights), so its loads are every rank's (DDL004)."""
    return "torch.load(" in source and "load_state_dict" in source and project.in_ddp_program(path)


def _writing_link(source: str, project: Project) -> bool:
    """A module that writes something and imports a set-up module of the project."""
    return any(w in source for w in WRITE_WORDS) and project.links_to(source)


# What a training loop of a module without DDP words may do that every rank repeats.
LOOP_EFFECT_WORDS = ("torch.load", "tqdm", "trange", *WRITE_WORDS)


def _program_loop(source: str, path: str, project: Project) -> bool:
    """A module that trains and writes, loads or shows progress, imported by a DDP program of
    the project (see ModuleIndex.in_ddp_program); the costlier test last."""
    return (
        ".backward(" in source  # `loss.backward()`; not `def backward(ctx, grad)`
        and any(w in source for w in LOOP_EFFECT_WORDS)
        and project.in_ddp_program(path)
    ) or _restores_in_program(source, path, project)


def _main_guard(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.If) and "__name__" in (dotted(getattr(n.test, "left", n.test)) or "")
        for n in tree.body
    )


def _indexed(tree: ast.Module, path: str, project: Project | None) -> ModuleIndex:
    index = ModuleIndex(tree)
    if project is not None:
        index.path, index.project = path, project
    return index


def _repair_async_keyword(source: str) -> str | None:
    """Old scripts pass `async=True` (renamed `non_blocking` when `async` became a keyword):
    a token-level repair lets the other rules still run. None when there is nothing to repair."""
    if "async" not in source:
        return None
    found = _async_keywords(source)
    if not found:
        return None
    lines = source.splitlines(keepends=True)
    for line, col in reversed(found):  # right to left: earlier columns stay where they are
        text = lines[line - 1]
        lines[line - 1] = text[: col - 1] + "non_blocking" + text[col - 1 + len("async") :]
    return "".join(lines)


def _async_keywords(source: str) -> list[tuple[int, int]]:
    """(line, column) of each `async=` keyword argument in the code (not in strings or
    comments), from the tokens: the file does not parse, but it tokenizes."""
    found: list[tuple[int, int]] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return found
    for tok, nxt in zip(tokens, tokens[1:], strict=False):
        if tok.type == tokenize.NAME and tok.string == "async" and nxt.string == "=":
            found.append((tok.start[0], tok.start[1] + 1))
    return found


def _try_parse(source: str, path: str) -> ast.Module | None:
    try:
        return ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def read_source(path: str) -> tuple[str, bool] | LintFinding:
    """The file's text (honouring a PEP 263 coding line) and whether it was UTF-8 (so a word
    of ASCII is in the text exactly when it is in the bytes), or a DDL000 finding."""
    try:
        data = read_bytes(path)
    except OSError as err:
        return LintFinding(path, 1, 1, "DDL000", f"cannot read: {err.strerror or err}")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding), encoding in ("utf-8", "utf-8-sig")
    except (SyntaxError, UnicodeDecodeError, LookupError) as err:
        return LintFinding(path, 1, 1, "DDL000", f"cannot decode: {err}")


def lint_files(
    files: Iterable[str], root: str | None = None, named: Iterable[str] | None = None
) -> list[LintFinding]:
    """Lint these files as parts of one project under root (default: found from the files).
    `named`: those the user named (default: all); the others were found in a folder."""
    files = list(files)
    told = set(files) if named is None else set(named)
    project = Project(root or find_root(files)) if files else None
    if project is not None:
        project.pending = {os.path.abspath(f) for f in files}
        project.given = frozenset(project.pending)
    findings: list[LintFinding] = []
    # Trees and indexes hold no reference cycles (parents live in an id() map), so the cycle
    # collector has nothing to find here; paused, it stops re-scanning every live tree.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for path in files:
            read = read_source(path)
            if isinstance(read, LintFinding):
                findings.append(read)
                continue
            source, utf8 = read
            # The project's scan of the files' bytes may have told the markers already.
            marked = project.marked(path) if project is not None and utf8 else None
            findings.extend(lint_source(source, path, project, marked=marked, named=path in told))
        if project is not None and (project.built or project.class_modules):
            findings.extend(_built_class_findings(project, files, findings))
    finally:
        if was_enabled:
            gc.enable()
    return findings


def _built_class_findings(
    project: Project, files: list[str], findings: list[LintFinding]
) -> list[LintFinding]:
    """The writes in the constructors of classes the program builds on every rank (see
    built_classes), less what the file's own checks said there and what `# noqa` silences."""
    linted = {os.path.abspath(f) for f in files}
    said = {(os.path.abspath(f.path), f.line, f.code) for f in findings}
    paths = {os.path.abspath(f): f for f in files}  # reported under the path as given
    out: list[LintFinding] = []
    lines: dict[str, list[str]] = {}
    for found in built_class_writes(project, linted):
        if (found.path, found.line, found.code) in said:
            continue
        if found.path not in lines:
            text = read_source(found.path)
            lines[found.path] = text[0].splitlines() if isinstance(text, tuple) else []
        shown = replace(found, path=paths.get(found.path, found.path))
        if not _suppressed(shown, lines[found.path]):
            out.append(shown)
            said.add((found.path, found.line, found.code))
    return sorted(out)


def lint_paths(paths: Iterable[str], root: str | None = None) -> list[LintFinding]:
    """Lint files and folders (recursively, `.py` only, vendored/virtualenv folders skipped),
    following imports into the project under root."""
    paths = list(paths)
    collected = collect(paths)
    return lint_files(collected.files, root or find_root(paths), collected.named)
