"""Which branches run in one process: the else of a distributed switch joined with a GPU
count (`args.distributed and ngpus > 1`) does; the else of a switch joined with anything
else, or of a GPU count alone (DataParallel), may not."""

from __future__ import annotations

import ast

import pytest

from ddpdoctor.lint.guards import single_process_branch
from ddpdoctor.lint.index import ModuleIndex


def _else_call_is_single(test: str) -> bool:
    tree = ast.parse(f"if {test}:\n    launch()\nelse:\n    single_main()\n")
    index = ModuleIndex(tree)
    (call,) = index.calls_named("single_main")
    return single_process_branch(index, call)


@pytest.mark.parametrize(
    ("test", "single"),
    [
        ("args.distributed", True),
        ("args.distributed and ngpus_per_node > 1", True),
        ("args.distributed and torch.cuda.device_count() >= 2", True),
        ("args.ddp and args.n_gpu > 1", True),
        ("args.distributed and args.amp", False),
        ("ngpus_per_node > 1", False),
        ("args.distributed or ngpus_per_node > 1", False),
    ],
)
def test_else_of_a_switch_joined_with_a_gpu_count_is_one_process(test: str, single: bool) -> None:
    assert _else_call_is_single(test) is single
