"""The dense retriever's confidence threshold: measured per embedder, set or turned off."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxr.config import load_settings
from ctxr.errors import ConfigError
from ctxr.index.embed.onnx import MODEL_NAME
from ctxr.index.manifest import IndexSettings
from ctxr.retrieve.confidence import dense_threshold
from ctxr.retrieve.service import SearchService
from tests.fixtures.index import BuiltIndex

MINILM = IndexSettings(MODEL_NAME, 384, "english", 1.2, 0.75)


def test_auto_is_the_threshold_measured_for_the_embedder_and_off_for_others() -> None:
    assert dense_threshold("auto", MINILM) == 0.7
    other = replace(MINILM, embedder="openai:text-embedding-3-small")
    assert dense_threshold("auto", other) is None
    # A prefix shifts every cosine: the measured threshold no longer holds.
    assert dense_threshold("auto", replace(MINILM, query_prefix="query: ")) is None
    assert dense_threshold("off", MINILM) is None
    assert dense_threshold(0.55, replace(MINILM, embedder="fake:hash-64")) == 0.55


@pytest.mark.parametrize(("given", "read"), [("AUTO", "auto"), (" off ", "off"), ("0.8", 0.8)])
def test_the_setting_reads_auto_off_or_a_cosine(given: str, read: float | str) -> None:
    assert load_settings(dense_confidence=given).search.dense_confidence == read


@pytest.mark.parametrize("given", ["1.5", "-2", "nan", "sure", True])
def test_anything_else_is_refused_by_name(given: object) -> None:
    with pytest.raises(ConfigError, match="CTXR_DENSE_CONFIDENCE"):
        load_settings(dense_confidence=given)
    with pytest.raises(ConfigError, match="CTXR_DENSE_CONFIDENT_BM25"):
        load_settings(dense_confident_bm25=0)


def test_a_search_of_the_embedded_default_uses_the_measured_threshold(
    examples_index: BuiltIndex,
) -> None:
    with SearchService(examples_index.settings) as service:
        assert service._fusion.confident_dense == 0.7
        assert service._fusion.confident_bm25 == 0.6
    with SearchService(examples_index.settings_with(dense_confidence="off")) as service:
        assert service._fusion.confident_dense is None
