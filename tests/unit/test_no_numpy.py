"""The doctor needs nothing but torch on the ranks: the CPU wheel of torch installs no numpy, and
torch's *_object collectives fail without it. Run the exchange and the gradscaler digest in a
real one-rank gloo group with numpy made unimportable."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import sys
    sys.modules["numpy"] = None  # import numpy now raises ImportError
    import torch, torch.distributed as dist
    from ddpdoctor.rank import exchange as wire
    from ddpdoctor.checks.gradscaler import _param_digest
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
    got = wire.all_gather_json({"rank": 0, "data": {"ünïcode": [1, 2.5, None]}}, 1, dist.group.WORLD)
    assert got == [{"rank": 0, "data": {"ünïcode": [1, 2.5, None]}}], got
    shared = wire.share_json({"ünïcode": "ë"}, True, 0, 1, dist.group.WORLD)
    assert shared.docs == [{"ünïcode": "ë"}] and shared.first_failed == 0, shared
    assert (shared.last_failed, shared.sent, shared.received) == (0, 24, 24), shared
    assert len(_param_digest(torch.nn.Linear(3, 2))) == 12
    dist.destroy_process_group()
    print("ok")
""")


def test_exchange_and_digest_work_without_numpy() -> None:
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("ok")
