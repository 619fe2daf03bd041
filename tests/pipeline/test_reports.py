"""Each run's report kept in the index (`ctxr.pipeline.reports`): what the page at `/` reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from ctxr.config import load_settings
from ctxr.enrich.load.walk import Skipped
from ctxr.pipeline.build import build_index
from ctxr.pipeline.report import IndexReport
from ctxr.pipeline.reports import KEEP, REPORTS_DIR, recent_reports, save_report
from tests.fakes.hash_embedder import HashEmbedder


def test_a_run_keeps_its_report_with_what_it_skipped(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Apples\n\nApples are red and grow on trees.\n")
    (corpus / "blob.bin").write_bytes(b"\x00\x01binary\x00" * 50)
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    report = build_index([corpus], settings, embedder=HashEmbedder())
    [kept] = recent_reports(tmp_path / "idx")
    assert kept["documents_indexed"] == report.documents_indexed == 1
    assert kept["chunks_written"] == report.chunks_written
    assert [s["path"] for s in kept["skipped"]] == [s.path for s in report.skipped]
    assert kept["skipped"] and "blob.bin" in kept["skipped"][0]["path"]
    assert datetime.fromisoformat(kept["finished_at"]).tzinfo is not None

    build_index([corpus], settings, embedder=HashEmbedder())  # nothing new: a report still
    newest, older = recent_reports(tmp_path / "idx")
    assert (newest["documents_unchanged"], older["documents_indexed"]) == (1, 1)


def test_the_newest_are_kept_and_an_unreadable_one_is_passed_over(tmp_path: Path) -> None:
    start = datetime(2026, 1, 2, tzinfo=UTC)
    for i in range(KEEP + 3):
        report = IndexReport(index_dir=str(tmp_path), context_kind="outline", files_seen=i)
        report.skipped.append(Skipped(f"f{i}.bin", "binary"))
        assert save_report(report, start + timedelta(seconds=i)) is not None
    files = sorted((tmp_path / REPORTS_DIR).iterdir())
    assert len(files) == KEEP
    files[-1].write_text("{not json")
    found = recent_reports(tmp_path, limit=2)
    assert [r["files_seen"] for r in found] == [KEEP + 1, KEEP]


def test_a_refused_write_loses_the_report_not_the_run(tmp_path: Path) -> None:
    (tmp_path / REPORTS_DIR).write_text("a file where the folder should be")
    report = IndexReport(index_dir=str(tmp_path), context_kind="outline")
    assert save_report(report) is None
    assert recent_reports(tmp_path) == []
