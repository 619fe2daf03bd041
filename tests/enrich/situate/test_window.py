"""Windows of long documents, and the checks that tell a context from garbage."""

from __future__ import annotations

import itertools

import pytest

from ctxr.enrich.situate.validate import EMPTY, NOT_A_CONTEXT, TOO_LONG, check_context
from ctxr.enrich.situate.window import plan_blocks, plan_prefixes, windows
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, chunk_id_for
from tests.fakes.scripted_llm import words
from tests.fixtures.documents import sectioned_document


def test_a_document_that_fits_is_one_window_of_itself() -> None:
    document, chunks = sectioned_document("short", 3, 20)
    found = windows(document, chunks, max_tokens=10_000, count_tokens=words)
    assert len(found) == 1 and found[0].text == document.text and found[0].block is None


def test_blocks_are_fixed_cover_the_text_and_hold_their_chunks_whole() -> None:
    document, chunks = sectioned_document("long", 20, 50)
    blocks = plan_blocks(document.text, chunks, 200, words)
    assert len(blocks) > 1
    assert blocks[0][0].start == 0 and blocks[-1][0].end == len(document.text)
    for (block, _), (after, _) in itertools.pairwise(blocks):
        assert block.end == after.start  # consecutive, no gaps
    for block, members in blocks:
        assert words(document.text[block.start : block.end]) <= 200
        for chunk in members:
            assert block.start <= chunk.start and chunk.end <= block.end
    assert sum(len(m) for _, m in blocks) == 20
    assert plan_blocks(document.text, chunks, 200, words) == blocks  # deterministic


def test_overlapping_chunks_stay_whole() -> None:
    text = "".join(f"line {i} " * 10 + "\n" for i in range(40))
    size, step = len(text) // 8, len(text) // 10  # chunks overlap their successors
    chunks = [
        Chunk(chunk_id_for("o", i), "o", i, text[s : s + size], s, min(s + size, len(text)), 0)
        for i, s in enumerate(range(0, len(text) - size, step))
    ]
    for block, members in plan_blocks(text, chunks, 150, words):
        for chunk in members:
            assert block.start <= chunk.start and chunk.end <= block.end


def test_window_text_is_outline_then_block_within_budget() -> None:
    document, chunks = sectioned_document("long", 20, 50)
    found = windows(document, chunks, max_tokens=1500, count_tokens=count_tokens)
    assert len(found) > 1
    for window in found:
        assert count_tokens(window.text) <= 1500
        assert window.text.startswith(
            "Document: Long (docs/long.md)\nOutline:\n- Long\n  - section 0"
        )
        assert "[Excerpt " in window.text
        for chunk in window.chunks:
            assert chunk.text in window.text


def test_prefixes_mark_the_cache_by_the_rendered_size() -> None:
    small, large = sectioned_document("small", 2, 10), sectioned_document("large", 2, 300)
    prefixes = plan_prefixes(
        [small, large],
        max_tokens=100_000,
        count_tokens=words,
        render_document=lambda d: "<document>\n" + d + "\n</document>",
        min_cacheable_tokens=500,
    )
    assert [(p.document.doc_id, p.cache) for p in prefixes] == [
        ("small.md", False),
        ("large.md", True),
    ]
    assert prefixes[1].tokens == words(large[0].text) + 2


CHUNK = (
    "def situate(document, chunk):\n    return context_for(document, chunk)  # a long enough chunk"
)
DOC = "intro\n" + CHUNK + "\n" + "more text " * 50


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("This function builds the context for one chunk of a document.", None),
        ("", EMPTY),
        ("   \n", EMPTY),
        ("word " * 700, TOO_LONG),
        ("x" * 5000, TOO_LONG),
        ("I cannot help with that.", NOT_A_CONTEXT),
        ("As an AI language model, I ...", NOT_A_CONTEXT),
        ('"I\'m sorry, but the document is empty."', NOT_A_CONTEXT),
        ("Here: " + CHUNK, NOT_A_CONTEXT),
        ("<document>intro</document>", NOT_A_CONTEXT),
        (("more text " * 30).strip(), NOT_A_CONTEXT),
        ("Defines situate(document, chunk), the queue's entry point.", None),
        # The prompt's heading-trail line repeated back (what SmolLM2-135M answers through
        # llama.cpp: tests/llm/test_local_llamacpp.py).
        ("The chunk sits under: Brant pumps > Noise", NOT_A_CONTEXT),
        ("The chunk sits under: Kessel valves\nThe document is located within: x", NOT_A_CONTEXT),
        ("Chunk c3 sits under: Guide > Install", NOT_A_CONTEXT),
        ("Part of the guide: the chunk sits under the install section.", None),
    ],
)
def test_check_context(text: str, reason: str | None) -> None:
    verdict = check_context(text, chunk=CHUNK, document=DOC, count_tokens=words)
    assert (verdict.reason if verdict else None) == reason


def test_an_answer_cut_at_the_output_budget_is_too_long() -> None:
    good = "This function builds the context for one chunk of a document."
    verdict = check_context(good, chunk=CHUNK, document=DOC, count_tokens=words, truncated=True)
    assert verdict is not None and verdict.reason == TOO_LONG
    assert "output budget" in verdict.detail
