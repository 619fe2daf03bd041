"""A run a person can follow: the bars move within one large document, the report says where
the time went, and Ctrl-C (KeyboardInterrupt) says what was kept."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ctxr.config import Settings, load_settings
from ctxr.index.embed.base import EmbedderWrapper, FloatMatrix
from ctxr.index.manifest import Manifest
from ctxr.index.store.edge import EdgeStore
from ctxr.index.store.factory import shard_path
from ctxr.pipeline import write as writer
from ctxr.pipeline.build import build_index
from ctxr.pipeline.report import STAGES, IndexInterrupted
from tests.fakes.hash_embedder import HashEmbedder

# Every run meets these; "optimize" (HNSW) only an index of CTXR_OPTIMIZE_MIN_POINTS or more.
EVERY_RUN = {"open", "load", "split", "contexts", "embed", "write", "check"}


class Recording:
    """A `Progress` that keeps every call, and what the index held at each embeddings step."""

    def __init__(self, index_dir: Path, stop_after: int | None = None) -> None:
        self.index_dir = index_dir
        self.stop_after = stop_after  # embeddings steps before a Ctrl-C, if any
        self.totals: dict[str, int | None] = {}
        self.done: dict[str, int] = {}
        self.steps: list[tuple[int, int]] = []  # (chunks embedded so far, documents recorded)

    def start(self, phase: str, total: int | None) -> None:
        self.totals[phase] = total
        self.done[phase] = 0

    def advance(self, phase: str, amount: int = 1) -> None:
        self.done[phase] = self.done.get(phase, 0) + amount
        if phase == "embeddings":
            recorded = len(Manifest.load(self.index_dir).documents)
            self.steps.append((self.done[phase], recorded))
            if self.stop_after is not None and len(self.steps) == self.stop_after:
                raise KeyboardInterrupt  # what Ctrl-C raises in the main thread

    def note(self, message: str) -> None:
        pass


def _settings(tmp_path: Path) -> Settings:
    return load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache", chunk_tokens=32)


def _big_document(folder: Path, sections: int = 120) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    parts = [
        f"## Section {i}\n\nThe keeper of lamp {i} writes {i * 7} lines about tides and ships; "
        f"each entry notes the weather, the wind and the hour of light number {i}.\n"
        for i in range(sections)
    ]
    (folder / "logbook.md").write_text("# Logbook\n\n" + "\n".join(parts))
    return folder


def test_embeddings_advance_within_one_large_document(tmp_path: Path) -> None:
    corpus = _big_document(tmp_path / "corpus")
    progress = Recording(tmp_path / "idx")
    report = build_index([corpus], _settings(tmp_path), embedder=HashEmbedder(), progress=progress)
    chunks = report.chunks_written
    assert report.documents_indexed == 1 and chunks > 2 * writer.EMBED_STEP_CHUNKS
    # The bar's total is what is counted, and it is reached exactly.
    assert progress.totals["embeddings"] == progress.done["embeddings"] == chunks
    assert progress.totals["split"] == progress.done["split"] == 1
    # It moved step by step while the one document was still being written (not recorded yet).
    during = [done for done, recorded in progress.steps if recorded == 0]
    assert len(during) >= chunks // writer.EMBED_STEP_CHUNKS
    assert during == sorted(during) and during[0] <= writer.EMBED_STEP_CHUNKS


class _Pool(EmbedderWrapper):
    """An embedder that says how many texts keep its workers busy, as the Ray embedder does
    (workers x batch), and keeps the size of each call it is given."""

    def __init__(self, workers: int) -> None:
        super().__init__(HashEmbedder())
        self.workers = workers
        self.calls: list[int] = []

    @property
    def texts_per_call(self) -> int:
        return self.workers * 8

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.calls.append(len(texts))
        return self.inner.embed(texts)


@pytest.mark.parametrize("workers", [12, 40])
def test_a_pool_of_workers_is_given_a_batch_each_per_step(tmp_path: Path, workers: int) -> None:
    corpus = _big_document(tmp_path / "corpus", sections=400)
    pool = _Pool(workers)
    report = build_index([corpus], _settings(tmp_path), embedder=pool)
    chunks = report.chunks_written
    each = workers * 8  # 96: steps of 96 in batches of 256; 320: batches and steps of 320
    assert chunks > 2 * max(each, writer.WRITE_BATCH_CHUNKS)
    assert sum(pool.calls) == chunks and max(pool.calls) == each
    batch = max(each, writer.WRITE_BATCH_CHUNKS)
    assert pool.calls[: batch // each + 1] == [each] * (batch // each) + [batch % each or each]


def test_the_report_says_where_the_time_went_and_how_fast(tmp_path: Path) -> None:
    corpus = _big_document(tmp_path / "corpus", sections=30)
    report = build_index([corpus], _settings(tmp_path), embedder=HashEmbedder())
    body = report.to_json()
    stages = body["stage_seconds"]
    assert isinstance(stages, dict) and set(stages) >= EVERY_RUN
    assert list(stages) == [stage for stage in STAGES if stage in stages]  # in the run's order
    assert all(isinstance(v, float) and v >= 0 for v in stages.values())
    assert sum(stages.values()) <= report.seconds + 0.01  # parts of the run, never more
    assert body["documents_per_second"] == round(1 / report.seconds, 2)
    assert body["chunks_per_second"] == round(report.chunks_written / report.seconds, 2)


def test_ctrl_c_says_what_was_kept_and_the_next_run_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "WRITE_BATCH_CHUNKS", 8)  # many small, durable batches
    monkeypatch.setattr(writer, "EMBED_STEP_CHUNKS", 4)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(12):
        sections = (f"## Part {j}\n\nLantern {i} burns {i * 3 + j} hours on night {j}; the "
                    f"keeper notes tides and ships.\n" for j in range(3))  # fmt: skip
        (corpus / f"note{i:02}.md").write_text(f"# Note {i}\n\n" + "\n".join(sections))
    settings = _settings(tmp_path)
    with pytest.raises(IndexInterrupted) as stopped:
        build_index(
            [corpus], settings, embedder=HashEmbedder(), progress=Recording(tmp_path / "idx", 5)
        )
    kept = stopped.value.report
    assert isinstance(stopped.value, KeyboardInterrupt)  # callers that know no better still stop
    assert kept.interrupted and kept.to_json()["interrupted"] is True
    manifest = Manifest.load(tmp_path / "idx")
    assert 0 < kept.documents_indexed == len(manifest.documents) < 12
    store = EdgeStore.open(shard_path(tmp_path / "idx"))
    try:
        # Every recorded chunk is stored; a document cut off midway has points not recorded yet.
        assert manifest.chunk_count <= kept.chunks_written <= store.count()
    finally:
        store.close()
    report = build_index([corpus], settings, embedder=HashEmbedder())
    assert report.documents_unchanged == kept.documents_indexed
    assert report.documents_indexed == 12 - kept.documents_indexed
