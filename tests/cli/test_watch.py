"""`ctxr watch`'s parts that need no watcher: what the OS is asked to watch, and the line an
update prints (the watcher itself runs in tests/api/test_live.py, as a real process)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxr.cli import main
from ctxr.cli.watch import update_line, watched_paths


def test_a_file_is_watched_through_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "notes.md").write_text("# Notes\n")
    assert watched_paths(["docs", "notes.md", "docs"]) == sorted(
        {str(tmp_path / "docs"), str(tmp_path)}
    )


def test_the_update_line_says_what_changed_and_where_it_went() -> None:
    report = {"documents_indexed": 2, "documents_removed": 1, "documents_unchanged": 3,
              "chunks_written": 14, "chunks_removed": 9, "seconds": 0.4213,
              "failed": [{"path": "docs/bad.md", "reason": "binary content"}]}  # fmt: skip
    line = update_line(3, report, "`ctxr serve` (pid 7, http://127.0.0.1:8000)")
    assert "3 paths changed: 2 indexed, 1 removed, 3 unchanged;" in line
    assert "chunks 14 written, 9 removed; 0.42 s" in line
    assert "1 failed (docs/bad.md: binary content)" in line
    assert line.endswith("(through `ctxr serve` (pid 7, http://127.0.0.1:8000))")
    local = update_line(1, {}, None)
    assert "1 path changed:" in local and "through" not in local


def test_watch_needs_existing_paths() -> None:
    result = CliRunner().invoke(main, ["watch", os.path.join("no", "such", "dir")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_watch_never_creates_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embed_cache_dir: Path
) -> None:
    # Before, the first sync built a new index from the watched folder (and, after the index
    # was deleted under a watcher, one edit made an index of that one file).
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXR_CACHE_DIR", str(embed_cache_dir))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome words.\n")
    result = CliRunner().invoke(main, ["watch", "docs", "--index", "idx"])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert "no ctxr index at idx" in message and "an update never creates one" in message
    assert "`ctxr index PATH... --index idx`" in message
    assert not (tmp_path / "idx").exists()
