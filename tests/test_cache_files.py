"""A damaged cache never stops a run: it is moved aside, kept, and replaced by an empty one."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fakes.hash_embedder import HashEmbedder

from ctxr.cache_files import open_cache
from ctxr.enrich.situate.response_cache import ResponseCache
from ctxr.index.embed.cache import CachedEmbedder


def _damage(directory: Path) -> None:
    (directory / "cache.db").write_bytes(b"not a database " * 200)


def test_a_readable_cache_is_kept_and_a_damaged_one_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = open_cache(tmp_path / "c", "test cache")
    cache["key"] = b"value"
    cache.close()
    again = open_cache(tmp_path / "c", "test cache")
    assert again["key"] == b"value"  # nothing readable is ever replaced
    again.close()

    _damage(tmp_path / "c")
    with caplog.at_level(logging.WARNING, logger="ctxr"):
        fresh = open_cache(tmp_path / "c", "test cache")
    assert fresh.get("key") is None
    fresh["key"] = b"new"
    fresh.close()
    [aside] = [p for p in tmp_path.iterdir() if p.name.startswith("c.damaged-")]
    assert (aside / "cache.db").read_bytes().startswith(b"not a database")  # kept as it was
    [warning] = [r.getMessage() for r in caplog.records]
    assert "test cache" in warning and str(aside) in warning and "could not be read" in warning


def test_both_caches_open_over_damage_and_say_what_was_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    embeddings, contexts = tmp_path / "embeddings", tmp_path / "contexts"
    with ResponseCache(contexts) as responses:
        responses.put("k", "a paid context")
    CachedEmbedder(HashEmbedder(), embeddings).close()
    _damage(embeddings)
    _damage(contexts)
    with caplog.at_level(logging.WARNING, logger="ctxr"):
        cached = CachedEmbedder(HashEmbedder(), embeddings)
        assert cached.embed(["the ferry leaves at noon"]).shape == (1, 64)
        cached.close()
        with ResponseCache(contexts) as responses:
            assert responses.get("k") is None
            responses.put("k", "asked again")
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "embedding cache" in messages and "LLM response cache" in messages
    assert "were paid for" in messages  # the user is told what the damaged copy holds
    kept = sorted(p.name.split(".")[0] for p in tmp_path.glob("*.damaged-*"))
    assert kept == ["contexts", "embeddings"]
