"""Files whose stamp (size, times, inode) is as indexed are passed over unread; any change to
the file, a restored modification time included, has it read again (`ctxr.file_stamp`)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from ctxr.config import Settings, load_settings
from ctxr.file_stamp import RACY_NS
from ctxr.index.manifest import Manifest
from ctxr.pipeline.build import build_index
from ctxr.pipeline.report import IndexReport
from tests.fakes.hash_embedder import HashEmbedder

TEXTS = {
    "a.md": "# Alpha\n\nThe aardvark sleeps in the archive.\n",
    "b.md": "# Beta\n\nThe badger guards the backups.\n",
    "c.py": "def gecko():\n    return 'candles'\n",
}


def _settings(tmp_path: Path, **overrides: Any) -> Settings:
    return load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache", **overrides)


def _settle(*paths: Path) -> None:
    """Wait until the files' last changes are further back than the racy window, the condition
    for their stamps to be trusted (a stamp of a file changed a moment ago is not)."""
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in paths)
    while time.time_ns() - newest < RACY_NS:
        time.sleep(0.05)


def _run(tmp_path: Path, **overrides: Any) -> IndexReport:
    return build_index(["docs"], _settings(tmp_path, **overrides), embedder=HashEmbedder())


@pytest.fixture
def docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in TEXTS.items():
        (folder / name).write_text(text)
    _settle(*folder.iterdir())
    first = _run(tmp_path)
    assert (first.documents_indexed, first.documents_unread) == (3, 0)
    return folder


def test_files_as_indexed_are_passed_over_unread(docs: Path, tmp_path: Path) -> None:
    again = _run(tmp_path)
    assert (again.documents_indexed, again.documents_unchanged, again.documents_unread) == (0, 3, 3)
    # Told not to trust stamps, the run reads and hashes every file, as it used to.
    hashed = _run(tmp_path, trust_file_stamps=False)
    assert (hashed.documents_unchanged, hashed.documents_unread) == (3, 0)


def test_a_change_that_keeps_the_size_and_restores_the_time_is_read(
    docs: Path, tmp_path: Path
) -> None:
    target = docs / "a.md"
    before = target.stat()
    target.write_text(TEXTS["a.md"].replace("aardvark", "anteater"))  # same length
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # as `cp -p` or `touch -d`
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    report = _run(tmp_path)
    assert (report.documents_indexed, report.documents_unread) == (1, 2)
    manifest = Manifest.load(tmp_path / "idx")
    # Changed a moment ago: its stamp is not trusted yet, so the next run reads it again.
    assert manifest.documents["docs/a.md"].stamp is None
    assert manifest.documents["docs/b.md"].stamp is not None


def test_a_file_touched_without_a_change_is_read_once_then_passed_over(
    docs: Path, tmp_path: Path
) -> None:
    target = docs / "b.md"
    target.touch()
    _settle(target)
    read = _run(tmp_path)  # read, found current by its content, its new stamp recorded
    assert (read.documents_indexed, read.documents_unchanged, read.documents_unread) == (0, 3, 2)
    stamp = Manifest.load(tmp_path / "idx").documents["docs/b.md"].stamp
    assert stamp is not None and stamp[1] == target.stat().st_mtime_ns
    passed = _run(tmp_path)
    assert (passed.documents_unchanged, passed.documents_unread) == (3, 3)


def test_a_changed_recipe_reads_every_file(docs: Path, tmp_path: Path) -> None:
    report = _run(tmp_path, chunk_tokens=64)
    assert (report.documents_indexed, report.documents_unread) == (3, 0)
