"""A run whose points are written by a `PointWriter` (Ray actors writing to a Qdrant server):
the driver prepares and submits batch n+1 before it waits for batch n, and the manifest counts
a batch only once the writer has acknowledged it, in the order the batches were made.

The writer here is this process: a batch submitted to it is embedded (by the hash embedder)
and upserted into the run's own store when the driver waits for it, and it logs every call,
so the order the driver keeps can be read back. The same path on real Ray actors and a Qdrant
node over HTTP is `test_ray_executor.py`'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from ctxr.config import Settings, load_settings
from ctxr.errors import IndexError_
from ctxr.index.embed.base import Embedder
from ctxr.index.manifest import Manifest
from ctxr.index.store.base import Store, StoredPoint
from ctxr.pipeline import build
from ctxr.pipeline.build import build_index
from ctxr.pipeline.executors.base import PendingWrite
from ctxr.pipeline.executors.local import LocalExecutor
from ctxr.pipeline.report import IndexReport
from tests.fakes.hash_embedder import HashEmbedder

NOTES = 8  # one chunk each; batches of two


@dataclass
class _Writer:
    """`PointWriter`: embeds and upserts a batch when it is waited for, logging each call
    with the documents the saved manifest counted at that moment."""

    store: Store
    index_dir: Path
    fail_at: int | None = None  # the batch whose wait raises, as a refusing server would
    log: list[tuple[str, int]] = field(default_factory=list)
    counted_at_wait: list[set[str]] = field(default_factory=list)
    sources: list[set[str]] = field(default_factory=list)  # each batch's documents
    by_workers: bool = True

    def submit(self, texts: Sequence[str], points: Sequence[StoredPoint]) -> PendingWrite:
        number = len(self.sources)
        self.log.append(("submit", number))
        self.sources.append({str(p.payload["source"]) for p in points})
        return _Later(self, number, list(texts), list(points))


@dataclass
class _Later:
    writer: _Writer
    number: int
    texts: list[str]
    points: list[StoredPoint]

    def wait(self, advance: Callable[[int], None]) -> None:
        writer = self.writer
        writer.log.append(("wait", self.number))
        counted = Manifest.load(writer.index_dir).documents.values()
        writer.counted_at_wait.append({entry.source for entry in counted})
        if self.number == writer.fail_at:
            raise IndexError_("the Qdrant server answered 400 while writing (a test's refusal)")
        vectors = HashEmbedder().embed(self.texts)
        filled = [
            replace(p, dense=row.tolist()) for p, row in zip(self.points, vectors, strict=True)
        ]
        writer.store.upsert(filled)
        advance(len(filled))


class _WritingExecutor(LocalExecutor):
    """The local executor, but its points go through `_Writer`."""

    name = "writer"

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at = fail_at
        self.writer: _Writer | None = None

    def embedder(self, settings: Settings) -> Embedder:
        return HashEmbedder()

    def point_writer(self, settings: Settings, store: Store, embedder: Embedder) -> _Writer:
        self.writer = _Writer(store, Path(settings.index_dir), self.fail_at)
        return self.writer


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from ctxr.pipeline import write

    monkeypatch.setattr(write, "WRITE_BATCH_CHUNKS", 2)
    folder = tmp_path / "corpus"
    folder.mkdir()
    for i in range(NOTES):
        (folder / f"note{i}.txt").write_text(f"Note {i} about topic {i * 7}.", encoding="utf-8")
    return folder


def _run(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, executor: _WritingExecutor
) -> tuple[IndexReport, _Writer]:
    monkeypatch.setattr(build, "make_executor", lambda run: executor)
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    report = build_index([corpus], settings)
    assert executor.writer is not None
    return report, executor.writer


def test_the_next_batch_is_submitted_before_the_last_is_waited_for(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = _WritingExecutor()
    report, writer = _run(corpus, tmp_path, monkeypatch, executor)
    batches = NOTES // 2
    expected = [("submit", 0)]
    for n in range(1, batches):
        expected += [("submit", n), ("wait", n - 1)]
    assert writer.log == [*expected, ("wait", batches - 1)]
    # At each wait the saved manifest (saved when due) counts no batch but those acknowledged
    # before it: neither this one nor the one submitted after it.
    for n, counted in enumerate(writer.counted_at_wait):
        assert counted <= set().union(*writer.sources[:n])
    assert report.points_written_by_workers == report.points_total == NOTES
    assert len(Manifest.load(tmp_path / "idx").documents) == NOTES


def test_a_refused_batch_leaves_the_earlier_ones_counted(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = _WritingExecutor(fail_at=1)
    with pytest.raises(IndexError_, match="answered 400"):
        _run(corpus, tmp_path, monkeypatch, executor)
    writer = executor.writer
    assert writer is not None
    # Batch 2 was already submitted when batch 1 failed; neither is counted.
    assert writer.log == [("submit", 0), ("submit", 1), ("wait", 0), ("submit", 2), ("wait", 1)]
    kept = Manifest.load(tmp_path / "idx").documents
    assert {entry.source for entry in kept.values()} == writer.sources[0]
    # The next run writes the rest, and the index counts every note once.
    again = _WritingExecutor()
    report, _ = _run(corpus, tmp_path, monkeypatch, again)
    assert report.documents_unchanged == len(kept)
    assert report.points_total == NOTES == len(Manifest.load(tmp_path / "idx").documents)
