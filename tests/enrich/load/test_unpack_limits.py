"""Office files and EPUBs are zip archives: one that would unpack past the limit (a zip bomb)
is skipped by name before anything is extracted, with or without markitdown installed; and a
file swapped for a FIFO after the walk is never opened for a blocking read."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from ctxr.config import load_settings
from ctxr.enrich.load.documents import load_document
from ctxr.enrich.load.kinds import summarize_skips
from ctxr.errors import SkipFileError
from ctxr.pipeline.build import build_index
from tests.fakes.hash_embedder import HashEmbedder


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_a_docx_that_unpacks_far_past_its_size_is_a_named_skip(tmp_path: Path) -> None:
    # 30 MB of one repeated byte deflates to about 30 KB: 1,000:1.
    bomb = _zip(tmp_path / "bomb.docx", {"word/document.xml": b"<w:t>" + b"a" * 30_000_000})
    assert bomb.stat().st_size < 100_000

    with pytest.raises(SkipFileError) as info:
        load_document(bomb, max_file_bytes=1_000_000_000)  # the size cap alone would pass it
    assert info.value.path == bomb.as_posix()
    assert info.value.reason.startswith("zip bomb")
    assert "word/document.xml" in info.value.reason


def test_an_archive_whose_members_add_up_past_the_limit_is_a_named_skip(tmp_path: Path) -> None:
    # Random-looking members (no compression ratio to speak of) that add up past the cap.
    members = {f"OEBPS/ch{i}.xhtml": os.urandom(300_000) for i in range(4)}
    book = _zip(tmp_path / "book.epub", members)

    with pytest.raises(SkipFileError) as info:
        load_document(book, max_file_bytes=1_000_000)
    assert info.value.reason.startswith("unpacks past CTXR_MAX_FILE_BYTES")
    assert "1,200,000" in info.value.reason


@pytest.mark.slow
def test_index_skips_a_zip_bomb_and_indexes_the_rest(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    _zip(corpus / "bomb.xlsx", {"xl/worksheets/sheet1.xml": b"0" * 50_000_000})
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")

    report = build_index([corpus], settings, embedder=HashEmbedder())

    assert report.documents_indexed == 1 and report.failed == []
    assert [(s.path, s.reason.split(";")[0]) for s in report.skipped] == [
        ((corpus / "bomb.xlsx").as_posix(), "zip bomb")
    ]
    assert summarize_skips(s.reason for s in report.skipped) == "skipped 1 path: 1 zip bomb"


def test_a_file_replaced_by_a_fifo_after_the_walk_is_not_read(tmp_path: Path) -> None:
    pipe = tmp_path / "notes.md"
    os.mkfifo(pipe)  # no writer: a blocking open would wait forever

    with pytest.raises(SkipFileError) as info:
        load_document(pipe)
    assert info.value.reason.startswith("not a regular file")
