"""Where output goes (issue 11): a --json/--csv path is checked before any work and is written
through when it is not a regular file (a device, a FIFO) or atomically replaced when it is (a
symlink keeps pointing where it pointed); a --run-dir is claimed (locked, emptied of our own
files only); and a write that fails after a finished run never loses the report.

The /dev/null and full-disk cases run inside a private mount namespace (`unshare -m`), so the
machine's real /dev/null is never at risk; they skip with the reason where that is not allowed."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ddpdoctor.job.plan import claim_run_dir
from ddpdoctor.report import schema


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ddpdoctor", *args], capture_output=True, text=True, timeout=timeout
    )


def in_private_mounts(script: str) -> subprocess.CompletedProcess:
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("mount namespaces are not permitted here")
    return subprocess.run(
        ["unshare", "-m", "bash", "-c", "mount --make-rprivate / && " + script],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_json_to_dev_null_writes_through_and_leaves_the_device(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    done = in_private_mounts(
        f"cp -a /dev/null {dev}/ && mount --bind {dev} /dev && "
        f"{sys.executable} -m ddpdoctor problems --json /dev/null && stat -c %F /dev/null"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "character special file"


def test_json_through_a_symlink_replaces_the_target_and_keeps_the_link(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert run_cli("problems", "--json", str(link)).returncode == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["probes"]


def test_json_into_a_fifo_reaches_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    done = run_cli("problems", "--json", str(fifo))
    reader.join(timeout=30)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got[0])["probes"]


BAD_OUTPUTS = [
    (["check", "--json", "/proc/nope.json"], "cannot write /proc/nope.json"),
    (["check", "--json", "/sys/nope.json"], "cannot write /sys/nope.json"),
    (["check", "--json", "new.json/"], "new.json/ is a directory"),
    (["check", "--json", "x" * 300 + ".json"], "File name too long"),
    (["bench-allreduce", "--csv", "/proc/nope.csv"], "cannot write /proc/nope.csv"),
    (["bench-allreduce", "--csv", "-", "--json", "-"], "cannot both have stdout"),
    (["bench-allreduce", "--max-bytes", "64K", "--expect-busbw", "1"], "--expect-busbw needs"),
    (["check", "--nproc", "1024", "--backend", "gloo"], "needs about 350.0 GiB on CPU"),
    (["problems", "--json", "."], ". is a directory"),
    (["check", "--only", "bad\nid"], "unknown check id bad\\nid in --only"),
]


@pytest.mark.parametrize("args,message", BAD_OUTPUTS, ids=[a[-1][:30] for a, _ in BAD_OUTPUTS])
def test_bad_output_paths_are_usage_errors_before_any_work(args: list[str], message: str) -> None:
    done = run_cli(*args, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr
    assert "torchrun" not in done.stdout  # nothing was launched


def test_a_run_dir_in_use_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "shared"
    run_dir.mkdir()
    with open(run_dir / ".ddpdoctor.lock", "a+") as held:  # another run holds it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = run_cli("check", "--run-dir", str(run_dir))
    assert done.returncode == 2
    assert f"--run-dir {run_dir} is in use by another ddpdoctor run" in done.stderr


def test_claiming_a_run_dir_removes_only_our_own_files(tmp_path: Path) -> None:
    for name in ("rank-0.json", "rank-3.beat", "rank-1.log", "gathered.json", "spec.json"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "rank-notes.txt").write_text("another tool's file")
    (tmp_path / "rank-0.json.bak").write_text("kept")
    lock = claim_run_dir(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".ddpdoctor.lock",
        "rank-0.json.bak",
        "rank-notes.txt",
    ]
    lock.close()


def test_a_run_dir_holding_a_folder_where_a_rank_file_goes_is_a_usage_error(
    tmp_path: Path,
) -> None:
    (tmp_path / "rank-0.json").mkdir()
    done = run_cli("check", "--run-dir", str(tmp_path))
    assert done.returncode == 2
    assert "Is a directory" in done.stderr and "rank-0.json" in done.stderr


def test_a_read_only_run_dir_is_a_usage_error(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    done = in_private_mounts(
        f"mount -t tmpfs -o ro tmpfs {ro} && {sys.executable} -m ddpdoctor check --run-dir {ro}"
    )
    assert done.returncode == 2, done.stderr
    assert "Read-only file system" in done.stderr


@pytest.mark.slow
def test_a_failed_write_after_the_run_keeps_the_report_and_the_run_folder(
    tmp_path: Path,
) -> None:
    """The disk is full when the report is written: the report is still printed, the run folder
    is kept, and the exit code says the output failed."""
    full = tmp_path / "full"
    full.mkdir()
    run_dir = tmp_path / "run"
    done = in_private_mounts(
        f"mount -t tmpfs -o size=4k tmpfs {full} && "
        f"{sys.executable} -m ddpdoctor check --only env --nproc 2 --json {full}/report.json "
        f"--run-dir {run_dir}"
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Environment" in done.stdout and "Rank files and logs:" in done.stdout
    assert "cannot write" in done.stderr and "No space left on device" in done.stderr
    assert (run_dir / "rank-0.json").exists()


def test_write_text_is_atomic_for_regular_files(tmp_path: Path) -> None:
    p = tmp_path / "out.json"
    p.write_text("old")
    inode = p.stat().st_ino
    schema.write_text(str(p), "new")
    assert p.read_text() == "new" and p.stat().st_ino != inode  # replaced, not truncated
    assert [x.name for x in tmp_path.iterdir()] == ["out.json"]  # no temporary left behind


def test_every_command_takes_debug_as_the_internal_error_message_suggests() -> None:
    assert run_cli("problems", "--debug", "--json", "-").returncode == 0
