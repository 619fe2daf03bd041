"""The response cache: what makes its key, persistence across opens, damaged entries."""

from __future__ import annotations

from pathlib import Path

from ctxr.enrich.situate.response_cache import ResponseCache, cache_key

BASE = {
    "provider": "anthropic",
    "model": "claude-haiku-4-5",
    "prompt_version": "p1",
    "document_sha256": "d" * 64,
    "chunk_text": "some chunk",
    "heading_path": ("A", "B"),
}


def test_every_part_of_the_key_matters() -> None:
    key = cache_key(**BASE)  # type: ignore[arg-type]
    assert key == cache_key(**BASE)  # type: ignore[arg-type]
    changes = {
        "provider": "openai",
        "model": "claude-3-5-haiku",
        "prompt_version": "p2",
        "document_sha256": "e" * 64,
        "chunk_text": "some chunk!",
        "heading_path": ("A", "C"),
    }
    for field, value in changes.items():
        assert cache_key(**{**BASE, field: value}) != key, field  # type: ignore[arg-type]


def test_heading_paths_are_not_confused_by_joining() -> None:
    one = cache_key(**{**BASE, "heading_path": ("A > B",)})  # type: ignore[arg-type]
    two = cache_key(**{**BASE, "heading_path": ("A", "B")})  # type: ignore[arg-type]
    assert one != two


def test_entries_survive_reopening(tmp_path: Path) -> None:
    key = cache_key(**BASE)  # type: ignore[arg-type]
    with ResponseCache(tmp_path / "c") as cache:
        assert cache.get(key) is None
        cache.put(key, "The context.")
        cache.put("flagged", "From x.", "not a context")
    with ResponseCache(tmp_path / "c") as cache:
        hit = cache.get(key)
        assert hit is not None and (hit.context, hit.flagged) == ("The context.", None)
        flagged = cache.get("flagged")
        assert flagged is not None and flagged.flagged == "not a context"
        assert len(cache) == 2


def test_a_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c") as cache:
        cache._cache.set("bad-json", "{not json")
        cache._cache.set("not-text", b"bytes")
        cache._cache.set("wrong-shape", '{"context": 3}')
        assert cache.get("bad-json") is None
        assert cache.get("not-text") is None
        assert cache.get("wrong-shape") is None
