"""Load a pickle from a ticket without running anything it holds. A pickle runs code only by
naming a callable (GLOBAL / STACK_GLOBAL / INST / OBJ / EXT*, then REDUCE / BUILD / NEWOBJ): the
opcodes are read first with `pickletools` and any of those refuses the file; the unpickler that
then loads it also refuses every `find_class` and persistent id. Flight-recorder dumps are plain
dicts, lists, tuples, str, int, float, bool and None, so they load; nothing else does."""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any

# Opcodes that name, call or build an object: none of them occurs in a plain-data pickle.
_CODE_OPCODES = frozenset(
    {
        "GLOBAL",
        "STACK_GLOBAL",
        "INST",
        "OBJ",
        "REDUCE",
        "BUILD",
        "NEWOBJ",
        "NEWOBJ_EX",
        "EXT1",
        "EXT2",
        "EXT4",
        "PERSID",
        "BINPERSID",
    }
)


class UnsafePickle(ValueError):
    """The pickle names code (a class or a function) or is not a pickle at all."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:  # noqa: ARG002 - refuse all
        raise UnsafePickle(f"it names {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:  # noqa: ARG002
        raise UnsafePickle("it holds a persistent reference")


def loads(data: bytes) -> Any:
    """Plain data from `data`, or UnsafePickle saying why not (nothing was executed)."""
    try:
        for op, arg, _pos in pickletools.genops(data):
            if op.name in _CODE_OPCODES:
                what = f" {arg}" if isinstance(arg, str) else ""
                raise UnsafePickle(f"it would run code ({op.name}{what})")
    except UnsafePickle:
        raise
    except Exception as exc:  # a truncated or garbled pickle: say so, do not guess
        raise UnsafePickle(f"not a readable pickle ({exc})") from None
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except UnsafePickle:
        raise
    except Exception as exc:
        raise UnsafePickle(f"not a readable pickle ({exc})") from None
