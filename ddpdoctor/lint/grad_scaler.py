"""DDL005: GradScaler calls out of order within a training step — zero_grad between
`scale(loss).backward()` and `step`, clipping before `unscale_`, `step` with no `update`, a
scaler built inside the training loop, `unscale_` twice per step. Calls in the two arms of an
if/else never count against each other."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ddpdoctor.lint.finding import Hit
from ddpdoctor.lint.guards import exclusive, exits
from ddpdoctor.lint.index import ModuleIndex, calls_in_order, dotted, last_name, position

CLIPS = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"})
SELF_UNSCALING = ("accelerator", "fabric", "engine")  # their clip unscales first


@dataclass(frozen=True)
class _Event:
    kind: str  # B backward-on-scaled-loss, Z zero_grad, C clip, U unscale_, S step, P update
    call: ast.Call
    scaler: str = ""
    target: str = ""


def _skips_the_step(index: ModuleIndex, call: ast.Call) -> bool:
    """`if bad_loss: optimizer.zero_grad(); continue`: the gradients are dropped and this step
    is skipped on purpose (a NaN guard), not zeroed before the step."""
    child: ast.AST = call
    for anc in index.ancestors(call):
        for name in ("body", "orelse"):
            block = getattr(anc, name, None)
            if isinstance(block, list) and child in block:
                return exits(block[block.index(child) + 1 :])
        child = anc
    return False


def _scaler_key(index: ModuleIndex, recv: ast.AST) -> str | None:
    key = dotted(recv)
    if key is not None and "scaler" in key.rsplit(".", 1)[-1].lower():
        return key
    for origin in index.origins(recv):
        if isinstance(origin, ast.Call) and index.callee_name(origin) == "GradScaler":
            return key or "scaler"
    return None


def _clip_by_name(index: ModuleIndex, call: ast.Call, name: str) -> bool:
    """A clipper kept under a name that says so and defined nowhere in this file (joeynmt's
    `self.clip_grad_fun(parameters=...)`, a `partial(clip_grad_norm_, ...)` built elsewhere)."""
    return "clip_grad" in name.lower() and not index.resolve_call(call)


def _event(index: ModuleIndex, call: ast.Call) -> _Event | None:
    func = call.func
    name = index.callee_name(call)
    if name == "zero_grad":
        recv = (dotted(func.value) or "") if isinstance(func, ast.Attribute) else ""
        return _Event("Z", call, target=recv)
    if name in CLIPS or _clip_by_name(index, call, name):
        recv = (dotted(func.value) or "") if isinstance(func, ast.Attribute) else ""
        return None if any(w in recv.lower() for w in SELF_UNSCALING) else _Event("C", call)
    if not isinstance(func, ast.Attribute):
        return None
    if name == "backward":
        scaled = func.value
        if isinstance(scaled, ast.Call) and last_name(scaled.func) == "scale":
            key = isinstance(scaled.func, ast.Attribute) and _scaler_key(index, scaled.func.value)
            return _Event("B", call, key) if key else None
        return None
    if name in ("unscale_", "step", "update"):
        key = _scaler_key(index, func.value)
        if key is None:
            return None
        target = (dotted(call.args[0]) or "") if call.args else ""
        return _Event({"unscale_": "U", "step": "S", "update": "P"}[name], call, key, target)
    return None


class _StepOrder:
    def __init__(self, index: ModuleIndex, events: list[_Event]) -> None:
        self.index = index
        self.events = events

    def together(self, *nodes: ast.AST) -> bool:
        return not any(
            exclusive(self.index, a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :]
        )

    def between(self, kind: str, a: _Event, b: _Event, scaler: str) -> bool:
        lo, hi = position(a.call), position(b.call)
        return any(
            e.kind == kind
            and e.scaler == scaler
            and lo < position(e.call) < hi
            and self.together(e.call, b.call)
            for e in self.events
        )

    def unscaled_before(self, b: _Event, c: _Event) -> bool:
        """An unscale_ of b's scaler between the backward and the clip on every pass that
        clips: one under a test that neither holds (`if (step + 1) % accum == 0:
        scaler.unscale_(opt)`, then a clip on every micro-step: PIA) leaves the other passes
        clipping scaled gradients."""
        lo, hi = position(b.call), position(c.call)
        known = self._tests_over(b.call) | self._tests_over(c.call)
        return any(
            u.kind == "U"
            and u.scaler == b.scaler
            and lo < position(u.call) < hi
            and self.together(u.call, c.call)
            and self._tests_over(u.call) <= known
            for u in self.events
        )

    def _tests_over(self, node: ast.AST) -> set[str]:
        """The tests of the `if`s holding a node in its function, by their text."""
        scope = self.index.scope_of(node)
        tests: set[str] = set()
        for anc in self.index.ancestors(node):
            if anc is scope:
                break
            if isinstance(anc, ast.If):
                tests.add(ast.dump(anc.test))
        return tests

    def open_backward(self, e: _Event) -> _Event | None:
        """The scaled backward this call follows while its step is still to come, if any."""
        here = position(e.call)
        backwards = [
            b
            for b in self.events
            if b.kind == "B" and position(b.call) < here and self.together(b.call, e.call)
        ]
        if not backwards:
            return None
        b = backwards[-1]
        if self.between("S", b, e, b.scaler):
            return None
        later_step = any(
            s.kind == "S"
            and s.scaler == b.scaler
            and position(s.call) > here
            and self.together(s.call, e.call, b.call)
            for s in self.events
        )
        return b if later_step else None

    def other_optimizer(self, z: _Event) -> bool:
        """`opt_g.zero_grad()` while `opt_d` is about to step (GAN code): not this step's
        gradients."""
        steps = [e for e in self.events if e.kind == "S"]
        later = [s for s in steps if position(s.call) > position(z.call)]
        next_step = later[0].target if later else ""
        return z.target in {s.target for s in steps} and z.target != next_step

    def hits(self) -> list[Hit]:
        hits: list[Hit] = []
        for e in self.events:
            if (
                e.kind == "Z"
                and self.open_backward(e)
                and not self.other_optimizer(e)
                and not _skips_the_step(self.index, e.call)
            ):
                hits.append(
                    Hit(
                        e.call,
                        "DDL005",
                        "zero_grad between scaler.scale(loss).backward() and scaler.step(): "
                        "the step sees no gradients",
                    )
                )
            elif e.kind == "C":
                b = self.open_backward(e)
                if b is not None and not self.unscaled_before(b, e):
                    some = self.between("U", b, e, b.scaler)
                    hits.append(
                        Hit(
                            e.call,
                            "DDL005",
                            "gradients are clipped while still scaled"
                            + (" on the passes where the unscale_ above is skipped" if some else "")
                            + f": call {b.scaler}.unscale_(optimizer) before every clip",
                        )
                    )
            elif e.kind == "U":
                hit = self.unscaled_twice(e)
                if hit is not None:
                    hits.append(hit)
        return hits

    def unscaled_twice(self, u: _Event) -> Hit | None:
        for prev in self.events:
            if prev is u:
                break
            if (
                prev.kind == "U"
                and (prev.scaler, prev.target) == (u.scaler, u.target)
                and self.together(prev.call, u.call)
                and not self.between("S", prev, u, u.scaler)
            ):
                return Hit(
                    u.call,
                    "DDL005",
                    f"unscale_ called again before step (first on line {prev.call.lineno}): "
                    "it raises 'unscale_() has already been called'",
                )
        u_loops = self.index.enclosing_loops(u.call)
        # Only the step that consumes this unscale_, the next one: a leftover step after the
        # loop (minimind's partial accumulation flushed at the end) is another step's.
        for s in self._next_step(u):
            extra = [loop for loop in u_loops if loop not in self.index.enclosing_loops(s.call)]
            if extra:
                return Hit(
                    u.call,
                    "DDL005",
                    f"unscale_ runs on every pass of the loop on line {extra[-1].lineno} but "
                    f"step only after it: unscale_ twice per step raises",
                )
            gate = self.accumulation_gate(u.call, s.call)
            if gate is not None:
                return Hit(
                    u.call,
                    "DDL005",
                    f"unscale_ runs on every micro-step but step only when the test on line "
                    f"{gate.lineno} passes: the second unscale_ before a step raises",
                )
        return None

    def _next_step(self, u: _Event) -> list[_Event]:
        """The first `step` of u's scaler after u, if any."""
        later = [
            e
            for e in self.events
            if e.kind == "S" and e.scaler == u.scaler and position(e.call) >= position(u.call)
        ]
        return sorted(later, key=lambda e: position(e.call))[:1]

    def accumulation_gate(self, u: ast.Call, s: ast.Call) -> ast.If | None:
        """`if (i + 1) % accum == 0: scaler.step(...)` in the same loop as an unconditional
        unscale_: gradient accumulation that unscales every micro-step."""
        loops = self.index.enclosing_loops(s)
        if not loops or loops[0] not in self.index.enclosing_loops(u):
            return None
        u_ancestors = {id(a) for a in self.index.ancestors(u)}
        u_tests = self._tests_over(u)  # `if (step + 1) % accum == 0:` over both: no gate
        for anc in self.index.ancestors(s):
            if anc is loops[0]:
                break
            if (
                isinstance(anc, ast.If)
                and id(anc) not in u_ancestors
                and ast.dump(anc.test) not in u_tests
                and any(
                    isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
                    for n in ast.walk(anc.test)
                )
            ):
                return anc
        return None


