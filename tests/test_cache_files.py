"""A damaged cache never stops a run: it is moved aside, kept, and replaced by an empty one."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from ctxr.cache_files import is_damage, open_cache
from ctxr.enrich.situate.response_cache import ResponseCache
from ctxr.errors import StorageError
from ctxr.index.embed.cache import CachedEmbedder
from tests.fakes.hash_embedder import HashEmbedder


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


def _fill_to_the_limit(directory: Path) -> int:
    """A real cache with some entries; the number of pages its database holds."""
    with ResponseCache(directory) as responses:
        for i in range(40):
            responses.put(f"paid-{i}", f"a context that was paid for, number {i} " * 5)
    cache = open_cache(directory, "probe")
    try:
        return int(cache._sql("PRAGMA page_count").fetchone()[0])
    finally:
        cache.close()


def test_a_full_disk_at_open_is_named_and_the_cache_never_moved_aside(tmp_path: Path) -> None:
    # SQLite itself says "database or disk is full" (max_page_count is the limit a full disk
    # sets); that is an OperationalError, a DatabaseError, and once moved a healthy cache aside.
    pages = _fill_to_the_limit(tmp_path / "c")
    with pytest.raises(StorageError, match="is full") as raised:  # the tag index needs pages
        open_cache(
            tmp_path / "c", "LLM response cache", sqlite_max_page_count=pages, tag_index=True
        )
    message = str(raised.value)
    assert str(tmp_path / "c") in message and "free" in message and "Nothing was damaged" in message
    assert not list(tmp_path.glob("c.damaged-*"))  # left where it was
    room = open_cache(tmp_path / "c", "LLM response cache", sqlite_max_page_count=2**30)
    assert len(room) == 40 and room.get("paid-7") is not None  # room again: all there
    room.close()


def test_a_full_disk_on_write_keeps_every_answer_written_before(tmp_path: Path) -> None:
    pages = _fill_to_the_limit(tmp_path / "c")
    with ResponseCache(tmp_path / "c") as responses:
        responses._cache.reset("sqlite_max_page_count", pages)  # this connection's disk is full
        with pytest.raises(StorageError, match="LLM response cache") as raised:
            for i in range(200):
                responses.put(f"more-{i}", "another answer " * 40)
        assert "is full" in str(raised.value) and str(tmp_path / "c") in str(raised.value)
    with ResponseCache(tmp_path / "c") as responses:  # room again: everything put is there
        assert all(responses.get(f"paid-{i}") is not None for i in range(40))
        written = sum(responses.get(f"more-{i}") is not None for i in range(200))
        assert written < 200
    assert not list(tmp_path.glob("c.damaged-*"))


def test_the_embedding_cache_names_a_full_disk(tmp_path: Path) -> None:
    cached = CachedEmbedder(HashEmbedder(), tmp_path / "e")
    cached.embed(["first"])
    pages = int(cached._cache._sql("PRAGMA page_count").fetchone()[0])
    cached._cache.reset("sqlite_max_page_count", pages)
    with pytest.raises(StorageError, match="embedding cache"):
        cached.embed([f"text number {i} " * 30 for i in range(200)])
    cached.close()
    again = CachedEmbedder(HashEmbedder(), tmp_path / "e")
    assert again.embed(["first"]).shape == (1, 64) and again.hits == 1
    again.close()


def test_only_damage_sets_a_cache_aside() -> None:
    assert is_damage(sqlite3.DatabaseError("database disk image is malformed"))
    assert is_damage(sqlite3.DatabaseError("file is not a database"))
    for refused in ("database or disk is full", "attempt to write a readonly database",
                    "database is locked", "unable to open database file"):  # fmt: skip
        assert not is_damage(sqlite3.OperationalError(refused)), refused
