"""`build_index` end to end: exact offsets, deterministic ids, incremental runs, pruning."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ctxr.config import Settings, load_settings
from ctxr.index.manifest import Manifest
from ctxr.index.store.edge import EdgeStore
from ctxr.index.store.factory import shard_path
from ctxr.index.store.merge_cap import CONFIG_NAME, FLOOR_KB
from ctxr.pipeline.build import build_index, index_documents
from ctxr.retrieve.service import SearchService
from ctxr.types import Chunk, Document, chunk_id_for, text_hash
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT


def all_points(index_dir: Path, dim: int) -> dict[str, Mapping[str, Any]]:
    """Every point of an index, by id (a dense query with a limit above the point count)."""
    store = EdgeStore.open(shard_path(index_dir))
    try:
        total = store.count()
        records = store.query_dense([1.0] + [0.0] * (dim - 1), limit=total + 10)
        assert len(records) == total
        return {r.point_id: r.payload for r in records}
    finally:
        store.close()


def test_examples_report(examples_index: BuiltIndex) -> None:
    report = examples_index.report
    assert report.files_seen == 10
    assert report.documents_indexed == 10
    assert report.failed == [] and report.skipped == []
    assert report.context_kind == "outline"
    assert report.points_total == report.chunks_written > 10
    manifest = Manifest.load(examples_index.index_dir)
    assert manifest.chunk_count == report.points_total
    assert manifest.settings.embedder == "onnx:all-MiniLM-L6-v2-int8"
    assert manifest.settings.dim == 384
    assert all(source.startswith("examples/") for source in manifest.documents)
    # Each kind's embedded word pieces against its documents': outline contexts and prefixes
    # add some, a chunk is never embedded twice, so it stays between 1x and 2x here.
    amplification = report.amplification()
    assert set(amplification) == {"code", "markdown", "text"}
    assert all(1.0 <= ratio < 2.0 for ratio in amplification.values())
    assert report.to_json()["amplification"] == amplification


def test_offsets_match_the_document_text(examples_index: BuiltIndex) -> None:
    points = all_points(examples_index.index_dir, 384)
    texts: dict[str, str] = {}
    by_doc: dict[str, list[Mapping[str, Any]]] = {}
    for point_id, payload in points.items():
        source = payload["source"]
        if source not in texts:
            # The loader's decoding exactly: utf-8-sig, no newline translation.
            texts[source] = (ROOT / source).read_bytes().decode("utf-8-sig")
        text = texts[source]
        assert text[payload["start"] : payload["end"]] == payload["text"], (source, payload)
        assert point_id == chunk_id_for(payload["doc_id"], payload["index"])
        assert payload["doc_sha256"] == text_hash(text)
        assert payload["token_count"] > 0
        assert payload["context"].startswith("From ")
        by_doc.setdefault(source, []).append(payload)
    assert len(texts) == 10
    # The invariant is exercised where it is easiest to break: CRLF and non-ASCII text.
    crlf = "examples/notes/postmortem-2024-03-sync-outage.txt"
    assert "\r\n" in texts[crlf]
    assert any("\r\n" in p["text"] for p in by_doc[crlf])
    ja = "examples/docs/faq.ja.md"
    assert any(ord(ch) > 0x3000 for p in by_doc[ja] for ch in p["text"])
    for source, payloads in by_doc.items():
        indices = sorted(p["index"] for p in payloads)
        assert indices == list(range(len(payloads))), source  # no gaps, no duplicates
        # Chunks cover the document in order (overlap allowed, no chunk starts before its
        # predecessor).
        starts = [p["start"] for p in sorted(payloads, key=lambda p: p["index"])]
        assert starts == sorted(starts), source
    md = by_doc["examples/docs/configuration.md"]
    assert any(len(p["heading_path"]) >= 1 for p in md)


@pytest.mark.slow
def test_reindexing_the_same_folder_keeps_ids_and_count(
    examples_index: BuiltIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A separate index (the session one stays untouched); the shared embedding cache makes the
    # real embedder cost nothing here.
    monkeypatch.chdir(ROOT)
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=examples_index.cache_dir)
    first = build_index(["examples"], settings)
    ids = set(all_points(tmp_path / "idx", 384))
    assert ids == set(all_points(examples_index.index_dir, 384))  # same ids as another index

    again = build_index(["examples"], settings)
    assert (again.documents_indexed, again.documents_unchanged) == (0, 10)
    assert again.points_total == first.points_total == len(ids)

    rebuilt = build_index(["examples"], settings, rebuild=True)
    assert rebuilt.documents_indexed == 10
    assert rebuilt.points_total == first.points_total
    assert set(all_points(tmp_path / "idx", 384)) == ids


def _hash_settings(tmp_path: Path) -> Settings:
    return load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")


def _sources(settings: Settings, query: str, mode: str) -> set[str]:
    with SearchService(settings, embedder=HashEmbedder()) as service:
        return {hit.source for hit in service.search(query, k=50, mode=mode)}


@pytest.mark.slow
def test_incremental_edit_delete_add(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in (
        "docs/install.md",
        "docs/faq.md",
        "docs/backup-restore.md",
        "notes/release-notes.txt",
    ):
        shutil.copy(ROOT / "examples" / name, corpus / Path(name).name)
    settings = _hash_settings(tmp_path)

    first = build_index([corpus], settings, embedder=HashEmbedder())
    assert (first.documents_indexed, first.documents_unchanged, first.documents_removed) == (
        4,
        0,
        0,
    )
    removed_doc = (corpus / "backup-restore.md").as_posix()
    assert removed_doc in _sources(settings, "lumen-backup.timer", "bm25")

    faq = corpus / "faq.md"
    faq.write_bytes(faq.read_bytes() + b"\n## Zanzibar\n\nThe quokka zanzibar answer.\n")
    (corpus / "backup-restore.md").unlink()
    (corpus / "new.md").write_text("# New\n\nA fresh page about marmalade.\n", encoding="utf-8")

    fake = HashEmbedder()
    second = build_index([corpus], settings, embedder=fake)
    assert (second.documents_indexed, second.documents_unchanged, second.documents_removed) == (
        2,
        2,
        1,
    )
    manifest = Manifest.load(tmp_path / "idx")
    assert set(manifest.documents) == {
        (corpus / n).as_posix() for n in ("install.md", "faq.md", "release-notes.txt", "new.md")
    }
    assert second.points_total == manifest.chunk_count
    assert second.chunks_written == fake.texts_embedded  # only the changed and new documents

    for mode in ("bm25", "hybrid", "dense"):
        assert removed_doc not in _sources(settings, "lumen-backup.timer backup restore", mode)
    assert (corpus / "faq.md").as_posix() in _sources(settings, "quokka zanzibar", "bm25")
    assert (corpus / "new.md").as_posix() in _sources(settings, "marmalade", "bm25")

    quiet = build_index([corpus], settings, embedder=HashEmbedder(), prune=False)
    assert (quiet.documents_indexed, quiet.documents_unchanged) == (0, 4)


def test_no_prune_keeps_deleted_documents(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nalpha apricot\n", encoding="utf-8")
    (corpus / "b.md").write_text("# B\n\nbeta banana\n", encoding="utf-8")
    settings = _hash_settings(tmp_path)
    build_index([corpus], settings, embedder=HashEmbedder())
    (corpus / "b.md").unlink()
    kept = build_index([corpus], settings, embedder=HashEmbedder(), prune=False)
    assert kept.documents_removed == 0
    assert (corpus / "b.md").as_posix() in _sources(settings, "banana", "bm25")
    pruned = build_index([corpus], settings, embedder=HashEmbedder())
    assert pruned.documents_removed == 1
    assert _sources(settings, "banana", "bm25") == set()


def test_emptied_and_newly_ignored_files_are_pruned(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "drafts").mkdir(parents=True)
    (corpus / "a.md").write_text("# A\n\nalpha apricot\n", encoding="utf-8")
    (corpus / "b.md").write_text("# B\n\nbeta banana\n", encoding="utf-8")
    (corpus / "drafts" / "c.md").write_text("# C\n\ngamma cherry\n", encoding="utf-8")
    (corpus / "d.md").write_text("# D\n\ndelta date\n", encoding="utf-8")
    settings = _hash_settings(tmp_path)
    build_index([corpus], settings, embedder=HashEmbedder())
    build_index([corpus / "d.md"], settings, embedder=HashEmbedder())  # named: pruned alike
    (corpus / "a.md").write_bytes(b"")
    (corpus / "d.md").write_bytes(b"")
    (corpus / ".gitignore").write_text("b.md\ndrafts/\n", encoding="utf-8")

    kept = build_index([corpus, corpus / "d.md"], settings, embedder=HashEmbedder(), prune=False)
    assert kept.documents_removed == 0
    assert _sources(settings, "apricot banana cherry date", "bm25") == {
        (corpus / n).as_posix() for n in ("a.md", "b.md", "drafts/c.md", "d.md")
    }

    pruned = build_index([corpus, corpus / "d.md"], settings, embedder=HashEmbedder())
    assert pruned.documents_removed == 4
    assert _sources(settings, "apricot banana cherry date", "bm25") == set()
    assert Manifest.load(tmp_path / "idx").documents == {}


def test_changed_chunk_size_reindexes(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(ROOT / "examples" / "docs" / "configuration.md", corpus)
    build_index([corpus], _hash_settings(tmp_path), embedder=HashEmbedder())
    smaller = load_settings(
        index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache", chunk_tokens=64
    )
    report = build_index([corpus], smaller, embedder=HashEmbedder())
    assert report.documents_indexed == 1  # a new recipe re-indexes an unchanged file
    assert report.points_total == Manifest.load(tmp_path / "idx").chunk_count


def test_index_documents_with_own_chunker(tmp_path: Path) -> None:
    text = "first line\nsecond line\n"
    doc = Document("mem:1", "mem:1", text, "text", "one", text_hash(text))

    def by_line(document: Document) -> list[Chunk]:
        chunks, start = [], 0
        for i, line in enumerate(document.text.splitlines(keepends=True)):
            chunks.append(
                Chunk(
                    chunk_id_for(document.doc_id, i),
                    document.doc_id,
                    i,
                    line,
                    start,
                    start + len(line),
                    2,
                )
            )
            start += len(line)
        return chunks

    settings = _hash_settings(tmp_path)
    report = index_documents(
        [doc], settings, chunker=by_line, chunker_name="lines", embedder=HashEmbedder()
    )
    assert (report.documents_indexed, report.chunks_written, report.points_total) == (1, 2, 2)
    again = index_documents(
        [doc], settings, chunker=by_line, chunker_name="lines", embedder=HashEmbedder()
    )
    assert (again.documents_indexed, again.documents_unchanged) == (0, 1)


class _Recording(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts: Any) -> Any:
        self.seen.extend(texts)
        return super().embed(texts)


def test_context_position_orders_the_embedded_text_and_reindexes(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "guide.md").write_text("# Guide\n\nInstall the server with the package manager.\n")
    before = _Recording()
    build_index([corpus], _hash_settings(tmp_path), embedder=before)
    # The chunk opens with the title, so the outline names the path alone.
    outline = f"From {corpus / 'guide.md'}."
    assert before.seen[0] == f"{outline}\n\n# Guide\n\nInstall the server with the package manager."
    after = _Recording()
    settings = _hash_settings(tmp_path).replace(context_position="after")
    report = build_index([corpus], settings, embedder=after)
    assert report.documents_indexed == 1  # the embedded text changed: re-indexed
    assert after.seen[0].startswith("# Guide") and after.seen[0].endswith(".")
    assert after.seen[0].rsplit("\n\n", 1)[1] == outline


def test_an_update_sizes_what_the_shard_may_merge_from_the_index(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Glaciers carve valleys over thousands of years.")
    # Segments of many points, so that a quarter of one is far over the floor.
    settings = _hash_settings(tmp_path).replace(segment_points=100_000_000)
    build_index([corpus], settings, embedder=HashEmbedder())
    config = shard_path(settings.index_dir) / CONFIG_NAME
    created = json.loads(config.read_text())["optimizers"]["max_segment_size"]
    assert created > FLOOR_KB  # a quarter of a segment, as the shard was made
    (corpus / "b.txt").write_text("Tides follow the moon.")
    build_index([corpus], settings, embedder=HashEmbedder())
    # The writer opened it knowing the index's size: a quarter of it, never under the floor.
    assert json.loads(config.read_text())["optimizers"]["max_segment_size"] == FLOOR_KB


def test_hnsw_is_built_once_the_index_is_large_enough(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Glaciers carve valleys over thousands of years.")
    small = build_index([corpus], _hash_settings(tmp_path), embedder=HashEmbedder())
    assert small.optimize_seconds == 0.0  # below CTXR_OPTIMIZE_MIN_POINTS: exact search
    eager = _hash_settings(tmp_path).replace(optimize_min_points=1)
    (corpus / "b.txt").write_text("Tides follow the moon.")
    report = build_index([corpus], eager, embedder=HashEmbedder())
    assert report.optimize_seconds > 0.0
    unchanged = build_index([corpus], eager, embedder=HashEmbedder())
    assert unchanged.optimize_seconds == 0.0  # nothing written, nothing to build


class _Crashing(HashEmbedder):
    """Dies on its n-th batch, as a killed process would stop mid-run."""

    def __init__(self, crash_on: int) -> None:
        super().__init__()
        self.crash_on = crash_on

    def embed(self, texts: Any) -> Any:
        if self.calls + 1 == self.crash_on:
            raise KeyboardInterrupt
        return super().embed(texts)


def test_an_interrupted_run_is_completed_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxr.pipeline import write as writer

    monkeypatch.setattr(writer, "WRITE_BATCH_CHUNKS", 2)  # many small batches
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(8):
        (corpus / f"note{i}.txt").write_text(f"Note {i} about topic {i * 7}.")
    settings = _hash_settings(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        build_index([corpus], settings, embedder=_Crashing(crash_on=3))
    halfway = Manifest.load(tmp_path / "idx")
    assert 0 < len(halfway.documents) < 8  # the batches before the crash are recorded
    resumed = HashEmbedder()
    report = build_index([corpus], settings, embedder=resumed)
    assert report.documents_unchanged == len(halfway.documents)
    assert report.documents_indexed == 8 - len(halfway.documents)
    assert report.points_total == Manifest.load(tmp_path / "idx").chunk_count == 8


def test_a_file_name_that_is_not_utf8_is_indexed_and_pruned(tmp_path: Path) -> None:
    # Names from old disks and archives: Python holds their bytes as surrogate escapes, which
    # neither JSON nor Qdrant accept; the run used to abort on them.
    docs = tmp_path / "docs"
    docs.mkdir()
    bad = Path(os.fsdecode(bytes(docs / "bad") + b"\xffname.md"))
    bad.write_text("# Odd name\n\nThe lighthouse keeper logs every ship.\n")
    (docs / "good.md").write_text("# Good\n\nNothing odd here.\n")
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    first = build_index([docs], settings, embedder=HashEmbedder())
    assert first.documents_indexed == 2 and not first.failed
    sources = {e.source for e in Manifest.load(tmp_path / "idx").documents.values()}
    assert (docs / "bad").as_posix() + "\\xffname.md" in sources  # the byte, escaped
    with SearchService(settings, embedder=HashEmbedder()) as service:
        hit = service.search("lighthouse keeper", k=1, mode="bm25")[0]
    assert hit.source.endswith("bad\\xffname.md") and "lighthouse" in hit.text
    again = build_index([docs], settings, embedder=HashEmbedder())
    assert again.documents_unchanged == 2 and again.documents_removed == 0
    bad.unlink()
    gone = build_index([docs], settings, embedder=HashEmbedder())
    assert gone.documents_removed == 1 and gone.points_total == 1


def test_deleted_files_are_pruned_when_the_folder_is_given_as_dot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.md").write_text("# A\n\nalpha text\n")
    (tmp_path / "b.md").write_text("# B\n\nbeta text\n")
    monkeypatch.chdir(tmp_path)
    settings = load_settings(index_dir=tmp_path / ".idx", cache_dir=tmp_path / ".cache")
    assert build_index(["."], settings, embedder=HashEmbedder()).documents_indexed == 2
    (tmp_path / "b.md").unlink()
    assert build_index(["."], settings, embedder=HashEmbedder()).documents_removed == 1


def test_a_second_run_on_the_same_index_is_refused_before_it_creates_anything(
    tmp_path: Path,
) -> None:
    # Two runs starting at once on a new directory raced to create the shard; the loser got a
    # raw rename error whose advice (remove the directory) would destroy the winner's index.
    from ctxr.errors import IndexError_
    from ctxr.index.run_lock import index_lock

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nalpha text\n")
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    held_here = rf"in use by this process \(pid {os.getpid()}\)"  # the lock is this test's
    with index_lock(tmp_path / "idx"), pytest.raises(IndexError_, match=held_here):
        build_index([docs], settings, embedder=HashEmbedder())
    assert not shard_path(tmp_path / "idx").exists()  # the loser created nothing
    report = build_index([docs], settings, embedder=HashEmbedder())  # the lock was released
    assert report.documents_indexed == 1


class _Sizes(_Crashing):
    """Records how many texts each call embeds."""

    def __init__(self, crash_on: int = 0) -> None:
        super().__init__(crash_on)
        self.sizes: list[int] = []

    def embed(self, texts: Any) -> Any:
        out = super().embed(texts)
        self.sizes.append(len(texts))
        return out


def test_one_large_document_is_written_in_bounded_batches_and_a_kill_loses_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 50k-row table was one write batch: embedded whole, nothing saved until the end.
    from ctxr.index.embed.cache import CachedEmbedder
    from ctxr.pipeline import write as writer

    monkeypatch.setattr(writer, "WRITE_BATCH_CHUNKS", 8)
    table = tmp_path / "corpus" / "table.md"
    table.parent.mkdir()
    rows = "".join(f"| {i} | item {i} with a note about lanterns and tides |\n" for i in range(400))
    table.write_text("# Stock\n\n| id | note |\n|---|---|\n" + rows)
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache",
                             chunk_tokens=64)  # fmt: skip
    cache = tmp_path / "cache" / "embeddings"
    crashing = _Sizes(crash_on=4)
    with pytest.raises(KeyboardInterrupt):
        build_index([table.parent], settings, embedder=CachedEmbedder(crashing, cache))
    assert crashing.sizes == [8, 8, 8]  # three batches embedded, each at most the bound
    store = EdgeStore.open(shard_path(tmp_path / "idx"))
    assert store.count() == 24  # and written before the kill; the document is not recorded
    store.close()
    assert Manifest.load(tmp_path / "idx").documents == {}

    resumed = _Sizes()
    report = build_index([table.parent], settings, embedder=CachedEmbedder(resumed, cache))
    chunks = report.chunks_written
    assert chunks > 40 and max(resumed.sizes) <= 8
    assert sum(resumed.sizes) == chunks - 24  # the batches written before the kill cost nothing
    assert report.points_total == Manifest.load(tmp_path / "idx").chunk_count == chunks


def test_a_changed_document_leaves_the_manifest_before_its_points_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxr.pipeline import write as writer

    monkeypatch.setattr(writer, "WRITE_BATCH_CHUNKS", 4)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    doc = corpus / "notes.md"
    doc.write_text("".join(f"# Part {i}\n\nLanterns and tides, part {i}.\n\n" for i in range(12)))
    settings = _hash_settings(tmp_path)
    build_index([corpus], settings, embedder=HashEmbedder())
    doc.write_text(doc.read_text() + "# Part 12\n\nOne more.\n")
    with pytest.raises(KeyboardInterrupt):
        build_index([corpus], settings, embedder=_Crashing(crash_on=2))
    # Killed mid-document: its old points are gone, and the manifest no longer counts them, so
    # the index opens as sound (the new points written so far are leftovers the next run clears).
    assert Manifest.load(tmp_path / "idx").documents == {}
    SearchService(settings, embedder=HashEmbedder()).close()
    report = build_index([corpus], settings, embedder=HashEmbedder())
    assert report.points_total == Manifest.load(tmp_path / "idx").chunk_count == 13


@pytest.mark.slow
def test_a_large_run_closes_segments_that_find_what_one_segment_finds(tmp_path: Path) -> None:
    import qdrant_edge as qe

    corpus = tmp_path / "docs"  # real prose, about 1,500 chunks: few ties between scores
    shutil.copytree(ROOT / "docs", corpus)
    one = load_settings(index_dir=tmp_path / "one", cache_dir=tmp_path / "cache")
    apart = one.replace(index_dir=tmp_path / "apart", segment_points=256)
    whole = build_index([corpus], one.replace(optimize_min_points=1), embedder=HashEmbedder())
    split = build_index([corpus], apart.replace(optimize_min_points=1), embedder=HashEmbedder())

    assert whole.segments_closed == 0 and split.chunks_written == whole.chunks_written > 3 * 256
    assert split.segments_closed == split.chunks_written // 256  # one a write batch, here

    def segments(settings: Settings) -> int:
        shard = qe.EdgeShard.load(str(shard_path(Path(settings.index_dir))))
        try:
            return int(shard.info().segments_count)
        finally:
            shard.close()

    closed = segments(apart)
    assert closed >= segments(one) + split.segments_closed - 1  # closed segments stay apart
    for query in ("HNSW build at a million chunks", "resume a killed run", "BM25 window"):
        for mode in ("dense", "bm25", "hybrid"):
            (scores, ids), (split_scores, split_ids) = (
                _ranked(settings, query, mode) for settings in (one, apart)
            )
            assert split_scores == pytest.approx(scores, abs=1e-4), (query, mode)
            assert split_ids == ids, (query, mode)
    # An incremental run writes its points beside the closed segments, never merging them.
    page = corpus / "index.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n\nA new closing paragraph.\n")
    again = build_index([corpus], apart.replace(optimize_min_points=1), embedder=HashEmbedder())
    assert again.documents_indexed == 1 and again.segments_closed == 0
    assert segments(apart) >= closed


def _ranked(settings: Settings, query: str, mode: str) -> tuple[list[float], set[str]]:
    """The scores of the top 20, and the chunks scored clearly above the 20th: segments may
    order chunks of equal score either way, one of them may fall past the 20th, and a sum
    taken over segments may differ in its last bits."""
    with SearchService(settings, embedder=HashEmbedder()) as service:
        hits = service.search(query, k=20, mode=mode)
    scores = [h.score for h in hits]
    return scores, {h.chunk_id for h in hits if h.score > scores[-1] + 1e-4}
