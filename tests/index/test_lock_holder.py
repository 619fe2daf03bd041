"""Who holds an index's lock: this process or another, by pid, as the kernel lists it."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

from ctxr.errors import IndexInUseError
from ctxr.index.lock_holder import holder_phrase, holder_pid
from ctxr.index.run_lock import LOCK_NAME, index_lock

HOLD = """import fcntl, sys
handle = open(sys.argv[1], "a+")
fcntl.flock(handle, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_a_lock_of_this_process_names_this_process(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    assert holder_pid(path) is None and holder_phrase(path) == "another ctxr process"
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        assert holder_phrase(path) == f"this process (pid {os.getpid()})"


def test_a_run_lock_held_elsewhere_names_that_pid(tmp_path: Path) -> None:
    (tmp_path / "idx").mkdir()
    lock = tmp_path / "idx" / LOCK_NAME
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        try:
            with index_lock(tmp_path / "idx"):
                raise AssertionError("the lock was not refused")
        except IndexInUseError as exc:
            assert f"another ctxr process (pid {child.pid})" in str(exc)
    finally:
        child.kill()
        child.wait()
