"""The chunk-size distribution per kind that `ctxr split` and `ctxr index` report."""

from __future__ import annotations

from ctxr.enrich.split import split_document
from ctxr.pipeline.chunk_sizes import ChunkSizes, summary
from ctxr.types import Document, text_hash


def test_summary_quantiles_and_histogram() -> None:
    s = summary([5, 30, 50, 90, 200, 400])
    assert s["chunks"] == 6 and s["min"] == 5 and s["max"] == 400
    assert s["median"] == 70.0  # halfway between 50 and 90
    assert s["share_under_40"] == round(2 / 6, 4)
    assert s["histogram"] == {
        "<20": 1, "20-39": 1, "40-79": 1, "80-159": 1, "160-319": 1, ">=320": 1,
    }  # fmt: skip


def test_sizes_are_kept_per_kind() -> None:
    prose = "Sentence number one is here. " * 200
    doc = Document("a", "a.txt", prose, "text", "a", text_hash(prose))
    chunks = split_document(doc, max_tokens=64)
    sizes = ChunkSizes()
    sizes.add("text", chunks)
    sizes.add("code", [])
    body = sizes.to_json()
    assert list(body) == ["text"]  # a kind without chunks is left out
    assert body["text"]["chunks"] == len(chunks)
    assert body["text"]["max"] == max(c.token_count for c in chunks)
    assert sizes.lines()[0].startswith(f"text: {len(chunks)} chunks, median ")
