"""`write_atomically`: a reader sees the old file or the new one, and a failure leaves nothing."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ctxr.atomic_write import temporary_beside, write_atomically


def test_text_and_bytes_replace_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    target.write_text("old", encoding="utf-8")
    write_atomically(target, "ünïcode\n")
    assert target.read_bytes() == "ünïcode\n".encode()
    write_atomically(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert os.listdir(tmp_path) == ["manifest.json"]  # no temporary file left beside it


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "ledger.json"
    target.write_text("paid for", encoding="utf-8")
    # The rename is refused (a directory stands where the file is): the temporary is gone.
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "inside").write_text("x", encoding="utf-8")
    with pytest.raises(OSError):
        write_atomically(blocked, "new")
    assert sorted(os.listdir(tmp_path)) == ["blocked", "ledger.json"]
    # The temporary itself cannot be made: the error is raised, the target untouched.
    temporary_beside(target).mkdir()
    with pytest.raises(OSError):
        write_atomically(target, "new")
    assert target.read_text(encoding="utf-8") == "paid for"


def test_a_secret_is_never_readable_by_others(tmp_path: Path) -> None:
    target = tmp_path / "owner.json"
    write_atomically(target, '{"token": "t"}', mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_writers_in_threads_never_share_a_temporary(tmp_path: Path) -> None:
    target = tmp_path / "seal.json"
    bodies = [f"{n}" * 100_000 for n in range(8)]
    start = threading.Barrier(len(bodies))

    def write(body: str) -> None:
        start.wait()
        for _ in range(20):
            write_atomically(target, body)

    threads = [threading.Thread(target=write, args=(b,)) for b in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Whichever wrote last, the file is one writer's body whole, never a mix.
    assert target.read_text(encoding="utf-8") in bodies
    assert os.listdir(tmp_path) == ["seal.json"]


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
    dead = int(finished.stdout)
    abandoned = tmp_path / f".manifest.json.{dead}.1.tmp"
    abandoned.write_text("half a manifest", encoding="utf-8")
    in_flight = tmp_path / f".manifest.json.{os.getpid()}.999.tmp"  # this process, another thread
    in_flight.write_text("being written", encoding="utf-8")
    other_file = tmp_path / f".roots.json.{dead}.1.tmp"  # another file's: not this write's
    other_file.write_text("x", encoding="utf-8")
    write_atomically(target, "{}")
    assert not abandoned.exists()
    assert in_flight.exists() and other_file.exists()