def _innermost_loop(index: ModuleIndex, node: ast.AST) -> int | None:
    loops = index.enclosing_loops(node)
    return id(loops[0]) if loops else None


def _scaler_in_training_loop(index: ModuleIndex) -> list[Hit]:
    """A scaler made in the same loop body as the backward: one per step. (One per fold or
    per trial, in an outer loop, is a fresh run and fine.)"""
    step_loops = {_innermost_loop(index, b) for b in index.calls_named("backward")}
    step_loops.discard(None)
    hits = []
    for call in index.calls_named("GradScaler"):
        if _innermost_loop(index, call) in step_loops:
            hits.append(
                Hit(
                    call,
                    "DDL005",
                    "GradScaler created inside the training loop: it forgets its scale every "
                    "step (create it once, before the loop)",
                )
            )
    return hits


def _step_without_update(index: ModuleIndex, events: list[_Event]) -> list[Hit]:
    updated = {e.scaler.rsplit(".", 1)[-1] for e in events if e.kind == "P"}
    hits, seen = [], set()
    for e in events:
        short = e.scaler.rsplit(".", 1)[-1]
        if e.kind == "S" and short not in updated and short not in seen:
            seen.add(short)
            hits.append(
                Hit(
                    e.call,
                    "DDL005",
                    f"{e.scaler}.step() without {e.scaler}.update(): the loss scale never adapts",
                )
            )
    return hits


def check(index: ModuleIndex) -> list[Hit]:
    relevant = index.calls_named("scale", "unscale_", "GradScaler")
    if not relevant:
        return []
    hits = _scaler_in_training_loop(index)
    scopes: dict[int, ast.AST] = {}
    for call in index.calls_named("scale", "unscale_", "step", "update"):
        scope = index.scope_of(call)
        scopes[id(scope)] = scope
    all_events: list[_Event] = []
    for scope in scopes.values():
        events = [e for c in calls_in_order(index, scope) if (e := _event(index, c))]
        all_events.extend(events)
        hits.extend(_StepOrder(index, events).hits())
    return hits + _step_without_update(index, all_events)
