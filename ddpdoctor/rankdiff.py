"""What one rank's check data changes against a reference document, as leaf paths and values.

gathered.json (version 2) stores, for each check, the values that differ from a reference as one
JSON array per rank, grouped by the set of paths that differ (its *shape*). At 16,384 ranks that
agree on almost everything this is what makes the file small and its reading cheap: the paths
are written and compiled once per shape, not once per rank, and rebuilding a rank's data copies
only the dicts on a changed path (everything else is the reference's own objects, shared).

    diff(ref, data)       -> Shape, values      the writer
    compile_shape(shape)  -> Plan               once per shape, the reader
    rebuild(ref, plan, row) -> data             once per rank, the reader
"""

from __future__ import annotations

from typing import Any

Path = tuple[str, ...]
# (paths whose value is set, paths that are gone): keys and the order the values come in
Shape = tuple[tuple[Path, ...], tuple[Path, ...]]
# per dict on a changed path: (key, index of its value in the row) pairs, keys gone, and
# (key, Plan) for the nested dicts that change
Plan = tuple[tuple[tuple[str, int], ...], tuple[str, ...], tuple[tuple[str, Any], ...]]
EMPTY: Plan = ((), (), ())


def diff(ref: dict[str, Any], data: dict[str, Any]) -> tuple[Shape, list[Any]]:
    """The leaves of `data` that differ from `ref`: descends only where both sides are dicts;
    anything else that differs (a list, a scalar, a dict replacing a list) is set whole."""
    sets: list[Path] = []
    values: list[Any] = []
    gone: list[Path] = []
    _walk(ref, data, (), sets, values, gone)
    return (tuple(sets), tuple(gone)), values


def _walk(
    ref: dict[str, Any],
    data: dict[str, Any],
    prefix: Path,
    sets: list[Path],
    values: list[Any],
    gone: list[Path],
) -> None:
    for k, v in data.items():
        if k in ref:
            r = ref[k]
            if type(r) is type(v) and r == v:
                continue
            if type(r) is dict and type(v) is dict:
                _walk(r, v, (*prefix, k), sets, values, gone)
                continue
        sets.append((*prefix, k))
        values.append(v)
    gone.extend((*prefix, k) for k in ref if k not in data)


def compile_shape(shape: Shape, offset: int = 0) -> Plan:
    """The paths of a shape as a tree of keys, so that rebuilding walks each changed dict once.
    `offset`: where the values start in a row (rows carry a few fields before them)."""
    sets, gone = shape
    tree: dict[str, Any] = {}
    for i, path in enumerate(sets):
        _node(tree, path)[path[-1]] = offset + i
    for path in gone:
        _node(tree, path)[path[-1]] = None
    return _freeze(tree)


def _node(tree: dict[str, Any], path: Path) -> dict[str, Any]:
    for k in path[:-1]:
        tree = tree.setdefault(k, {})
    return tree


def _freeze(tree: dict[str, Any]) -> Plan:
    if not tree:
        return EMPTY
    return (
        tuple((k, v) for k, v in tree.items() if type(v) is int),
        tuple(k for k, v in tree.items() if v is None),
        tuple((k, _freeze(v)) for k, v in tree.items() if type(v) is dict),
    )


def rebuild(ref: dict[str, Any], plan: Plan, row: list[Any]) -> dict[str, Any]:
    """`ref` with the values of `row` placed at the plan's paths. An empty plan returns `ref`
    itself: ranks whose data is the same share one object."""
    if plan is EMPTY:
        return ref
    leaves, gone, nested = plan
    out = ref.copy()
    for k, i in leaves:
        out[k] = row[i]
    for k in gone:
        out.pop(k, None)
    for k, sub in nested:
        out[k] = rebuild(ref[k], sub, row)
    return out


def paths_json(shape: Shape) -> dict[str, list[list[str]]]:
    sets, gone = shape
    doc: dict[str, list[list[str]]] = {"set": [list(p) for p in sets]}
    if gone:
        doc["gone"] = [list(p) for p in gone]
    return doc


def shape_from_json(doc: dict[str, Any]) -> Shape:
    sets = tuple(tuple(str(k) for k in p) for p in doc.get("set") or [])
    gone = tuple(tuple(str(k) for k in p) for p in doc.get("gone") or [])
    if any(not p for p in (*sets, *gone)):
        raise ValueError("an empty path in a shape")
    return sets, gone
