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
