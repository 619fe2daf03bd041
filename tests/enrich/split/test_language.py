"""Budgets by meaning across languages: detection, the inflation table, and the chunker's use of
both, with the real detector (py3langid), tiktoken and embedders' own token counts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxr.config import load_settings
from ctxr.enrich.language import MIN_CONFIDENCE, detect_windows, dominant, sample_windows
from ctxr.enrich.split import split_document
from ctxr.enrich.split.cap import embedded_size
from ctxr.enrich.split.inflation import INFLATION, fit_to_input, language_budget
from ctxr.index import components
from ctxr.index.embed.base import Embedder
from ctxr.index.embed.onnx import OnnxEmbedder
from ctxr.pipeline.chunking import chunk_budget, default_chunker, document_budget
from ctxr.tokens import get_encoding
from ctxr.types import DocumentKind
from tests.fixtures.documents import make_document
from tests.fixtures.paths import UDHR as UDHR_FILE

UDHR: dict[str, list[str]] = json.loads(UDHR_FILE.read_text(encoding="utf-8"))["texts"]


def prose(lang: str, repeat: int = 6) -> str:
    """UDHR Articles 1-3 in ``lang``, repeated: a document of several chunks at 200 tokens."""
    return "\n\n".join(UDHR[lang] * repeat)


@pytest.fixture(scope="module")
def minilm() -> OnnxEmbedder:
    return OnnxEmbedder()


@pytest.fixture(scope="module")
def openai_sized() -> Embedder:
    # OpenAI's embedder counts its input with tiktoken offline; no request is ever sent.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "test-no-request")
        patch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        return components.make_embedder(load_settings(embedder="openai"))


@pytest.mark.parametrize("lang", sorted(UDHR))
def test_every_sample_language_is_detected_and_never_mistaken(lang: str) -> None:
    first, second, third = (detect_windows(article) for article in UDHR[lang])
    # Articles 1 and 2 (a paragraph each; 2 is two windows) are sure; Article 3, one short
    # sentence, may be unsure (Chinese, Arabic, Hindi), but is never another language.
    for windows in (first, second):
        assert {w.language for w in windows} == {lang}
        assert all(w.confidence >= MIN_CONFIDENCE for w in windows)
    assert {w.language for w in third} <= {lang, None}


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_the_table_reproduces_on_the_udhr_sample(encoding: str) -> None:
    # The table is FLORES-200's 2,009 sentences; the three articles must land near it.
    enc = get_encoding(encoding)

    def tokens(lang: str) -> int:
        return sum(len(enc.encode_ordinary(text)) for text in UDHR[lang])

    for lang in UDHR:
        measured = tokens(lang) / tokens("en")
        assert measured == pytest.approx(INFLATION[encoding][lang], rel=0.2), lang


def test_budgets_scale_by_language_and_english_keeps_its_own() -> None:
    for lang in UDHR:
        budget = language_budget(prose(lang), 200, "cl100k_base")
        assert budget.language == lang
        assert budget.inflation == pytest.approx(INFLATION["cl100k_base"][lang], abs=0.01)
        assert budget.max_tokens == (200 if lang == "en" else round(200 * budget.inflation))
    english = language_budget(prose("en"), 200, "cl100k_base")
    assert (english.inflation, english.max_tokens, english.scale(20)) == (1.0, 200, 20)


def test_a_mixed_document_gets_the_inflation_of_its_whole_sample() -> None:
    text = prose("en", 12) + "\n\n" + prose("ja", 4)
    windows = detect_windows(text)
    assert {w.language for w in windows} == {"en", "ja"}
    budget = language_budget(text, 200, "cl100k_base")
    assert 1.1 < budget.inflation < INFLATION["cl100k_base"]["ja"]
    assert budget.language == dominant(windows)


@pytest.mark.parametrize(
    "text",
    ["", "   \n", "Hi.", "12345 67.8 -- 0x1F", "| a | b |\n|---|---|\n| 1 | 2 |", "f(x) = y"],
)
def test_short_or_languageless_text_keeps_the_plain_budget(text: str) -> None:
    budget = language_budget(text, 200, "cl100k_base")
    assert (budget.language, budget.inflation, budget.max_tokens) == (None, 1.0, 200)


def test_an_encoding_without_a_table_keeps_the_plain_budget() -> None:
    budget = language_budget(prose("ja"), 200, "p50k_base")  # not measured: never loaded
    assert (budget.language, budget.inflation, budget.max_tokens) == ("ja", 1.0, 200)


def test_windows_are_bounded_and_spread_over_the_text() -> None:
    text = "x" * 100_000
    windows = sample_windows(text)
    assert len(windows) == 8 and windows[0][0] == 0 and windows[-1][1] == len(text)
    assert all(end - start == 500 for start, end in windows)
    assert sample_windows("short text") == [(0, 10)]


def test_code_and_the_setting_off_keep_the_plain_budget() -> None:
    on = load_settings(chunk_tokens=200)
    code = make_document("# コメント\n" + "\n".join(UDHR["ja"]), "code", language="python")
    assert document_budget(on, code).max_tokens == 200
    off = load_settings(chunk_tokens=200, language_budgets=False)
    assert document_budget(off, make_document(prose("ja"))).max_tokens == 200
    assert document_budget(on, make_document(prose("ja"))).max_tokens == 454


@pytest.mark.parametrize("kind", ["text", "markdown"])
def test_english_chunks_are_unchanged(kind: DocumentKind, minilm: OnnxEmbedder) -> None:
    doc = make_document("# Rights\n\n" + prose("en") if kind == "markdown" else prose("en"), kind)
    on = default_chunker(load_settings(chunk_tokens=200), minilm)(doc)
    off = default_chunker(load_settings(chunk_tokens=200, language_budgets=False), minilm)(doc)
    assert on == off
    plain = default_chunker(load_settings(chunk_tokens=200), None)(doc)
    assert plain == split_document(doc, max_tokens=200)


def test_japanese_and_turkish_chunks_hold_what_english_ones_do(openai_sized: Embedder) -> None:
    # The same passages in three languages: with a long-input embedder the cap does not bind,
    # so chunk counts (the same meaning in each) say how much each chunk holds.
    def counts(**extra: Any) -> dict[str, int]:
        chunker = default_chunker(load_settings(chunk_tokens=200, **extra), openai_sized)
        return {lang: len(chunker(make_document(prose(lang)))) for lang in ("en", "ja", "tr")}

    before, after = counts(language_budgets=False), counts()
    assert before["ja"] > 2 * before["en"] and before["tr"] > 1.5 * before["en"]
    for lang in ("ja", "tr"):
        assert abs(after[lang] - after["en"]) <= max(1, after["en"] // 4), (before, after)


@pytest.mark.parametrize("lang", sorted(UDHR))
def test_under_minilm_no_chunk_exceeds_its_input_nor_grows_in_number(
    lang: str, minilm: OnnxEmbedder
) -> None:
    doc = make_document(prose(lang))
    settings = load_settings(chunk_tokens=200)
    limit = minilm.max_tokens - settings.split.context_reserve_tokens
    size = embedded_size(minilm.count_tokens)
    on = default_chunker(settings, minilm)(doc)
    off = default_chunker(load_settings(chunk_tokens=200, language_budgets=False), minilm)(doc)
    assert all(size(chunk) <= limit for chunk in on)
    assert len(on) <= len(off)
    assert "".join(c.text for c in on).replace(" ", "") != ""
    budget = chunk_budget(settings, doc, minilm)
    assert 200 <= budget.max_tokens <= document_budget(settings, doc).max_tokens


def test_the_fit_keeps_a_scaled_budget_within_the_input_and_never_under_the_plain() -> None:
    text = prose("ja")
    scaled = language_budget(text, 200, "cl100k_base")
    assert scaled.max_tokens == 454
    roomy = fit_to_input(scaled, text, len, 10_000, "cl100k_base")
    assert roomy.max_tokens == 454  # characters as "word pieces": plenty of room
    tight = fit_to_input(scaled, text, lambda s: 4 * len(s), 208, "cl100k_base")
    assert tight.max_tokens == 200  # the cap binds at the plain budget already
    middle = fit_to_input(scaled, text, len, 300, "cl100k_base")
    assert 200 < middle.max_tokens < 454
