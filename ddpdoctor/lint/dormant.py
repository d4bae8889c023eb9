"""Code the program does not run as written: a function of a script that nothing calls, and a
branch behind a switch the script leaves off (`CONTINUE_TRAINING = None`, then `if
CONTINUE_TRAINING: torch.load(...)`). A mistake there bites only once someone edits the script,
so a fail-level finding there is told as a warning, with the reason (AudioLLM's aligner: an
`inference()` beside `main()` that the main guard never calls)."""

from __future__ import annotations

import ast

from ddpdoctor.lint.index import FUNC_TYPES, NO_CONSTANT, ModuleIndex, none_tested

# A script that may call its functions by name at run time: python-fire's `Fire()` with no
# target, `globals()[name]()`, `getattr(sys.modules[__name__], name)`, a listed `__all__`.
DISPATCH_WORDS = frozenset({"Fire", "globals", "modules", "__all__", "locals"})


def why_dormant(index: ModuleIndex, node: ast.AST) -> str | None:
    """Why the code at `node` does not run in the program as written, or None."""
    func = _outermost_function(index, node)
    if func is not None and _never_called(index, func):
        return f"in {func.name}(), which nothing in this file calls"
    return _switched_off(index, node)


def _scopes(index: ModuleIndex, node: ast.AST) -> list[ast.AST]:
    """The functions, lambdas and classes around a node, innermost first."""
    out: list[ast.AST] = []
    scope = index.scope_of(node)
    while scope is not index.tree and len(out) < 50:
        out.append(scope)
        scope = index.scope_of(scope)
    return out


def _outermost_function(index: ModuleIndex, node: ast.AST) -> ast.AST | None:
    return next((s for s in reversed(_scopes(index, node)) if isinstance(s, FUNC_TYPES)), None)


def _never_called(index: ModuleIndex, func: ast.AST) -> bool:
    """A module-level function of a script (it has a main guard) that no line of the file
    names, undecorated, in a file that calls nothing by a name chosen at run time. Another
    module may still import it: that program runs it, and is judged when linted."""
    name = getattr(func, "name", "")
    return (
        index.has_main_guard
        and index.parent(func) is index.tree
        and not getattr(func, "decorator_list", None)
        and name not in index.name_loads
        and name not in index.attr_names
        and not any(s == name for s in index.strings)
        and not (DISPATCH_WORDS & (index.name_loads | index.attr_names))
        and not (DISPATCH_WORDS & set(index.calls_by_name))
    )


def _switched_off(index: ModuleIndex, node: ast.AST) -> str | None:
    """In the body of `if NAME:` / `if NAME is not None:` where NAME, a name of this file that
    is no parameter, holds one constant that fails the test (None, False, 0, '')."""
    child = node
    for anc in index.ancestors(node):
        if isinstance(anc, ast.If) and child in anc.body:
            name = _switch_name(anc.test)
            if name is not None and not _a_parameter(index, anc, name.id):
                value = index.constant_value(name)
                if value is not NO_CONSTANT and not value:
                    return f"in a branch that runs only when {name.id} is set: it is {value!r} here"
        child = anc
    return None


def _switch_name(test: ast.expr) -> ast.Name | None:
    name = test if isinstance(test, ast.Name) else none_tested(test, given=True)
    return name if isinstance(name, ast.Name) else None


def _a_parameter(index: ModuleIndex, node: ast.AST, name: str) -> bool:
    """A parameter of a function around the test: its value is the caller's, not a constant."""
    for anc in _scopes(index, node):
        if isinstance(anc, (*FUNC_TYPES, ast.Lambda)):
            args = anc.args
            every = (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
            if any(a is not None and a.arg == name for a in every):
                return True
    return False
