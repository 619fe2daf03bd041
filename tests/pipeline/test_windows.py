"""A run in windows: the corpus read, split, situated and written a window at a time.

A window of one or two documents must build the index a single window builds (the same points,
texts, contexts and vectors; BM25 weights differ only through the running mean length), prune
what is gone, count on in its progress bars, and never read far ahead of what it writes."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxr.config import load_settings
from ctxr.index.manifest import Manifest
from ctxr.index.store.edge import EdgeStore
from ctxr.index.store.factory import shard_path
from ctxr.pipeline.build import build_index
from ctxr.pipeline.windows import WindowedProgress, windows
from ctxr.types import Document
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.llm_server import FakeLLMServer
from tests.fixtures.corpora import write_topics
from tests.fixtures.documents import make_document
from tests.fixtures.environment import use_fake_llm
from tests.fixtures.progress import RecordingProgress


def _points(index_dir: Path) -> dict[str, tuple[dict[str, Any], list[float]]]:
    store = EdgeStore.open(shard_path(index_dir))
    try:
        return {p.point_id: (dict(p.payload), list(p.dense)) for page in store.scan() for p in page}
    finally:
        store.close()


def test_windows_hold_whole_documents_and_read_one_ahead() -> None:
    pulled: list[str] = []

    def source() -> Iterator[Document]:
        for i in range(5):
            pulled.append(f"d{i}")
            yield make_document(f"Text {i}.", doc_id=f"d{i}", source=f"d{i}.md")

    seen: list[tuple[list[str], bool]] = []
    for window, last in windows(source(), 2, contextlib.nullcontext):
        # The walk is never more than one document ahead of the window being handed on.
        assert len(pulled) <= sum(len(w) for w, _ in seen) + len(window) + 1
        seen.append(([d.source for d in window], last))
    assert seen == [(["d0.md", "d1.md"], False), (["d2.md", "d3.md"], False), (["d4.md"], True)]


def test_a_window_closes_at_its_text_limit_but_never_empty() -> None:
    big = [make_document("x" * 100, doc_id=f"b{i}", source=f"b{i}.md") for i in range(3)]
    cut = [[d.source for d in w] for w, _ in windows(big, 10, contextlib.nullcontext, 150)]
    assert cut == [["b0.md", "b1.md"], ["b2.md"]]
    alone = [[d.source for d in w] for w, _ in windows(big, 10, contextlib.nullcontext, 1)]
    assert alone == [["b0.md"], ["b1.md"], ["b2.md"]]


def test_progress_counts_on_across_windows() -> None:
    inner = RecordingProgress()
    progress = WindowedProgress(inner)
    progress.start("files", None)
    progress.start("split", 2)
    progress.start("split", 2)
    progress.last = True
    progress.start("split", 1)
    progress.start("files", 5)
    assert inner.started == [("files", None), ("split", None), ("split", 5), ("files", 5)]
    single = RecordingProgress()
    once = WindowedProgress(single)
    once.last = True
    once.start("split", 3)
    assert single.started == [("split", 3)]


def test_a_build_in_windows_writes_what_one_window_writes(tmp_path: Path) -> None:
    corpus = write_topics(tmp_path / "corpus")
    one = load_settings(index_dir=tmp_path / "one", chunk_tokens=120)
    many = load_settings(index_dir=tmp_path / "many", chunk_tokens=120, window_documents=1)
    progress = RecordingProgress()
    first = build_index([corpus], one, embedder=HashEmbedder())
    second = build_index([corpus], many, embedder=HashEmbedder(), progress=progress)
    assert second.documents_indexed == first.documents_indexed == 3
    assert second.chunks_written == first.chunks_written
    assert second.chunk_sizes == first.chunk_sizes  # gathered over every window
    a, b = _points(tmp_path / "one"), _points(tmp_path / "many")
    assert a.keys() == b.keys()
    for point_id, (payload, dense) in a.items():
        assert b[point_id][0] == payload
        assert b[point_id][1] == pytest.approx(dense, abs=1e-6)
    # The split bar counted on, and learnt its total at the last window.
    splits = [total for phase, total in progress.started if phase == "split"]
    assert splits == [None, 3]
    manifest = Manifest.load(tmp_path / "many")
    assert len(manifest.documents) == 3 and manifest.chunk_count == second.points_total

    # A file gone is pruned at the walk's end, before the last window is written.
    (corpus / sorted(p.name for p in corpus.iterdir())[0]).unlink()
    (corpus / "new.md").write_text("# New\n\nA new page about tides and harbours.\n")
    again = build_index([corpus], many, embedder=HashEmbedder())
    assert again.documents_removed == 1 and again.documents_indexed == 1
    assert len(Manifest.load(tmp_path / "many").documents) == 3


@pytest.mark.slow
def test_an_llm_run_in_windows_keeps_one_ledger(
    tmp_path: Path,
    fake_llm_factory: Callable[..., FakeLLMServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = fake_llm_factory()
    use_fake_llm(monkeypatch, server)
    monkeypatch.setenv("CTXR_LLM_GROUP_SIZE", "1")
    corpus = write_topics(tmp_path / "corpus")
    settings = load_settings(index_dir=tmp_path / "idx", chunk_tokens=120, window_documents=1)
    report = build_index([corpus], settings, embedder=HashEmbedder())
    summary = report.contexts
    assert summary is not None and report.context_kind == "llm"
    # One ledger for the run: its totals cover all three windows, as the file on disk does.
    assert summary.requests == report.chunks_written == server.count("messages", 200)
    ledgers = list((tmp_path / "idx" / "ledgers").glob("contexts-*.json"))
    assert len(ledgers) == 1  # one file for the run, not one a window
    assert json.loads(ledgers[0].read_text())["summary"]["requests"] == summary.requests
