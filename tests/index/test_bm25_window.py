"""The BM25 window: a chunk's terms come from the chunk widened to its neighbours, its vector
from the chunk alone (ctxr/index/bm25/window.py)."""

from __future__ import annotations

from pathlib import Path

from fakes.hash_embedder import HashEmbedder

from ctxr.config import load_settings
from ctxr.index.bm25.window import bm25_text, widened
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from ctxr.types import Chunk, ContextualChunk, Document, text_hash

WORDS = " ".join(f"word{i}" for i in range(100))  # 100 words of 6-7 characters


def test_the_span_grows_on_both_sides_and_ends_at_whitespace() -> None:
    start = WORDS.index("word40")
    end = WORDS.index("word50") - 1  # "word40 ... word49", ten words
    left, right = widened(WORDS, start, end, tokens=10, window_tokens=30)
    grown = WORDS[left:right].strip()
    assert left < start and right > end and WORDS[start:end] in grown
    assert all(w.startswith("word") and w[4:].isdigit() for w in grown.split())  # whole words
    assert 25 <= len(grown.split()) <= 35  # about 30 tokens' worth of characters
    # At the document's edge the other side takes what this one cannot.
    first = WORDS.index("word5") - 1
    left, right = widened(WORDS, 0, first, tokens=5, window_tokens=20)
    assert left == 0 and len(WORDS[left:right].split()) >= 18
    # A window no larger than the chunk leaves it alone.
    document = Document("d", "d.txt", WORDS, "text", "d", text_hash(WORDS))
    chunk = Chunk("d#0", "d", 0, WORDS[start:end], start, end, 10)
    situated = ContextualChunk(chunk, "From d.txt.", "outline")
    assert bm25_text(document, situated, 10) == situated.indexed_text()
    wide = bm25_text(document, situated, 40)
    assert wide.startswith("From d.txt.") and "word30" in wide and "word59" in wide


def test_a_query_term_next_to_a_chunk_finds_it_by_bm25(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    intro = "Glaciers advance in cold winters. " * 3
    body = " ".join(f"Measurement {i} of the ice sheet holds steady." for i in range(40))
    (corpus / "ice.txt").write_text(intro + "\n\n" + body + "\n")
    (corpus / "other.txt").write_text("Tides follow the moon. " * 30 + "\n")

    def chunks_with_glaciers(window: int) -> set[int]:
        settings = load_settings(
            index_dir=tmp_path / f"idx{window}",
            chunk_tokens=60,
            cache_dir=tmp_path / "cache",
            bm25_window_tokens=window,
        )
        build_index([corpus], settings, embedder=HashEmbedder())
        with SearchService(settings, embedder=HashEmbedder()) as service:
            hits = service.search("glaciers", k=20, mode="bm25")
        return {h.start for h in hits if h.source.endswith("ice.txt")}

    alone, widened_hits = chunks_with_glaciers(0), chunks_with_glaciers(400)
    # Only the first chunk holds the word; widened, its neighbours carry it too.
    assert len(alone) == 1 and len(widened_hits) > 1 and alone < widened_hits
