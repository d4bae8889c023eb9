"""The stacks taken at a verdict, on real processes (no torchrun): a running rank answers SIGUSR1
through faulthandler, a stopped one is read from outside with pystack and left stopped, both
in the same wait. (The same path under torchrun: tests/integration/test_faults.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from ddpdoctor.job import remote_stack, stacks
from ddpdoctor.runfiles import RunFolder

RANK = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    from ddpdoctor.trace import stacks
    stacks.install(Path(sys.argv[1]))
    def waiting_here():
        Path(sys.argv[2]).touch()  # ready: from now on the stack is in this function
        while True:
            time.sleep(0.05)
    waiting_here()
""")


def start(folder: RunFolder, rank: int) -> subprocess.Popen:
    ready, script = folder.path / f"ready-{rank}", folder.path / "rank.py"
    script.write_text(RANK)
    proc = subprocess.Popen([sys.executable, str(script), str(folder.stack_file(rank)), str(ready)])
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc


@pytest.mark.skipif(remote_stack.tool() is None, reason="pystack (the [stacks] extra) missing")
def test_a_running_and_a_stopped_rank_both_give_their_stacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the mechanism, not its speed (3.5 s in the product; a loaded test machine may need more)
    monkeypatch.setattr(remote_stack, "TIMEOUT_S", 20.0)
    folder = RunFolder(tmp_path)
    procs = [start(folder, 0), start(folder, 1)]
    try:
        os.kill(procs[1].pid, signal.SIGSTOP)
        alive = {r: psutil.Process(p.pid) for r, p in enumerate(procs)}
        deadline = time.monotonic() + 10  # SIGSTOP is delivered asynchronously
        while alive[1].status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
            time.sleep(0.01)
        dumps: dict[int, str] = {}
        stacks.take(folder, alive, dumps)
        assert sorted(dumps) == [0, 1]
        for r in (0, 1):
            assert stacks.frames(dumps[r])[0].startswith(f"waiting_here ({tmp_path / 'rank.py'}:")
        assert alive[1].status() == psutil.STATUS_STOPPED  # read, not resumed
        assert folder.flight_request.exists()  # the ranks were asked for their recorders too
    finally:
        for p in procs:
            p.kill()
            p.wait()


LIBRARY_RANK = textwrap.dedent("""\
    import sys, threading, time
    from pathlib import Path
    from ddpdoctor.trace import stacks
    stacks.install(Path(sys.argv[1]))
    def waiting_here():
        # a side thread started last: pystack lists it first, and marks no thread current
        threading.Thread(target=threading.Event().wait, daemon=True).start()
        Path(sys.argv[2]).touch()
        while True:
            time.sleep(0.05)
    waiting_here()
""")


@pytest.mark.skipif(remote_stack.tool() is None, reason="pystack (the [stacks] extra) missing")
def test_a_stopped_ranks_main_thread_is_the_one_with_its_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopped rank whose main thread holds no user frame (a probe of ours mid-collective;
    here a script under a site-packages folder) and a newer side thread: the rank's stack is
    its main thread's, told by its id (the process's pid), not by its place in pystack's list."""
    monkeypatch.setattr(remote_stack, "TIMEOUT_S", 20.0)
    folder = RunFolder(tmp_path)
    library = tmp_path / "site-packages"
    library.mkdir()
    script, ready = library / "rank.py", tmp_path / "ready"
    script.write_text(LIBRARY_RANK)
    proc = subprocess.Popen([sys.executable, str(script), str(folder.stack_file(0)), str(ready)])
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGSTOP)
        alive = {0: psutil.Process(proc.pid)}
        deadline = time.monotonic() + 10
        while alive[0].status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
            time.sleep(0.01)
        dumps: dict[int, str] = {}
        stacks.take(folder, alive, dumps)
        frames = stacks.frames(dumps[0])
        assert any(f.startswith(f"waiting_here ({script}:") for f in frames), frames
    finally:
        proc.kill()
        proc.wait()


def test_pystacks_layout_marks_the_pids_thread_current() -> None:
    """The conversion itself, on pystack's layout: newest thread first, none current; the
    thread whose id is the pid becomes the current one, and only with the pid given."""
    probe = f"{os.sep}site-packages{os.sep}ddpdoctor{os.sep}checks{os.sep}allreduce.py"
    lock = threading.__file__  # the standard library's: no user frame either
    text = "\n".join(
        [
            "Traceback for thread 4242 (python) [] (most recent call last):",
            f'    (Python) File "{lock}", line 1002, in _bootstrap',
            f'    (Python) File "{lock}", line 331, in wait',
            "Traceback for thread 4100 (python) [Has the GIL] (most recent call last):",
            f'    (Python) File "{probe}", line 57, in run',
            f'    (Python) File "{probe}", line 80, in timed_all_reduce',
        ]
    )
    main = stacks.frames(remote_stack.as_faulthandler(text, pid=4100) or "")
    assert main[0] == f"timed_all_reduce ({probe}:80)"
    unmarked = stacks.frames(remote_stack.as_faulthandler(text) or "")
    assert unmarked[0].startswith("wait (")  # the list's first thread: what went wrong before
