"""Replace an attribute by a pass-through wrapper and remember the original, so that every hook
can be removed again (tests install and uninstall the tracer in one process)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

_ORIGINALS: list[tuple[Any, str, Any]] = []
_INHERITED = object()  # the class had no own attribute: remove ours to uncover the base's


def wrap(owner: Any, name: str, make: Callable[[Any], Callable[..., Any]]) -> None:
    """owner.name = make(original), keeping the original's name and docstring."""
    original = getattr(owner, name)
    own = not isinstance(owner, type) or name in owner.__dict__
    wrapper = make(original)
    functools.update_wrapper(wrapper, original)
    wrapper.__ddpdoctor_original__ = original  # type: ignore[attr-defined]
    _ORIGINALS.append((owner, name, original if own else _INHERITED))
    setattr(owner, name, wrapper)


def unwrap_all() -> None:
    while _ORIGINALS:
        owner, name, original = _ORIGINALS.pop()
        if original is _INHERITED:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
