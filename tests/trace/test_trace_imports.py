"""The parent side (judges, record, stack parser, the entry's argument parsing) imports no torch:
the launcher and the report can judge a run folder without it."""

from __future__ import annotations

import subprocess
import sys

from trace_harness import ROOT


def test_parent_side_imports_no_torch() -> None:
    code = (
        "import sys; import ddpdoctor.trace.judges, ddpdoctor.trace.record, ddpdoctor.trace.stacks, "
        "ddpdoctor.trace.catalog, ddpdoctor.trace.entry, ddpdoctor.trace.judges.__main__; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr


def test_spawned_workers_get_plain_pythons_environment() -> None:
    """Under `ddpdoctor run --nproc 1`, torchrun's variables would reach mp.spawn's workers:
    each would take RANK=0, and TORCHELASTIC_USE_AGENT_STORE turns their own tcp:// init into a
    client of a store nobody serves (a real hang, seen with plain torchrun too)."""
    from ddpdoctor.trace.spawned import plain_python_env

    env = plain_python_env(
        {
            "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
            "GROUP_RANK": "0", "TORCHELASTIC_USE_AGENT_STORE": "True",
            "TORCHELASTIC_RUN_ID": "x", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
            "PATH": "/usr/bin", "OMP_NUM_THREADS": "1",
        },
        port=41234,
    )  # fmt: skip
    assert env == {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "41234",
        "PATH": "/usr/bin",
        "OMP_NUM_THREADS": "1",
    }
