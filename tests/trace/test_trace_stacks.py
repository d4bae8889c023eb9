"""Stack dumps: the parser on a dump written in faulthandler's format, and a real dump of a
process blocked in sleep (no torch needed) through request_dump."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ddpdoctor.trace.sites import Site
from ddpdoctor.trace.stacks import main_thread, parse_dump, request_dump, stopped_at

SITE = "/usr/lib/python3.11/site-packages"
DUMP = f"""\
Thread 0x00007f0000000001 (most recent call first):
  File "/work/ddpdoctor/trace/state.py", line 116 in _flush_loop
  File "/usr/lib/python3.11/threading.py", line 982 in run

Current thread 0x00007f0000000002 (most recent call first):
  File "{SITE}/torch/autograd/graph.py", line 979 in _engine_run_backward
  File "{SITE}/torch/_tensor.py", line 623 in backward
  File "/home/me/project/train.py", line 41 in train_step
  File "/home/me/project/train.py", line 77 in <module>
  File "<frozen runpy>", line 88 in _run_code
  File "/usr/lib/python3.11/runpy.py", line 291 in run_path
"""


def test_parse_dump_threads_and_frames() -> None:
    threads = parse_dump(DUMP)
    assert [t.current for t in threads] == [False, True]
    assert threads[1].frames[2] == ("/home/me/project/train.py", 41, "train_step")
    assert main_thread(threads) is threads[1]
    assert stopped_at(DUMP) == Site("/home/me/project/train.py", 41)


def test_parse_dump_keeps_only_the_last_of_several_dumps() -> None:
    newer = DUMP.replace("line 41 in train_step", "line 55 in evaluate")
    assert stopped_at(DUMP + "\n" + newer) == Site("/home/me/project/train.py", 55)


def test_dump_without_user_frames_names_nothing() -> None:
    only_torch = "Current thread 0x1 (most recent call first):\n" + (
        f'  File "{SITE}/torch/_tensor.py", line 623 in backward\n'
    )
    assert stopped_at(only_torch) is None
    assert stopped_at("") is None


def test_request_dump_of_a_real_blocked_process(tmp_path: Path) -> None:
    script = tmp_path / "blocked.py"
    dump = tmp_path / "stack-0.txt"
    script.write_text(
        textwrap.dedent(f"""\
        import sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from ddpdoctor.trace import stacks
        stacks.install(__import__("pathlib").Path({str(dump)!r}))
        print("ready", flush=True); time.sleep(60)
    """)
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        text = request_dump(proc.pid, dump, wait_s=5.0)
        assert text is not None
        assert stopped_at(text) == Site(str(script), 5)
    finally:
        proc.kill()
        proc.wait()
    assert request_dump(proc.pid, dump) is None  # gone: None, never an exception
